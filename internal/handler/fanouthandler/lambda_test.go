package fanouthandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// putDataset writes JSON Lines, CSV and text objects under Hive-partitioned
// keys with awkward names and returns the bodies the records must arrive
// as.
func putDataset(t *testing.T, st *fanoutstack.Stack, prefix string, perObject int) []string {
	t.Helper()
	var want []string
	var jsonl, csv, text strings.Builder
	csv.WriteString("id,name\n")
	for i := range perObject {
		v := fmt.Sprintf("j-%d", i)
		fmt.Fprintf(&jsonl, `{"value":%q,"msg_attributes":{"n":"%d"},"other":1}`+"\n", v, i)
		want = append(want, v)
		fmt.Fprintf(&csv, "%d,c-%d\n", i, i)
		want = append(want, fmt.Sprintf(`{"id":"%d","name":"c-%d"}`, i, i))
		fmt.Fprintf(&text, "t-%d\r\n", i)
		want = append(want, fmt.Sprintf("t-%d", i))
	}
	st.Put(t, prefix+"date=2024-01-01/kind=a b/part 0+1.jsonl", jsonl.String())
	st.Put(t, prefix+"date=2024-01-02/kind=ü=ß/part-0.csv", csv.String())
	st.Put(t, prefix+"date=2024-01-02/kind=x/notes.txt", text.String())
	st.Put(t, prefix+"_SUCCESS", "")
	slices.Sort(want)
	return want
}

func TestRequestInline(t *testing.T) {
	st := fanoutstack.New(t, "")
	want := putDataset(t, st, "exports/", 40)
	h, _ := st.Handler(t, engine.Options{Plan: dataset.PlanOptions{ChunkSize: 64}}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "exports/"})
	if rep.Queued || rep.Objects != 3 || rep.RecordsRead != 120 || rep.RecordsSent != 120 || rep.RecordsFailed != 0 || rep.RunID == "" {
		t.Errorf("report %+v: want 3 objects and 120 records sent inline", rep)
	}
	// The chunks' records share one sender, so 120 small records take 12
	// full requests, not one or more per chunk.
	if rep.Chunks <= 12 || rep.Requests != 12 {
		t.Errorf("%d requests for %d chunks of 120 records; want 12 full requests", rep.Requests, rep.Chunks)
	}
	bodies, ids := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
	if len(ids) != 120 {
		t.Errorf("%d distinct record ids, want 120", len(ids))
	}
}

func TestMessageAttributes(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "a.jsonl", `{"value":{"nested":true},"msg_attributes":{"tenant":"t1","kind":"k"}}`+"\n"+`[1,2]`+"\n")
	h, _ := st.Handler(t, engine.Options{}, nil)
	fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "a.jsonl"})
	msgs := localaws.Drain(t, st.SQS, st.Target, 3*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	byBody := map[string]types.Message{}
	for _, m := range msgs {
		byBody[aws.ToString(m.Body)] = m
	}
	m, ok := byBody[`{"nested":true}`]
	if !ok {
		t.Fatalf("no message with the value as body: %v", slices.Collect(mapsKeys(byBody)))
	}
	for k, v := range map[string]string{"tenant": "t1", "kind": "k", engine.AttrSource: "s3://lake/a.jsonl"} {
		if got := aws.ToString(m.MessageAttributes[k].StringValue); got != v {
			t.Errorf("attribute %s = %q, want %q", k, got, v)
		}
	}
	if _, ok := byBody["[1,2]"]; !ok {
		t.Error("a JSON value that is not an object is not its own body")
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestChunkMode(t *testing.T) {
	st := fanoutstack.New(t, "")
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, `{"id":%d,"pad":"%s"}`+"\n", i, strings.Repeat("x", i%50))
	}
	st.Put(t, "big.jsonl", b.String())
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeChunk, Target: sqsbatch.Queue{URL: st.Target, MaxMessageSize: 16 << 10}}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "big.jsonl"})
	msgs := localaws.Drain(t, st.SQS, st.Target, 3*time.Second)
	var lines []string
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		if len(body) > 16<<10 {
			t.Errorf("message of %d bytes over the 16 KiB limit", len(body))
		}
		n := strings.Count(body, "\n") + 1
		if got := aws.ToString(m.MessageAttributes[engine.AttrCount].StringValue); got != fmt.Sprint(n) {
			t.Errorf("count attribute %s, want %d", got, n)
		}
		lines = append(lines, strings.Split(body, "\n")...)
	}
	if len(lines) != 3000 || rep.RecordsSent != 3000 {
		t.Errorf("%d records in %d messages (report %d sent), want 3000", len(lines), len(msgs), rep.RecordsSent)
	}
	if int64(len(msgs)) != rep.Messages || len(msgs) > 3000/50 {
		t.Errorf("%d messages for 3000 records (report %d): chunk mode should pack them", len(msgs), rep.Messages)
	}
	// A request carries at most the queue's size limit, so 16 KiB
	// messages go one per request.
	if rep.Requests != int64(len(msgs)) {
		t.Errorf("%d requests for %d messages", rep.Requests, len(msgs))
	}
}

