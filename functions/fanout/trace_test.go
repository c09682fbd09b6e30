package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestTracing runs a request through the Lambda runtime API with
// TRACING=stdout: one trace holds the invocation's span, a span per chunk
// task, and the AWS calls under them (GetObject under its task, or, opened
// ahead of its task, under the task whose read opened it;
// SendMessageBatch under the invocation).
func TestTracing(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	var b strings.Builder
	for i := range 200 {
		b.WriteString(`{"value":"r` + strings.Repeat("x", i%5) + `"}` + "\n")
	}
	for _, key := range []string{"traced/a.jsonl", "traced/b.jsonl"} {
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.Tracing.Env+"=stdout", "AWS_LAMBDA_FUNCTION_TIMEOUT=60",
		// One chunk at a time: the first task's read opens the second's
		// first GET ahead, every time, which must be under a task too.
		settings.ChunkConcurrency.Env+"=1")
	if _, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "traced/"}); err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	fn.WaitLogs(`"Name":"fanout invocation"`, 5*time.Second)

	type span struct {
		Name        string
		SpanContext struct{ TraceID, SpanID string }
		Parent      struct{ SpanID string }
	}
	var spans []span
	sc := bufio.NewScanner(strings.NewReader(fn.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s span
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Name != "" && s.SpanContext.TraceID != "" {
			spans = append(spans, s)
		}
	}
	byName := map[string][]span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	inv := byName["fanout invocation"]
	if len(inv) != 1 {
		t.Fatalf("%d invocation spans; spans: %v", len(inv), keys(byName))
	}
	trace, root := inv[0].SpanContext.TraceID, inv[0].SpanContext.SpanID
	tasks := byName["fanout.task"]
	if len(tasks) != 2 {
		t.Errorf("%d task spans, want one per object", len(tasks))
	}
	taskIDs := map[string]bool{}
	for _, s := range tasks {
		taskIDs[s.SpanContext.SpanID] = true
		if s.SpanContext.TraceID != trace || s.Parent.SpanID != root {
			t.Errorf("task span %+v is not a child of the invocation", s)
		}
	}
	gets := byName["S3.GetObject"]
	if len(gets) < 2 {
		t.Errorf("%d GetObject spans, want at least one per task", len(gets))
	}
	for _, s := range gets {
		if !taskIDs[s.Parent.SpanID] {
			t.Errorf("GetObject span %+v is not under a task", s)
		}
	}
	sends := byName["SQS.SendMessageBatch"]
	if len(sends) < 40 {
		t.Errorf("%d SendMessageBatch spans, want one per request (400 records)", len(sends))
	}
	for _, s := range sends {
		if s.SpanContext.TraceID != trace {
			t.Errorf("SendMessageBatch span %+v is in another trace", s)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
