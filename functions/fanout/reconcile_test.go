package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestEndToEndReconcile: the bootstrap under aws-lambda-rie answers a
// {"reconcile": ...} request (as a schedule sends it) with the versions
// under the prefix that have no ingested marker in the claims table: a dry
// run sends nothing, a run sends one S3 notification of each to
// RECONCILE_QUEUE_URL, and a request naming another queue, or a field it
// does not know, is refused.
func TestEndToEndReconcile(t *testing.T) {
	moto := localaws.Endpoint(t, localaws.EnvMoto)
	cfg := localaws.Config(moto)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	sqsc := sqs.NewFromConfig(cfg)
	ddb, table := localaws.ClaimsTable(t)
	bucket := fmt.Sprintf("reconcile-fn-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	marks := claims.NewTable(ddb, table, claims.TableOptions{})
	for i, key := range []string{"in/a.jsonl", "in/b.jsonl", "in/c.jsonl", "in/d.jsonl"} {
		out, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(`{"v":1}` + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // a and c were ingested, as s3ingest marks them
			if err := marks.MarkDone(t.Context(), claims.ObjectKey(bucket, key, strings.Trim(aws.ToString(out.ETag), `"`))); err != nil {
				t.Fatal(err)
			}
		}
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	ingest := localaws.CreateQueue(t, sqsc, "-ingest", nil)
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+moto, "AWS_ENDPOINT_URL_S3="+moto, "AWS_ENDPOINT_URL_DYNAMODB="+moto, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.ClaimsTable.Env+"="+table, settings.ReconcileQueueURL.Env+"="+ingest,
		settings.ClaimsTTL.Env+"=3d", "AWS_LAMBDA_FUNCTION_TIMEOUT=60")
	invoke := func(req map[string]any) reconcile.Report {
		t.Helper()
		out, err := fn.Invoke(t.Context(), map[string]any{"reconcile": req})
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		var rep reconcile.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatal(err)
		}
		t.Logf("answer: %s", out)
		return rep
	}
	want := []string{"in/b.jsonl", "in/d.jsonl"}

	rep := invoke(map[string]any{"bucket": bucket, "prefix": "in/", "dryRun": true})
	var got []string
	for _, o := range rep.Objects {
		got = append(got, o.Key)
	}
	if !slices.Equal(got, want) || rep.Seen != 4 || rep.Ingested != 2 || rep.Sent != 0 || rep.MaxAge != "72h0m0s" {
		t.Errorf("dry run: %+v; want b and d missing of 4, nothing sent, over CLAIMS_TTL's 72h", rep)
	}
	if n := len(localaws.ReceiveAll(t.Context(), sqsc, ingest, time.Second)); n != 0 {
		t.Errorf("a dry run sent %d notifications", n)
	}

	rep = invoke(map[string]any{"bucket": bucket, "prefix": "in/", "sendTo": ingest})
	if rep.Missing != 2 || rep.Sent != 2 {
		t.Errorf("run: %+v; want 2 missing, 2 sent", rep)
	}
	got = nil
	for _, m := range localaws.Drain(t, sqsc, ingest, 2*time.Second) {
		var ev events.S3Event
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || len(ev.Records) != 1 {
			t.Fatalf("notification %s: %v", aws.ToString(m.Body), err)
		}
		r := ev.Records[0]
		if r.EventName != "ObjectCreated:Put" || r.S3.Bucket.Name != bucket {
			t.Errorf("notification %+v", r)
		}
		got = append(got, r.S3.Object.URLDecodedKey)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("notifications of %q; want %q", got, want)
	}

	for _, tc := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"bucket": bucket, "sendTo": "http://127.0.0.1:1/other"}, "the only queue"},
		{map[string]any{"bucket": bucket, "dryrun": true}, "unknown field"},
		{map[string]any{"prefix": "in/"}, "reconcile.bucket is required"},
		{map[string]any{"bucket": bucket, "notificationFormat": "xml"}, "notificationFormat"},
	} {
		_, err := fn.Invoke(t.Context(), map[string]any{"reconcile": tc.req})
		if !rie.IsFunctionError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a function error with %q", tc.req, err, tc.want)
		}
	}
}