func TestFIFOTarget(t *testing.T) {
	st := fanoutstack.New(t, ".fifo")
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, `{"value":"v%02d","group_id":"g%d"}`+"\n", i, i%3)
	}
	b.WriteString(`{"value":"nogroup"}` + "\n")
	st.Put(t, "f.jsonl", b.String())
	h, _ := st.Handler(t, engine.Options{}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "f.jsonl"})
	if rep.RecordsSent != 31 {
		t.Fatalf("report %+v", rep)
	}
	order := map[string][]string{}
	for _, m := range localaws.Drain(t, st.SQS, st.Target, 3*time.Second) {
		g := m.Attributes["MessageGroupId"]
		order[g] = append(order[g], aws.ToString(m.Body))
		if m.Attributes["MessageDeduplicationId"] != aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue) {
			t.Errorf("dedup id %q is not the record id", m.Attributes["MessageDeduplicationId"])
		}
	}
	for g, bodies := range order {
		if !slices.IsSorted(bodies) {
			t.Errorf("group %s out of order: %v", g, bodies)
		}
	}
	objGroup := engine.GroupID(dataset.Object{Bucket: st.Bucket, Key: "f.jsonl"})
	if len(order["g0"]) != 10 || !cmp.Equal(order[objGroup], []string{"nogroup"}) {
		t.Errorf("groups %v: want 10 in g0 and the record without group_id in the object's group %s", order, objGroup)
	}
}

func TestWorkQueue(t *testing.T) {
	st := fanoutstack.New(t, "")
	want := putDataset(t, st, "big/", 60)
	h, _ := st.Handler(t, engine.Options{Planning: engine.Planning{InlineMaxBytes: 1}, Plan: dataset.PlanOptions{ChunkSize: 100}}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "big/", "runId": "run-1"})
	if !rep.Queued || rep.TasksQueued != rep.Chunks || rep.Chunks < 10 || rep.RecordsSent != 0 {
		t.Fatalf("report %+v: want every chunk queued as a task", rep)
	}
	tasks := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(tasks) != rep.TasksQueued {
		t.Fatalf("%d tasks on the work queue, want %d", len(tasks), rep.TasksQueued)
	}
	// Feed the tasks back as SQS events of up to 10, as Lambda would.
	for i := 0; i < len(tasks); i += 10 {
		ev := esm.Event(tasks[i:min(i+10, len(tasks))], fanoutstack.WorkARN)
		resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), ev)
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch item failures %v", resp.BatchItemFailures)
		}
	}
	bodies, ids := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
	if len(ids) != len(want) {
		t.Errorf("%d distinct record ids, want %d", len(ids), len(want))
	}
}

