package fanouthandler_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// checkQueuesEmpty fails when any of the stack's queues holds a message.
func checkQueuesEmpty(t *testing.T, st *fanoutstack.Stack) {
	t.Helper()
	for _, q := range []string{st.Target, st.Work, st.Failure} {
		if got := localaws.ReceiveAll(t.Context(), st.SQS, q, time.Second); len(got) > 0 {
			t.Errorf("queue %s holds %d messages after a dry run", q, len(got))
		}
	}
}

// TestDryRunRequest: a request with "dryRun": true answers the run's
// counts and estimate, at the function's memory unless it gives one, and
// sends nothing; its summary line says it was a dry run.
func TestDryRunRequest(t *testing.T) {
	st := fanoutstack.New(t, "")
	putDataset(t, st, "exports/", 40)
	st.Options.MemoryMB = 512
	h, logs := st.Handler(t, engine.Options{Plan: dataset.PlanOptions{ChunkSize: 64}}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "exports/", "dryRun": true,
		"dryRunOptions": map[string]any{"sampleChunks": 1000}})
	d := rep.DryRun
	if d == nil || d.Records != 120 || d.Messages != 120 || d.Requests != 12 || d.Counted != engine.CountedExact {
		t.Fatalf("answer %+v, dryRun %+v; want 120 records in 12 requests", rep, d)
	}
	if d.Estimate.MemoryMB != 512 || rep.RecordsSent != 0 || rep.Requests != 0 {
		t.Errorf("answer %+v, estimate %+v; want the function's 512 MB and nothing sent", rep, d.Estimate)
	}
	checkQueuesEmpty(t, st)
	if !strings.Contains(logs.String(), `"kind":"dry-run"`) {
		t.Errorf("no dry-run summary line in:\n%s", logs)
	}
	rep = fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "exports/", "dryRun": true,
		"dryRunOptions": map[string]any{"memoryMB": 2048, "sampleChunks": 4, "invocations": 10, "sqsPrice": 0.4}})
	if d := rep.DryRun; d == nil || !strings.HasPrefix(d.Counted, "estimated from 4 of ") || d.Estimate.MemoryMB != 2048 ||
		math.Abs(d.Estimate.SQSCost-float64(d.BilledRequests)/1e6*0.4) > 1e-12 || d.Estimate.SQSCost == 0 {
		t.Errorf("with options: %+v", rep.DryRun)
	}
	checkQueuesEmpty(t, st)
}

// TestDriversRefuseDryRun: S3 Batch Operations (userArguments) and
// Distributed Map (BatchInput) refuse dryRun with the reason and what to
// do instead, and send nothing; "false" is no dry run and runs.
func TestDriversRefuseDryRun(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "a.jsonl", `{"value":"a"}`+"\n")
	h, _ := st.Handler(t, engine.Options{}, nil)
	const want = `a driver (S3 Batch Operations, Distributed Map) hands fanout its objects`
	resp := fanoutstack.Invoke[events.S3BatchJobResponse](t, h, t.Context(), batchEvent("inv-1", "job-1", map[string]string{"dryRun": "true"}, "a.jsonl"))
	if len(resp.Results) != 1 || resp.Results[0].ResultCode != string(fanouthandler.PermanentFailure) ||
		!strings.Contains(resp.Results[0].ResultString, want) || !strings.Contains(resp.Results[0].ResultString, `"dryRun": true`) {
		t.Errorf("Batch Operations answered %+v; want a PermanentFailure that says why", resp)
	}
	payload, _ := json.Marshal(map[string]any{"BatchInput": map[string]any{"bucket": "lake", "dryRun": true}, "Items": []map[string]any{{"Key": "a.jsonl"}}})
	_, err := h.Invoke(t.Context(), payload)
	var argErr *fanouthandler.ArgumentError
	if !errors.As(err, &argErr) || argErr.Field != "BatchInput" || !strings.Contains(err.Error(), want) {
		t.Errorf("Distributed Map: %v; want an ArgumentError of BatchInput that says why", err)
	}
	checkQueuesEmpty(t, st)
	resp = fanoutstack.Invoke[events.S3BatchJobResponse](t, h, t.Context(), batchEvent("inv-2", "job-2", map[string]string{"dryRun": "false"}, "a.jsonl"))
	if resp.Results[0].ResultCode != string(fanouthandler.Succeeded) {
		t.Errorf("dryRun false: %+v; want the task run", resp)
	}
	if got := st.Sent(t); strings.Join(got, ",") != "a" {
		t.Errorf("sent %q after dryRun false; want a", got)
	}
}
