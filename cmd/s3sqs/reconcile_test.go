package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// reconcileEnv is a bucket on moto_server whose notifications go to an
// ingest queue there, s3ingest's handler with a claims table, and its
// output queue.
type reconcileEnv struct {
	t                 *testing.T
	s3c               *s3.Client
	sqsc              *sqs.Client
	bucket, table     string
	ingest, ingestARN string
	output            string
	handler           *ingesthandler.Handler
	uploaded          []string
}

func newReconcileEnv(t *testing.T) *reconcileEnv {
	t.Helper()
	moto := localaws.Endpoint(t, localaws.EnvMoto)
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Setenv(v, moto)
	}
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	cfg := localaws.Config(moto)
	e := &reconcileEnv{t: t, s3c: s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), sqsc: sqs.NewFromConfig(cfg)}
	ddb, table := localaws.ClaimsTable(t)
	e.table = table
	e.bucket = fmt.Sprintf("reconcile-%d", time.Now().UnixNano())
	ctx := t.Context()
	if _, err := e.s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		t.Fatal(err)
	}
	e.ingest = localaws.CreateQueue(t, e.sqsc, "-ingest", nil)
	e.output = localaws.CreateQueue(t, e.sqsc, "-output", nil)
	a, err := e.sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.ingest), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	e.ingestARN = a.Attributes["QueueArn"]
	runner, err := engine.New(ctx, e.s3c, e.sqsc, engine.Options{
		Target: sqsbatch.Queue{URL: e.output}, Claims: claims.NewTable(ddb, table, claims.TableOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.handler = ingesthandler.New(runner, ingesthandler.Options{})
	return e
}

// notify sends the bucket's object-created notifications to the ingest
// queue from now on.
func (e *reconcileEnv) notify() {
	e.t.Helper()
	_, err := e.s3c.PutBucketNotificationConfiguration(e.t.Context(), &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(e.bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			QueueArn: aws.String(e.ingestARN), Events: []s3types.Event{"s3:ObjectCreated:*"},
		}}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// upload puts key with two records, {"id":"key/1"} and {"id":"key/2"}.
func (e *reconcileEnv) upload(key string) {
	e.t.Helper()
	body := fmt.Sprintf("{\"id\":%q}\n{\"id\":%q}\n", key+"/1", key+"/2")
	if _, err := e.s3c.PutObject(e.t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		e.t.Fatal(err)
	}
	e.uploaded = append(e.uploaded, key)
}

// ingestQueued runs s3ingest's handler on what the ingest queue holds,
// except the notifications naming drop (a key's last segment, which S3's
// key encoding leaves as it is), which it deletes, and
// returns how many messages it handled.
func (e *reconcileEnv) ingestQueued(drop string) int {
	e.t.Helper()
	msgs := localaws.Drain(e.t, e.sqsc, e.ingest, 2*time.Second)
	var ev events.SQSEvent
	for _, m := range msgs {
		if drop != "" && strings.Contains(aws.ToString(m.Body), drop+`"`) {
			continue // dropped on purpose: Drain deleted it
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), EventSourceARN: e.ingestARN})
	}
	for len(ev.Records) > 0 {
		n := min(10, len(ev.Records))
		resp, err := e.handler.Handle(e.t.Context(), events.SQSEvent{Records: ev.Records[:n]})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			e.t.Fatalf("s3ingest: %v, failures %v", err, resp.BatchItemFailures)
		}
		ev.Records = ev.Records[n:]
	}
	return len(msgs)
}

// reconcile runs s3sqs reconcile with args and returns its report.
func (e *reconcileEnv) reconcile(want int, args ...string) (reconcile.Report, string) {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"reconcile", "-bucket", e.bucket, "-prefix", "in/", "-claims-table", e.table, "-s3-path-style"}, args...)
	if code := run(e.t.Context(), args, strings.NewReader(""), &stdout, &stderr, false); code != want {
		e.t.Fatalf("%v: exit %d, want %d; stderr:\n%s", args, code, want, stderr.String())
	}
	e.t.Logf("s3sqs %s\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	var rep reconcile.Report
	if want == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			e.t.Fatalf("report: %v\n%s", err, stdout.String())
		}
	}
	return rep, stderr.String()
}