func TestFailures(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "mixed.jsonl", strings.Join([]string{
		`{"value":"fine"}`,
		`{"value":"bad\u0000char"}`,
		`{"value":"flaky"}`,
		`{"value":"refused"}`,
		`{"value":"x","msg_attributes":"not an object"}`,
		`{"value":"also fine"}`,
	}, "\n"))
	wrap := func(api sqsbatch.API) sqsbatch.API {
		return &sqsfault.Client{API: api, EntryErr: func(body string, attempt int) *types.BatchResultErrorEntry {
			switch {
			case body == "flaky" && attempt == 1:
				return &types.BatchResultErrorEntry{Code: aws.String("InternalError"), Message: aws.String("injected")}
			case body == "refused":
				return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), Message: aws.String("injected"), SenderFault: true}
			}
			return nil
		}}
	}
	h, _ := st.Handler(t, engine.Options{}, wrap)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "mixed.jsonl", "runId": "r"})
	if rep.RecordsRead != 6 || rep.RecordsSent != 3 || rep.RecordsFailed != 3 || rep.Retries != 1 {
		t.Errorf("report %+v: want 6 read, 3 sent, 3 failed, 1 retry", rep)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if diff := cmp.Diff([]string{"also fine", "fine", "flaky"}, bodies); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	got := map[string]engine.Failure{}
	for _, m := range localaws.Drain(t, st.SQS, st.Failure, time.Second) {
		var f engine.Failure
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); err != nil {
			t.Fatal(err)
		}
		got[f.Code] = f
	}
	for code, body := range map[string]string{
		string(sqsbatch.RuleInvalidCharacters): "bad\x00char",
		"InvalidParameterValue":                "refused",
		"UnmappableRecord":                     `{"value":"x","msg_attributes":"not an object"}`,
	} {
		f, ok := got[code]
		if !ok || f.Body != body || f.Source != "s3://lake/mixed.jsonl" || f.RunID != "r" || f.Message == "" {
			t.Errorf("failure %s: %+v, want body %q with source and reason", code, f, body)
		}
	}
	if len(got) != 3 {
		t.Errorf("failure output holds %d kinds, want 3: %v", len(got), got)
	}
}

func TestFailOnError(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "one.jsonl", `{"value":"bad\u0001"}`+"\n")
	st.Options.FailOnError = true
	h, _ := st.Handler(t, engine.Options{}, nil)
	b, _ := json.Marshal(map[string]any{"bucket": st.Bucket, "key": "one.jsonl"})
	if _, err := h.Invoke(t.Context(), b); err == nil || !strings.Contains(err.Error(), "FAIL_ON_ERROR") {
		t.Errorf("Invoke: %v, want a FAIL_ON_ERROR error", err)
	}
	if n := len(localaws.Drain(t, st.SQS, st.Failure, time.Second)); n != 1 {
		t.Errorf("%d records on the failure queue, want 1", n)
	}
}

func TestFailureS3(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "one.jsonl", `{"value":"ok"}`+"\n"+`{"value":"bad\u0001"}`+"\n")
	h, _ := st.Handler(t, engine.Options{FailureS3URI: "s3://lake/failed/"}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "one.jsonl", "runId": "r2"})
	out, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), Prefix: aws.String("failed/r2/")})
	if err != nil || len(out.Contents) != 1 {
		t.Fatalf("failure objects %v, %v; want one under failed/r2/", out, err)
	}
	obj, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(st.Bucket), Key: out.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(obj.Body)
	var f engine.Failure
	if err := json.Unmarshal(bytes.TrimSpace(body), &f); err != nil || f.Body != "bad\x01" || f.Code != string(sqsbatch.RuleInvalidCharacters) {
		t.Errorf("failure line %s (%v)", body, err)
	}
	if rep.RecordsSent != 1 || rep.RecordsFailed != 1 {
		t.Errorf("report %+v", rep)
	}
}

func TestS3EventInvocation(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "in/new file.jsonl", `{"value":"from event"}`+"\n")
	h, _ := st.Handler(t, engine.Options{}, nil)
	ev := json.RawMessage(s3Event("ObjectCreated:Put", "in/new+file.jsonl"))
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), ev)
	if rep.RecordsSent != 1 {
		t.Errorf("report %+v", rep)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if !cmp.Equal(bodies, []string{"from event"}) {
		t.Errorf("bodies %v", bodies)
	}
	// The same notification inside an SQS event: a message that is
	// neither a task nor a notification fails alone.
	sqsEv := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: string(ev), EventSource: "aws:sqs"},
		{MessageId: "m2", Body: "garbage", EventSource: "aws:sqs"},
	}}
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), sqsEv)
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "m2"}}) {
		t.Errorf("batch item failures %v, want only m2", resp.BatchItemFailures)
	}
}

