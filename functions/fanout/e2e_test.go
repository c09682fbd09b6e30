package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/localaws"
	"github.com/s3sqs/s3sqs/internal/rie"
	"github.com/s3sqs/s3sqs/pkg/fanout"
)

// TestEndToEnd builds the function's bootstrap and runs it under
// aws-lambda-rie against fauxqs and an S3 stand-in: a direct request for a
// dataset large enough to go through the work queue, then the work queue's
// tasks fed back as SQS events one invocation at a time, until every record
// is on the target queue.
func TestEndToEnd(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)

	want := map[string]bool{}
	for o, key := range []string{
		"exports/date=2024-01-01/region=eu west/part 0+1.jsonl",
		"exports/date=2024-01-01/region=us=east/part-1.jsonl",
		"exports/date=2024-01-02/region=ñandú/part-2.jsonl",
		"exports/date=2024-01-02/region=x/100%.jsonl",
	} {
		var b strings.Builder
		for i := range 500 {
			v := fmt.Sprintf("o%d-r%d", o, i)
			fmt.Fprintf(&b, `{"value":%q,"msg_attributes":{"object":"%d"}}`+"\n", v, o)
			want[v] = true
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}

	fn := rie.Start(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, envS3PathStyle+"=true",
		envTargetQueueURL+"="+target, envWorkQueueURL+"="+work, envFailureQueueURL+"="+failure,
		envChunkSize+"=4KiB", envInlineMaxBytes+"=8KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "exports/"})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep fanout.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Queued || rep.Objects != 4 || rep.TasksQueued != rep.Chunks {
		t.Fatalf("report %s: want 4 objects queued as tasks", out)
	}
	t.Logf("cold start (first invocation, including init): %v; %d tasks", fn.Init, rep.TasksQueued)

	tasks := 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			break
		}
		for i := 0; i < len(msgs); i += 10 {
			out, err := fn.Invoke(t.Context(), sqsEvent(msgs[i:min(i+10, len(msgs))]))
			if err != nil {
				t.Fatalf("tasks: %v", err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("tasks answered %s (%v)", out, err)
			}
		}
		tasks += len(msgs)
	}
	if tasks < rep.TasksQueued {
		t.Errorf("ran %d tasks, want at least %d", tasks, rep.TasksQueued)
	}
	got := map[string]bool{}
	for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
		got[aws.ToString(m.Body)] = true
		if aws.ToString(m.MessageAttributes[fanout.AttrRecordID].StringValue) == "" {
			t.Fatalf("message without a record id: %v", m.MessageAttributes)
		}
	}
	missing := 0
	for v := range want {
		if !got[v] {
			missing++
		}
	}
	if missing > 0 || len(got) != len(want) {
		t.Errorf("%d of %d records missing, %d received", missing, len(want), len(got))
	}
	if !strings.Contains(fn.Logs(), `"fanout invocation"`) || !strings.Contains(fn.Logs(), `"CloudWatchMetrics"`) {
		t.Errorf("no summary line or EMF metrics in the function's output:\n%.2000s", fn.Logs())
	}
}

// TestEndToEndDeadline gives the function under aws-lambda-rie a task too
// large for its timeout: each invocation stops before its deadline and
// queues a continuation from the first record it did not read, and the
// continuations finish the task with nothing missing.
func TestEndToEndDeadline(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	const n = 30_000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%06d"}`+"\n", i)
	}
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("big.jsonl"), Body: strings.NewReader(b.String())}); err != nil {
		t.Fatal(err)
	}
	fn := rie.Start(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, envS3PathStyle+"=true",
		envTargetQueueURL+"="+target, envWorkQueueURL+"="+work, envInlineMaxBytes+"=1KiB", envMaxInFlight+"=2",
		envDeadlineMargin+"=2500ms", "AWS_LAMBDA_FUNCTION_TIMEOUT=3")
	if _, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "key": "big.jsonl"}); err != nil {
		t.Fatal(err)
	}
	invocations := 0
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			out, err := fn.Invoke(t.Context(), sqsEvent([]types.Message{m}))
			if err != nil {
				t.Fatalf("task: %v", err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("task answered %s (%v)", out, err)
			}
			invocations++
		}
	}
	got := map[string]int{}
	for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
		got[aws.ToString(m.Body)]++
	}
	missing := 0
	for i := range n {
		if got[fmt.Sprintf("r%06d", i)] == 0 {
			missing++
		}
	}
	if missing > 0 || invocations < 2 {
		t.Errorf("%d of %d records missing after %d task invocations (want none missing, and at least one continuation)", missing, n, invocations)
	}
	t.Logf("%d task invocations, %d distinct records", invocations, len(got))
}

// e2eStack starts an S3 stand-in with a bucket "lake" and returns the
// endpoints and clients for fauxqs and it.
func e2eStack(t *testing.T) (sqsEndpoint, s3URL string, s3c *s3.Client, sqsc *sqs.Client) {
	t.Helper()
	sqsEndpoint = localaws.Endpoint(t, localaws.EnvSQS)
	s3URL = localaws.FakeS3URL(t)
	s3c = localaws.S3Client(s3URL)
	sqsc = sqs.NewFromConfig(localaws.SQS(t))
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	return sqsEndpoint, s3URL, s3c, sqsc
}
