package engine_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestSendStopSettlesEachTask runs two tasks in one send that stops (SQS
// refuses the third request for good): the task whose records were all
// accepted in the first two requests is done, the other is released at
// its first record not accepted. Delivered again, the first is skipped and
// the second sends only what the stopped send did not.
func TestSendStopSettlesEachTask(t *testing.T) {
	st := fanoutstack.New(t, "")
	wantA, taskA, _ := st.Records(t, "a.jsonl", 5)
	wantB, taskB, _ := st.Records(t, "b.jsonl", 100)
	store := fanoutstack.ClaimsStore(t)
	var broken atomic.Bool
	broken.Store(true)
	h, _ := st.Handler(t, engine.Options{Claims: store, ChunkConcurrency: 1, Send: sqsbatch.Options{MaxInFlight: 1}, FailureS3URI: "s3://lake/failed/"}, func(api sqsbatch.API) sqsbatch.API {
		return &sqsfault.Client{API: api, RequestErr: func(n int) error {
			if broken.Load() && n >= 3 {
				return &smithy.GenericAPIError{Code: "AccessDenied", Message: "injected by the test"}
			}
			return nil
		}, EntryErr: sqsfault.SenderFault("InvalidParameterValue", func(body string) bool { return body == "r012" })}
	})
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("a", taskA), taskMessage("b", taskB)}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "b"}}) {
		t.Fatalf("failures %v, want only b's: every record of a was accepted", resp.BatchItemFailures)
	}
	// The first two requests carried a's 5 records and b's first 15, of
	// which SQS refused r012 for good: it is on the failure output now,
	// since b's next attempt starts after it.
	first := st.Sent(t)
	accepted := slices.DeleteFunc(append(slices.Clone(wantA), wantB[:15]...), func(v string) bool { return v == "r012" })
	if want := slices.Sorted(slices.Values(accepted)); !cmp.Equal(first, want) {
		t.Fatalf("the stopped send delivered %v, want %v", first, want)
	}
	if got := failedOffsets(t, st, "failed/r/", ".jsonl", failureLines(t)); !cmp.Equal(got, []int64{204}) {
		t.Fatalf("failure output holds offsets %v, want r012's, 204", got)
	}
	broken.Store(false)
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("a", taskA), taskMessage("b", taskB)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v on the second delivery", resp.BatchItemFailures)
	}
	if diff := cmp.Diff(wantB[15:], st.Sent(t)); diff != "" {
		t.Errorf("second delivery (-want +got): only b's records not accepted before:\n%s", diff)
	}
}

// TestFailuresOfEveryAttempt breaks a task's read part-way, after a record
// that SQS refuses for good; the task's message, delivered again, resumes
// from its claim after that record, and its own refused record goes to a
// file of its own, so that the failure output and the run report keep both
// attempts' failures.
func TestFailuresOfEveryAttempt(t *testing.T) {
	st := fanoutstack.New(t, "")
	_, task, size := st.Records(t, "two.jsonl", 300)
	broken := &s3fault.CutAt{S3API: st.S3, At: int64(size / 2)}
	st.S3API = broken
	bad := func(body string) bool { return body == "r010" || body == "r290" }
	h, _ := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t), FailureS3URI: "s3://lake/failed/", ReportS3URI: "s3://lake/reports/"}, func(api sqsbatch.API) sqsbatch.API {
		return &sqsfault.Client{API: api, EntryErr: sqsfault.SenderFault("InvalidParameterValue", bad)}
	})
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	cont := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(cont) != 1 {
		t.Fatalf("%d continuations, want 1", len(cont))
	}
	// The task's message comes back (as when the invocation died before
	// deleting it): it resumes where its claim says, then the
	// continuation finds the task done.
	broken.Heal()
	for _, m := range []events.SQSMessage{taskMessage("t1", task), taskMessage("c1", aws.ToString(cont[0].Body))} {
		resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{m}})
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s failed: %v", m.MessageId, resp.BatchItemFailures)
		}
	}
	// r010 is the record at offset 170, r290 at 4930.
	if got := failedOffsets(t, st, "failed/r/", ".jsonl", failureLines(t)); !cmp.Equal(got, []int64{170, 4930}) {
		t.Errorf("failure output holds offsets %v, want [170 4930]", got)
	}
	if got := failedOffsets(t, st, "reports/r/failed/", ".json", func(b []byte) []int64 {
		var ft engine.FailedTask
		if err := json.Unmarshal(b, &ft); err != nil {
			t.Fatal(err)
		}
		var offs []int64
		for _, f := range ft.Failures {
			offs = append(offs, f.Offset)
		}
		return offs
	}); !cmp.Equal(got, []int64{170, 4930}) {
		t.Errorf("run report lists offsets %v, want [170 4930]", got)
	}
}