// slowObject writes slow.jsonl, 400 records that take longer to read than
// a short deadline allows once st reads through slowS3, and returns their
// bodies and the task that reads them.
func slowObject(t *testing.T, st *fanoutstack.Stack) ([]string, string) {
	t.Helper()
	want, task, _ := st.Records(t, "slow.jsonl", 400)
	st.S3API = slowS3{st.S3}
	st.Options.DeadlineMargin = time.Second
	return want, task
}

func TestDeadlineContinuation(t *testing.T) {
	st := fanoutstack.New(t, "")
	// Reading is slowed so that the deadline falls mid-task.
	want, task := slowObject(t, st)
	h, _ := st.Handler(t, engine.Options{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "t1", Body: task, EventSource: "aws:sqs"}}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v: a task that stops in time succeeds and leaves a continuation", resp.BatchItemFailures)
	}
	cont := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(cont) != 1 || !strings.Contains(aws.ToString(cont[0].Body), `"resumeAt":`) {
		t.Fatalf("work queue holds %v, want one continuation", cont)
	}
	// The continuation finishes the task.
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), esm.Event(cont, fanoutstack.WorkARN))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("continuation failed: %v", resp.BatchItemFailures)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	unique := slices.Compact(slices.Clone(bodies))
	if diff := cmp.Diff(want, unique); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if dups := len(bodies) - len(unique); dups > 10*sqsbatch.DefaultMaxInFlight {
		t.Errorf("%d duplicates, want at most the in-flight batches", dups)
	}
}

// slowS3 serves object bodies 32 bytes every 10ms.
type slowS3 struct{ engine.S3API }

func (s slowS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := s.S3API.GetObject(ctx, in, opts...)
	if err == nil {
		out.Body = slowBody{out.Body}
	}
	return out, err
}

type slowBody struct{ io.ReadCloser }

func (b slowBody) Read(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return b.ReadCloser.Read(p[:min(len(p), 32)])
}

func TestRunReport(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "r.jsonl", `{"value":"ok"}`+"\n"+`{"value":"bad\u0002"}`+"\n")
	h, _ := st.Handler(t, engine.Options{ReportS3URI: "s3://lake/reports"}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "r.jsonl", "runId": "rr"})
	if rep.RecordsFailed != 1 {
		t.Fatalf("report %+v", rep)
	}
	get := func(key string) []byte {
		out, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		b, _ := io.ReadAll(out.Body)
		return b
	}
	var m engine.Manifest
	if err := json.Unmarshal(get("reports/rr/manifest.json"), &m); err != nil || m.RunID != "rr" || m.Objects != 1 || m.PlannedAt.IsZero() {
		t.Errorf("manifest %+v (%v)", m, err)
	}
	list, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("reports/rr/failed/")})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("failed tasks %v (%v), want one", list, err)
	}
	var ft engine.FailedTask
	if err := json.Unmarshal(get(aws.ToString(list.Contents[0].Key)), &ft); err != nil {
		t.Fatal(err)
	}
	if ft.Task.Chunk.Key != "r.jsonl" || ft.Task.Chunk.End != ft.Task.Chunk.Size || len(ft.Failures) != 1 || ft.Failures[0].Offset != 15 || ft.Failures[0].Code != "InvalidCharacters" {
		t.Errorf("failed task %+v", ft)
	}
}

// s3Event is an S3 event notification of one record per key, sent now,
// each object of 23 bytes.
func s3Event(name string, keys ...string) string {
	var recs []string
	for _, k := range keys {
		recs = append(recs, `{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"`+
			time.Now().UTC().Format("2006-01-02T15:04:05.000Z")+`","eventName":"`+name+`",`+
			`"s3":{"bucket":{"name":"lake"},"object":{"key":"`+k+`","size":23}}}`)
	}
	return `{"Records":[` + strings.Join(recs, ",") + `]}`
}