func missingKeys(r reconcile.Report) []string {
	var keys []string
	for _, o := range r.Objects {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

// TestReconcile drops some notifications on purpose (objects uploaded
// before the bucket notified, one notification deleted), ingests the rest,
// and holds reconcile to finding exactly the dropped ones; sent again,
// s3ingest ingests them and every record arrives once.
func TestReconcile(t *testing.T) {
	e := newReconcileEnv(t)
	e.upload("in/early-a.json")
	e.upload("in/early-b.json")
	e.upload("out/elsewhere.json") // not under the prefix
	e.notify()
	for _, k := range []string{"in/c.json", "in/d.json", "in/lost.json", "in/e.json"} {
		e.upload(k)
	}
	// S3 (and moto) sends an s3:TestEvent when the configuration is put.
	if n := e.ingestQueued("lost.json"); n != 5 {
		t.Fatalf("the ingest queue held %d messages; want the test event and the 4 notifications of the objects uploaded after it", n)
	}
	dropped := []string{"in/early-a.json", "in/early-b.json", "in/lost.json"}

	rep, summary := e.reconcile(0, "-dry-run")
	if got := missingKeys(rep); !slices.Equal(got, dropped) {
		t.Errorf("dry run missing %q; want %q", got, dropped)
	}
	if rep.Seen != 6 || rep.Ingested != 3 || rep.Missing != 3 || rep.Sent != 0 || !rep.DryRun || rep.Failed != 0 {
		t.Errorf("dry run report %+v; want 6 seen, 3 ingested, 3 missing, none sent", rep)
	}
	if !strings.Contains(summary, "6 object versions seen, 3 already ingested, 3 missing (dry run: nothing sent)") {
		t.Errorf("summary %q", summary)
	}
	if n := len(localaws.Drain(t, e.sqsc, e.ingest, time.Second)); n != 0 {
		t.Errorf("a dry run sent %d messages", n)
	}

	rep, _ = e.reconcile(0, "-send-to", e.ingest)
	if rep.Missing != 3 || rep.Sent != 3 || rep.DryRun {
		t.Errorf("send report %+v; want 3 missing, 3 sent", rep)
	}
	if n := e.ingestQueued(""); n != 3 {
		t.Errorf("the ingest queue held %d notifications after the reconcile; want 3", n)
	}
	var ids []string
	for _, m := range localaws.Drain(t, e.sqsc, e.output, 2*time.Second) {
		var rec struct{ ID string }
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil {
			t.Fatalf("record %s: %v", aws.ToString(m.Body), err)
		}
		ids = append(ids, rec.ID)
	}
	slices.Sort(ids)
	var want []string
	for _, k := range e.uploaded {
		if strings.HasPrefix(k, "in/") {
			want = append(want, k+"/1", k+"/2")
		}
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("records delivered %q; want each of %q once", ids, want)
	}

	rep, _ = e.reconcile(0, "-dry-run")
	if rep.Seen != 6 || rep.Ingested != 6 || rep.Missing != 0 {
		t.Errorf("after the resend: %+v; want all 6 ingested", rep)
	}
	// Every version is younger than a minute: -max-age 1ns skips them all.
	rep, summary = e.reconcile(0, "-dry-run", "-max-age", "1ns")
	if rep.SkippedTooOld != 6 || rep.Missing != 0 || rep.Ingested != 0 || !strings.Contains(summary, "6 older than 1ns") {
		t.Errorf("-max-age 1ns: %+v, %q; want all 6 skipped as too old", rep, summary)
	}

	// A Batch Operations CSV manifest naming an ingested object and one
	// outside the prefix that no notification ever named.
	manifest := e.bucket + ",in/c.json\n" + e.bucket + ",out/elsewhere.json\n"
	if _, err := e.s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.bucket), Key: aws.String("manifests/m.csv"), Body: strings.NewReader(manifest)}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"reconcile", "-manifest", "s3://" + e.bucket + "/manifests/m.csv", "-max-age", "off", "-claims-table", e.table, "-s3-path-style", "-dry-run"}
	if code := run(t.Context(), args, nil, &stdout, &stderr, false); code != 0 {
		t.Fatalf("-manifest: exit %d: %s", code, stderr.String())
	}
	rep = reconcile.Report{}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if got := missingKeys(rep); rep.Seen != 2 || rep.Ingested != 1 || !slices.Equal(got, []string{"out/elsewhere.json"}) {
		t.Errorf("-manifest: %+v; want 2 seen, in/c.json ingested, out/elsewhere.json missing", rep)
	}
}

// TestReconcileErrors holds reconcile to refusing bad command lines (exit
// 2) and a claims table that does not exist (exit 1, nothing compared).
func TestReconcileErrors(t *testing.T) {
	e := newReconcileEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-dry-run", "-send-to", "http://q"}, "give one of -dry-run and -send-to"},
		{[]string{}, "give one of -dry-run and -send-to"},
		{[]string{"-dry-run", "-notification-format", "xml"}, "-notification-format"},
		{[]string{"-dry-run", "-max-age", "soon"}, "-max-age"},
		{[]string{"-dry-run", "extra"}, "unexpected arguments"},
		{[]string{"-dry-run", "-manifest", "s3://b/m.csv"}, "not both"},
	} {
		_, stderr := e.reconcile(2, tc.args...)
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: stderr %q; want %q", tc.args, stderr, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"reconcile", "-bucket", e.bucket, "-all", "-dry-run"}, nil, &stdout, &stderr, false); code != 2 || !strings.Contains(stderr.String(), "-claims-table is required") {
		t.Errorf("no table: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"reconcile", "-manifest", "s3://b/m.csv", "-claims-table", e.table, "-dry-run"}, nil, &stdout, &stderr, false); code != 2 || !strings.Contains(stderr.String(), "-max-age off") {
		t.Errorf("-manifest without -max-age off: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"reconcile", "-bucket", e.bucket, "-all", "-claims-table", "no-such-table", "-dry-run", "-s3-path-style"}, nil, &stdout, &stderr, false); code != 1 || !strings.Contains(stderr.String(), "-claims-table no-such-table") {
		t.Errorf("missing table: exit %d, %q", code, stderr.String())
	}
	// The whole bucket is reconciled only when said: a forgotten -prefix
	// no longer lists every version of it.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "-bucket", e.bucket, "-claims-table", e.table, "-dry-run"}, "name a -prefix, or say -all"},
		{[]string{"reconcile", "-bucket", e.bucket, "-all", "-prefix", "in/", "-claims-table", e.table, "-dry-run"}, "not with -prefix or -manifest"},
	} {
		stderr.Reset()
		if code := run(t.Context(), tc.args, nil, &stdout, &stderr, false); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
