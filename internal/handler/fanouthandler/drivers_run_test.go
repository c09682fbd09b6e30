package fanouthandler_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// batchEvent is a schema 2.0 Batch Operations invocation of one task per
// key in bucket lake.
func batchEvent(invocationID, jobID string, args map[string]string, keys ...string) events.S3BatchJobEventV2 {
	ev := events.S3BatchJobEventV2{InvocationSchemaVersion: "2.0", InvocationID: invocationID, Job: events.S3BatchJobV2{ID: jobID, UserArguments: args}}
	for _, k := range keys {
		ev.Tasks = append(ev.Tasks, events.S3BatchJobTaskV2{TaskID: "t-" + k, S3Key: k, S3Bucket: "lake"})
	}
	return ev
}

// TestBatchOperationsRunReport: each invocation of a job writes its own
// part of the run report, under the job's run id, and no invocation writes
// the run's manifest.json, which the next would overwrite.
func TestBatchOperationsRunReport(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "a.jsonl", `{"value":"a"}`+"\n")
	st.Put(t, "b.jsonl", `{"value":"b1"}`+"\n"+`{"value":"b2"}`+"\n")
	h, _ := st.Handler(t, engine.Options{ReportS3URI: "s3://lake/reports/"}, nil)
	for _, inv := range []struct{ id, key string }{{"inv/1+", "a.jsonl"}, {"inv2", "b.jsonl"}} {
		resp := fanoutstack.Invoke[events.S3BatchJobResponse](t, h, t.Context(), batchEvent(inv.id, "job-9", nil, inv.key))
		if len(resp.Results) != 1 || resp.Results[0].ResultCode != "Succeeded" {
			t.Fatalf("answer %+v", resp)
		}
	}
	list, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("reports/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	want := "reports/s3batch-job-9/invocations/inv%2F1+.json reports/s3batch-job-9/invocations/inv2.json"
	if strings.Join(keys, " ") != want {
		t.Fatalf("report objects %q; want %q", keys, want)
	}
	out, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String("reports/s3batch-job-9/invocations/inv2.json")})
	if err != nil {
		t.Fatal(err)
	}
	var m engine.Manifest
	if err := json.NewDecoder(out.Body).Decode(&m); err != nil || m.RunID != "s3batch-job-9" || m.Objects != 1 || m.RecordsSent != 2 || m.PlannedAt.IsZero() {
		t.Errorf("invocation report %+v (%v): want the run, 1 object, 2 records", m, err)
	}
}

// TestBatchOperationsFailOnError: with FAIL_ON_ERROR a task with a record
// on the failure output is a PermanentFailure (a retry would not send it),
// and the invocation still answers for every task.
func TestBatchOperationsFailOnError(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "mixed.jsonl", `{"value":"ok"}`+"\n"+`not json`+"\n")
	st.Put(t, "good.jsonl", `{"value":"fine"}`+"\n")
	st.Options.FailOnError = true
	h, logs := st.Handler(t, engine.Options{}, nil)
	resp := fanoutstack.Invoke[events.S3BatchJobResponse](t, h, t.Context(), batchEvent("i", "j", nil, "mixed.jsonl", "good.jsonl"))
	if len(resp.Results) != 2 || resp.Results[0].ResultCode != "PermanentFailure" || !strings.Contains(resp.Results[0].ResultString, "1 records failed (FAIL_ON_ERROR") ||
		resp.Results[1].ResultCode != "Succeeded" {
		t.Errorf("answer %+v: want mixed.jsonl PermanentFailure for FAIL_ON_ERROR, good.jsonl Succeeded", resp)
	}
	if got := st.Sent(t); strings.Join(got, ",") != "fine,ok" {
		t.Errorf("sent %q; want both readable records", got)
	}
	if !strings.Contains(logs.String(), `"kind":"batch-operations"`) || !strings.Contains(logs.String(), `"itemsFailed":1`) {
		t.Errorf("summary line without the failed task:\n%s", logs)
	}
}

// TestDistributedMapRetryable: an item whose chunk another delivery holds
// (by the claims table) makes the batch a RetryableItemsError; once the
// claim is released the retry sends the item, and the item that was sent
// the first time is skipped, not sent again.
func TestDistributedMapRetryable(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "one.jsonl", `{"value":"one"}`+"\n")
	st.Put(t, "two.jsonl", `{"value":"two"}`+"\n")
	store := fanoutstack.ClaimsStore(t)
	h, _ := st.Handler(t, engine.Options{Claims: store}, nil)

	obj, err := dataset.Head(t.Context(), st.S3, "lake", "two.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	// The item is pinned by its Etag, as a listing gives it, not by the
	// version id the stand-in reports; it is one chunk.
	obj.VersionID = ""
	chunks, err := dataset.NewPlanner(st.S3, dataset.PlanOptions{}).Plan(t.Context(), obj)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("chunks %v (%v)", chunks, err)
	}
	tasks := []worktask.Task{{RunID: "exec-7", Chunk: chunks[0]}}
	held, err := store.Acquire(t.Context(), engine.ClaimKey(tasks[0]), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	batch := map[string]any{"BatchInput": map[string]any{"bucket": "lake", "runId": "exec-7"}, "Items": []map[string]any{
		{"Key": "one.jsonl"}, // no Size or Etag: pinned with HeadObject
		{"Key": "two.jsonl", "Size": obj.Size, "Etag": `"` + obj.ETag + `"`},
	}}
	payload, _ := json.Marshal(batch)
	_, err = h.Invoke(t.Context(), payload)
	var re *fanouthandler.RetryableItemsError
	if !errors.As(err, &re) || re.Result.Succeeded != 1 || re.Result.TemporaryFailures != 1 || re.Result.Results[1].Status != fanouthandler.TemporaryFailure ||
		!strings.Contains(re.Result.Results[1].Reason, "another delivery") {
		t.Fatalf("first attempt: %v; want a RetryableItemsError with two.jsonl held", err)
	}
	if err := store.Release(t.Context(), held, 0); err != nil {
		t.Fatal(err)
	}
	out, err := h.Invoke(t.Context(), payload)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	res, ok := out.(fanouthandler.MapResult)
	if !ok || res.Succeeded != 2 || res.RecordsSent != 1 || res.TasksSkipped != 1 {
		t.Errorf("retry answered %+v; want both items succeeded, two.jsonl sent, one.jsonl skipped as done", out)
	}
	if got := st.Sent(t); strings.Join(got, ",") != "one,two" {
		t.Errorf("sent %q; want each record once", got)
	}
}
