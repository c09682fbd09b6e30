package s3sqscdk_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// TestReconcileSchedule checks the scheduled reconcile: only
// scheduler.amazonaws.com assumes the schedule's role, which may invoke
// fanout and nothing else; fanout gets RECONCILE_QUEUE_URL, sending to the
// ingest queue and listing the bucket's versions under the key prefix.
// Off by default: none of it.
func TestReconcileSchedule(t *testing.T) {
	f := synth(t, s3sqscdk.Props{Ingest: s3sqscdk.IngestProps{KeyPrefix: "in/"}, Fanout: s3sqscdk.FanoutProps{ReconcileEveryMinutes: 60}})
	role := f.id(f.s.ReconcileScheduleRole)
	trust := canon(prop(f.res(t, role).Properties, "AssumeRolePolicyDocument", "Statement"))
	if !strings.Contains(trust, `"Principal":{"Service":"scheduler.amazonaws.com"}`) || strings.Count(trust, `"Principal"`) != 1 {
		t.Errorf("trust policy %s; want scheduler.amazonaws.com only", trust)
	}
	fn := f.id(f.s.FanoutFunction)
	if d := diffGrants(f.roleGrants(role), grants([]string{"lambda:InvokeFunction"}, []any{getAtt(fn)}, nil)); d != "" {
		t.Errorf("schedule role grants:%s", d)
	}
	sched := f.tmpl.ofType("AWS::Scheduler::Schedule")
	if len(sched) != 1 {
		t.Fatalf("%d schedules; want 1", len(sched))
	}
	p := f.res(t, sched[0]).Properties
	if e := prop(p, "ScheduleExpression"); e != "rate(60 minutes)" || canon(prop(p, "Target", "Arn")) != canon(getAtt(fn)) ||
		!strings.Contains(canon(prop(p, "Target", "Input")), `\"prefix\":\"in/\"`) {
		t.Errorf("schedule %s", canon(p))
	}
	fr := f.id(f.s.FanoutFunction.Role())
	got := f.roleGrants(fr)
	want := grants([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, []any{getAtt(f.id(f.s.IngestQueue))}, nil)
	want = append(want, grants([]string{"s3:ListBucketVersions"}, []any{getAtt(f.id(f.s.Bucket))}, map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"in/*"}}})...)
	for _, g := range want {
		if !slices.Contains(got, g) {
			t.Errorf("fanout lacks %s; has %v", g, got)
		}
	}
	if v := prop(f.res(t, fn).Properties, "Environment", "Variables", "RECONCILE_QUEUE_URL"); canon(v) != canon(ref(f.id(f.s.IngestQueue))) {
		t.Errorf("RECONCILE_QUEUE_URL = %s", canon(v))
	}

	off := synth(t, s3sqscdk.Props{})
	if off.s.ReconcileScheduleRole != nil || len(off.tmpl.ofType("AWS::Scheduler::Schedule")) != 0 {
		t.Error("reconcile off: a schedule or its role")
	}
	for _, g := range off.roleGrants(off.id(off.s.FanoutFunction.Role())) {
		if g.Action == "s3:ListBucketVersions" || strings.Contains(g.Resource, "IngestQueue") {
			t.Errorf("reconcile off: fanout has %s", g)
		}
	}
}