// TestNotificationFilter checks that fanout reads notifications by
// s3ingest's rules: only the event types it is set to take, and a record
// that cannot be read fails its own message after the good objects of that
// message are sent.
func TestNotificationFilter(t *testing.T) {
	st := fanoutstack.New(t, "")
	// Each object is 23 bytes, the size s3Event writes.
	st.Put(t, "in/a.jsonl", `{"value":"a","p":"xx"}`+"\n")
	st.Put(t, "in/b.jsonl", `{"value":"b","p":"xx"}`+"\n")
	st.Put(t, "other/c.jsonl", `{"value":"c","p":"xx"}`+"\n")
	st.Options.Filter = s3event.Filter{Prefix: "in/"}
	h, logs := st.Handler(t, engine.Options{}, nil)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "tagging", Body: s3Event("ObjectTagging:Put", "in/a.jsonl"), EventSource: "aws:sqs"},
		{MessageId: "restore", Body: s3Event("ObjectRestore:Completed", "in/a.jsonl"), EventSource: "aws:sqs"},
		{MessageId: "deleted", Body: s3Event("ObjectRemoved:Delete", "in/a.jsonl"), EventSource: "aws:sqs"},
		{MessageId: "elsewhere", Body: s3Event("ObjectCreated:Put", "other/c.jsonl"), EventSource: "aws:sqs"},
		// A key with a malformed escape is a bad record; b is good.
		{MessageId: "mixed", Body: s3Event("ObjectCreated:Put", "in/bad%zz.jsonl", "in/b.jsonl"), EventSource: "aws:sqs"},
		{MessageId: "good", Body: s3Event("ObjectCreated:Put", "in/a.jsonl"), EventSource: "aws:sqs"},
	}}
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), ev)
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "mixed"}}) {
		t.Errorf("batch item failures %v; want only the message with the bad record\n%s", resp.BatchItemFailures, logs)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if !cmp.Equal(bodies, []string{"a", "b"}) {
		t.Errorf("bodies %v; want a (created) and b (the good object of the mixed message) only", bodies)
	}
}

// TestNotificationRepeatedID sends a batch that holds one message twice
// (one id), whose bad record fails it: the failure is reported, though
// the engine answers for the first copy only.
func TestNotificationRepeatedID(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "in/b.jsonl", `{"value":"b","p":"xx"}`+"\n")
	h, logs := st.Handler(t, engine.Options{}, nil)
	m := events.SQSMessage{MessageId: "mixed", Body: s3Event("ObjectCreated:Put", "in/bad%zz.jsonl", "in/b.jsonl"), EventSource: "aws:sqs"}
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{m, m}})
	if len(resp.BatchItemFailures) == 0 || resp.BatchItemFailures[0].ItemIdentifier != "mixed" {
		t.Errorf("batch item failures %v; want the repeated message's\n%s", resp.BatchItemFailures, logs)
	}
}

// TestInlineDeadline gives a direct request more than its invocation's
// time: what is not sent by the deadline goes to the work queue as
// continuations, in the time the send context leaves, and they finish it.
func TestInlineDeadline(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, _ := slowObject(t, st)
	h, _ := st.Handler(t, engine.Options{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	rep := fanoutstack.Invoke[engine.Report](t, h, ctx, map[string]any{"bucket": st.Bucket, "key": "slow.jsonl"})
	if !rep.Queued || rep.TasksQueued != 1 || rep.RecordsSent == 0 {
		t.Fatalf("report %+v: want some records sent and one continuation queued", rep)
	}
	st.S3API = nil
	h, _ = st.Handler(t, engine.Options{}, nil)
	cont := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), esm.Event(cont, fanoutstack.WorkARN)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("continuation failed: %v", resp.BatchItemFailures)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if diff := cmp.Diff(want, slices.Compact(slices.Clone(bodies))); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestTaskWithoutProgress runs a task whose object does not answer before
// the deadline: the task did nothing, so its message fails and comes back,
// instead of queueing a continuation that is the task itself (which a FIFO
// work queue would drop as a duplicate, losing the chunk).
func TestTaskWithoutProgress(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "stuck.jsonl", `{"value":"v"}`+"\n")
	st.S3API = stuckS3{st.S3}
	st.Options.DeadlineMargin = time.Second
	h, _ := st.Handler(t, engine.Options{}, nil)
	task := `{"runId":"r","chunk":{"bucket":"lake","key":"stuck.jsonl","size":14,"index":0,"count":1,"start":0,"end":14,"format":"jsonl"}}`
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "t1", Body: task, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:work.fifo", Attributes: map[string]string{"MessageGroupId": "g"}},
	}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "t1"}}) {
		t.Errorf("batch item failures %v; want the task that made no progress", resp.BatchItemFailures)
	}
	if msgs := localaws.Drain(t, st.SQS, st.Work, time.Second); len(msgs) != 0 {
		t.Errorf("%d continuations queued; want none", len(msgs))
	}
}