// failedOffsets reads every object under prefix with the given suffix and
// returns the offsets offsets finds in them, sorted.
func failedOffsets(t *testing.T, st *fanoutstack.Stack, prefix, suffix string, offsets func([]byte) []int64) []int64 {
	t.Helper()
	list, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var all []int64
	for _, o := range list.Contents {
		if !strings.HasSuffix(aws.ToString(o.Key), suffix) {
			continue
		}
		out, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(st.Bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if _, err := io.Copy(&b, out.Body); err != nil {
			t.Fatal(err)
		}
		out.Body.Close()
		all = append(all, offsets([]byte(b.String()))...)
	}
	slices.Sort(all)
	return all
}

// failureLines returns the offsets of a failure output object's lines.
func failureLines(t *testing.T) func([]byte) []int64 {
	return func(b []byte) []int64 {
		var offs []int64
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var f engine.Failure
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatal(err)
			}
			offs = append(offs, f.Offset)
		}
		return offs
	}
}

// TestCorruptObject sends a .gz object whose stream is cut short, as a
// request and as a chunk task: the records before the cut are sent, the
// rest of the object is one failure with its code and first offset not
// read, nothing is continued, and the answer counts the object as failed.
func TestCorruptObject(t *testing.T) {
	st := fanoutstack.New(t, "")
	var plain bytes.Buffer
	var want []string
	for i := range 2000 {
		fmt.Fprintf(&plain, `{"value":"r%04d","pad":"%s"}`+"\n", i, strings.Repeat("x", i%50))
		want = append(want, fmt.Sprintf("r%04d", i))
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	st.Put(t, "cut.jsonl.gz", string(gz.Bytes()[:gz.Len()*3/4]))

	h, logs := st.Handler(t, engine.Options{FailureS3URI: "s3://lake/failed/"}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "cut.jsonl.gz", "runId": "cut"})
	if rep.ObjectsFailed != 1 || rep.RecordsFailed != 1 || rep.Queued || rep.PlanContinued {
		t.Errorf("report %+v: want one object failed, one failure, nothing queued", rep)
	}
	got, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if len(got) == 0 || len(got) >= len(want) || !cmp.Equal(got, want[:len(got)]) {
		t.Fatalf("sent %d records, want the first ones before the cut", len(got))
	}
	if cont := localaws.Drain(t, st.SQS, st.Work, time.Second); len(cont) != 0 {
		t.Errorf("%d continuations queued for an object no retry can read", len(cont))
	}
	// The failure starts where the task would have resumed: after the
	// last record sent, at or before the first not sent.
	last := int64(strings.Index(plain.String(), `{"value":"`+want[len(got)-1]+`"`))
	next := int64(strings.Index(plain.String(), `{"value":"`+want[len(got)]+`"`))
	list, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), Prefix: aws.String("failed/cut/")})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("failure objects %v, %v; want one", list, err)
	}
	out, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(st.Bucket), Key: list.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	var f engine.Failure
	if err := json.NewDecoder(out.Body).Decode(&f); err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if f.Code != "CorruptObject" || f.Offset <= last || f.Offset > next || !strings.Contains(f.Message, "cannot be read") {
		t.Errorf("failure %+v: want CorruptObject at an offset in (%d, %d]", f, last, next)
	}
	if !strings.Contains(logs.String(), `"objectsFailed":1`) {
		t.Errorf("the summary does not count the object as failed:\n%s", logs)
	}
}

