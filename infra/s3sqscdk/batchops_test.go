package s3sqscdk_test

import (
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// TestBatchOperationsRole checks the role of Batch Operations jobs: only
// batchoperations.s3.amazonaws.com assumes it, and it may invoke fanout
// (with a qualifier), read manifests under their prefix and write reports
// under theirs, and nothing else. Off by default.
func TestBatchOperationsRole(t *testing.T) {
	f := synth(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{BatchOperations: s3sqscdk.BatchOperationsProps{
		Enabled: true, ManifestBucketName: "inventory", ReportBucketName: "reports", ReportPrefix: "done/"}}})
	role := f.id(f.s.BatchOperationsRole)
	trust := canon(prop(f.res(t, role).Properties, "AssumeRolePolicyDocument", "Statement"))
	if !strings.Contains(trust, `"Principal":{"Service":"batchoperations.s3.amazonaws.com"}`) || strings.Count(trust, `"Principal"`) != 1 {
		t.Errorf("trust policy %s; want batchoperations.s3.amazonaws.com only", trust)
	}
	fn := getAtt(f.id(f.s.FanoutFunction))
	want := append(grants([]string{"lambda:InvokeFunction"}, []any{fn, join(fn, ":*")}, nil),
		grants([]string{"s3:GetObject", "s3:GetObjectVersion"}, []any{s3ARN("inventory", "/batch-manifests/*")}, nil)...)
	want = append(want, grants([]string{"s3:GetBucketLocation"}, []any{s3ARN("inventory", ""), s3ARN("reports", "")}, nil)...)
	want = append(want, grants([]string{"s3:PutObject"}, []any{s3ARN("reports", "/done/*")}, nil)...)
	if d := diffGrants(f.roleGrants(role), want); d != "" {
		t.Errorf("Batch Operations role grants:%s", d)
	}

	off := synth(t, s3sqscdk.Props{})
	if off.s.BatchOperationsRole != nil {
		t.Error("Batch Operations off: a role")
	}
	for _, id := range off.tmpl.ofType("AWS::IAM::Role") {
		if strings.Contains(canon(off.tmpl.Resources[id].Properties), "batchoperations") {
			t.Errorf("role %s trusts Batch Operations with the feature off", id)
		}
	}
}