// stuckS3 answers GetObject only when the caller gives up.
type stuckS3 struct{ engine.S3API }

func (s stuckS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestReadFailsPartWay runs a task whose object stops answering half-way,
// for longer than the reader resumes: the records read are sent once, the
// task succeeds with a continuation from the first record not read, and
// that continuation sends the rest. No record is sent twice.
func TestReadFailsPartWay(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, task, size := st.Records(t, "half.jsonl", 300)
	broken := &s3fault.CutAt{S3API: st.S3, At: int64(size / 2)}
	st.S3API = broken
	h, logs := st.Handler(t, engine.Options{}, nil)
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "t1", Body: task, EventSource: "aws:sqs"}}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v: a task that read some records succeeds and leaves a continuation", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), "read failed part-way") {
		t.Errorf("no warning of the failed read in the log:\n%s", logs)
	}
	cont := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(cont) != 1 {
		t.Fatalf("work queue holds %d messages, want one continuation", len(cont))
	}
	var next worktask.Task
	if err := json.Unmarshal([]byte(aws.ToString(cont[0].Body)), &next); err != nil {
		t.Fatal(err)
	}
	first, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	slices.Sort(first)
	// Lines are 17 bytes: the continuation starts after the last whole
	// line before the cut.
	if n := int(broken.At / 17); !cmp.Equal(first, want[:n]) || next.ResumeAt != int64(n-1)*17+1 {
		t.Fatalf("before the cut: %d records sent (want %d), continuation at %d", len(first), n, next.ResumeAt)
	}
	broken.Heal()
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), esm.Event(cont, fanoutstack.WorkARN))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("continuation failed: %v", resp.BatchItemFailures)
	}
	rest, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	all := append(first, rest...)
	slices.Sort(all)
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("records over both tasks (-want +got):\n%s", diff)
	}
}

// TestManifestMissingObject sends a Batch Operations manifest that names
// an object deleted since it was made, and a key list with a missing key:
// the manifest's run sends the other objects and counts the missing one,
// named in a warning; the key list, whose keys the request names itself,
// is refused naming the key.
func TestManifestMissingObject(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "m/a.jsonl", `{"value":"a1"}`+"\n")
	st.Put(t, "m/c d.jsonl", `{"value":"c1"}`+"\n"+`{"value":"c2"}`+"\n")
	st.Put(t, "manifests/job.csv", "lake,m/a.jsonl\nlake,m/gone.jsonl\nlake,m/c+d.jsonl\n")
	h, logs := st.Handler(t, engine.Options{}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"manifest": "s3://lake/manifests/job.csv"})
	if rep.Objects != 2 || rep.ObjectsMissing != 1 || rep.RecordsSent != 3 {
		t.Errorf("report %+v: want 2 objects sent, 1 missing, 3 records", rep)
	}
	if !strings.Contains(logs.String(), "object listed but not found") || !strings.Contains(logs.String(), "s3://lake/m/gone.jsonl") {
		t.Errorf("no warning naming the missing object:\n%.2000s", logs.String())
	}
	if n := len(localaws.Drain(t, st.SQS, st.Target, 2*time.Second)); n != 3 {
		t.Errorf("%d records on the target, want 3", n)
	}
	b, _ := json.Marshal(map[string]any{"bucket": st.Bucket, "keys": []string{"m/a.jsonl", "m/gone.jsonl"}})
	if _, err := h.Invoke(t.Context(), b); err == nil || !strings.Contains(err.Error(), "s3://lake/m/gone.jsonl") || !errors.Is(err, dataset.ErrNotFound) {
		t.Errorf("a key list with a missing key: %v, want an error naming it", err)
	}
}