// TestCorruptParquet plans a prefix holding a Parquet file whose footer
// does not decode beside a good object: the run goes on, the good object's
// records are sent, and the bad one is on the failure output.
func TestCorruptParquet(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, _, _ := st.Records(t, "mixed/good.jsonl", 20)
	st.Put(t, "mixed/bad.parquet", strings.Repeat("not parquet ", 100)+"PAR1")
	h, _ := st.Handler(t, engine.Options{FailureS3URI: "s3://lake/failed/"}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "mixed/", "runId": "pq"})
	if rep.ObjectsFailed != 1 || rep.RecordsSent != 20 || rep.Objects != 2 {
		t.Errorf("report %+v: want 2 objects, 20 records sent, 1 object failed", rep)
	}
	if diff := cmp.Diff(want, st.Sent(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	var codes []string
	failedOffsets(t, st, "failed/pq/", ".jsonl", func(b []byte) []int64 {
		var f engine.Failure
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, f.Code+" "+f.Source)
		return nil
	})
	if !cmp.Equal(codes, []string{"CorruptObject s3://lake/mixed/bad.parquet"}) {
		t.Errorf("failure output %v, want the Parquet file as CorruptObject", codes)
	}
}

// TestChunkModeInvalidCharacters packs records into chunk-mode messages
// where one holds a character SQS rejects: that record alone is on the
// failure output, and the others of its message are sent.
func TestChunkModeInvalidCharacters(t *testing.T) {
	st := fanoutstack.New(t, "")
	var b strings.Builder
	var want []string
	for i := range 30 {
		line := fmt.Sprintf("line %02d", i)
		if i == 7 {
			line = "line \x01 seven"
		} else {
			want = append(want, line)
		}
		b.WriteString(line + "\n")
	}
	st.Put(t, "chars.txt", b.String())
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeChunk, FailureS3URI: "s3://lake/failed/"}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "chars.txt", "runId": "chars"})
	if rep.RecordsFailed != 1 || rep.RecordsSent != 29 {
		t.Errorf("report %+v: want 29 records sent, 1 failed", rep)
	}
	var got []string
	for _, m := range localaws.Drain(t, st.SQS, st.Target, 2*time.Second) {
		got = append(got, strings.Split(aws.ToString(m.Body), "\n")...)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if offs := failedOffsets(t, st, "failed/chars/", ".jsonl", failureLines(t)); !cmp.Equal(offs, []int64{56}) {
		t.Errorf("failure output at offsets %v, want the bad record's alone, 56", offs)
	}
}

// refusePut refuses every PutObject while refusing is set, as S3 does
// after the SDK's retries of a SlowDown.
type refusePut struct {
	engine.S3API
	refusing atomic.Bool
}

func (r *refusePut) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if r.refusing.Load() {
		return nil, &smithy.GenericAPIError{Code: "SlowDown", Message: "injected by the test"}
	}
	return r.S3API.PutObject(ctx, in, opts...)
}

// TestFailureOutputRefused refuses the write of a task's failures: the
// task fails and is released at its first failed record, so that its
// delivery again puts that record on the failure output and sends only
// the records from there on, not those before it.
func TestFailureOutputRefused(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, task, _ := st.Records(t, "put.jsonl", 40)
	s3api := &refusePut{S3API: st.S3}
	s3api.refusing.Store(true)
	st.S3API = s3api
	bad := func(body string) bool { return body == "r030" }
	h, _ := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t), FailureS3URI: "s3://lake/failed/"}, func(api sqsbatch.API) sqsbatch.API {
		return &sqsfault.Client{API: api, EntryErr: sqsfault.SenderFault("InvalidParameterValue", bad)}
	})
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want the task's: its failures were not written", resp.BatchItemFailures)
	}
	first := st.Sent(t)
	s3api.refusing.Store(false)
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v on the second delivery", resp.BatchItemFailures)
	}
	again := st.Sent(t)
	if diff := cmp.Diff(slices.DeleteFunc(slices.Clone(want), bad), first); diff != "" {
		t.Errorf("first delivery (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(slices.DeleteFunc(slices.Clone(want[30:]), bad), again); diff != "" {
		t.Errorf("second delivery sent (-want +got): only the records after the first failed one:\n%s", diff)
	}
	if got := failedOffsets(t, st, "failed/r/", ".jsonl", failureLines(t)); !cmp.Equal(got, []int64{510}) {
		t.Errorf("failure output at offsets %v, want r030's, 510", got)
	}
}
