package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestEndToEndDryRun: the bootstrap under aws-lambda-rie answers a request
// with "dryRun": true with what the run would do (a dataset over
// INLINE_MAX_BYTES, so queued as tasks), estimated at the function's
// memory, and sends nothing to the target, the work queue or the failure
// queue; a driver's dryRun is refused with the reason.
func TestEndToEndDryRun(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)
	for o := range 3 {
		var b strings.Builder
		for i := range 300 {
			fmt.Fprintf(&b, `{"value":"o%d-r%d"}`+"\n", o, i)
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("in/%d.jsonl", o)), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.FailureQueueURL.Env+"="+failure,
		settings.ChunkSize.Env+"=2KiB", settings.InlineMaxBytes.Env+"=8KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256")
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "in/", "dryRun": true,
		"dryRunOptions": map[string]any{"sampleChunks": 100, "invocations": 4, "sqsPrice": 0.4, "lambdaPrice": 0.0000133334}})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	d := rep.DryRun
	if d == nil || !d.Queued || d.Counted != engine.CountedExact || d.Records != 900 || d.Messages != 900 || d.Requests != 90 ||
		d.Tasks != d.Chunks || d.WorkRequests != int64((d.Tasks+9)/10) || rep.Queued || rep.TasksQueued != 0 {
		t.Fatalf("answer %s; want an exact dry run of 900 records in 90 requests, queued as tasks, nothing queued", out)
	}
	if e := d.Estimate; e.MemoryMB != 256 || e.Invocations != 4 || e.SQSCost == 0 || e.LambdaCost == 0 || e.PlanSeconds == 0 {
		t.Errorf("estimate %+v; want 4 invocations at the function's 256 MB, priced", e)
	}
	for _, q := range []string{target, work, failure} {
		if got := localaws.ReceiveAll(t.Context(), sqsc, q, time.Second); len(got) > 0 {
			t.Errorf("queue %s holds %d messages after a dry run", q, len(got))
		}
	}
	batch := map[string]any{"BatchInput": map[string]any{"bucket": "lake", "dryRun": true}, "Items": []map[string]any{{"Key": "in/0.jsonl"}}}
	if _, err := fn.Invoke(t.Context(), batch); err == nil || !strings.Contains(err.Error(), "ArgumentError") || !strings.Contains(err.Error(), "s3sqs fanout -dry-run") {
		t.Errorf("a Distributed Map batch with dryRun: %v; want an ArgumentError that says what to do", err)
	}
	t.Logf("answer: %s", out)
}
