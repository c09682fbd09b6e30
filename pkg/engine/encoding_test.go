package engine_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// putContentEncoded puts n JSON Lines records, gzip-compressed and stored
// with Content-Encoding gzip under a key that says nothing of it, and
// returns their values, the object's bytes and where each record starts in
// the decompressed stream.
func putContentEncoded(t *testing.T, st *fanoutstack.Stack, key string, n int) (want []string, body []byte, offsets []int64) {
	t.Helper()
	r := rand.New(rand.NewChaCha8([32]byte{5}))
	var plain strings.Builder
	for i := range n {
		// Random values, so that the compressed object spans chunks.
		v := fmt.Sprintf("e%03d-%016x", i, r.Uint64())
		offsets = append(offsets, int64(plain.Len()))
		fmt.Fprintf(&plain, `{"value":%q}`+"\n", v)
		want = append(want, v)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(plain.String()))
	zw.Close()
	_, err := st.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(b.Bytes()), ContentEncoding: aws.String("gzip")})
	if err != nil {
		t.Fatal(err)
	}
	return want, b.Bytes(), offsets
}

// TestContentEncodedObject sends an object stored with Content-Encoding
// gzip and larger than the chunk size: it is planned as one chunk that
// says it is gzip, read whole, and every record is sent. A task that
// resumes at a record's offset sends the records from there; a task
// planned as before (no compression, one chunk) still decodes by the GET's
// Content-Encoding; a task planned as byte ranges of the compressed bytes
// fails instead of putting garbage on the failure output.
func TestContentEncodedObject(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, body, offsets := putContentEncoded(t, st, "ce/events.jsonl", 300)
	const chunk = 1024
	if len(body) <= 2*chunk {
		t.Fatalf("the object is %d bytes, want several chunks of %d", len(body), chunk)
	}
	h, _ := st.Handler(t, engine.Options{Plan: dataset.PlanOptions{ChunkSize: chunk}}, nil)
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "ce/events.jsonl"})
	if rep.Chunks != 1 || rep.RecordsRead != 300 || rep.RecordsSent != 300 || rep.RecordsFailed != 0 {
		t.Errorf("report %+v: want one chunk and 300 records sent", rep)
	}
	bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if n := len(localaws.Drain(t, st.SQS, st.Failure, time.Second)); n != 0 {
		t.Errorf("%d failures, want none", n)
	}

	chunkJSON := func(fields string) string {
		return fmt.Sprintf(`{"bucket":%q,"key":"ce/events.jsonl","size":%d,"format":"jsonl",%s}`, st.Bucket, len(body), fields)
	}
	run := func(name, task string) events.SQSEventResponse {
		t.Helper()
		var tk worktask.Task
		if err := json.Unmarshal([]byte(task), &tk); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: name, Body: task, EventSource: "aws:sqs"}}})
	}
	for _, tt := range []struct {
		name, chunk string
		resumeAt    int64
		want        []string
	}{
		{"resumed at record 200", chunkJSON(fmt.Sprintf(`"index":0,"count":1,"start":0,"end":%d,"compression":"gzip"`, len(body))), offsets[200], want[200:]},
		{"planned before, one chunk", chunkJSON(fmt.Sprintf(`"index":0,"count":1,"start":0,"end":%d`, len(body))), 0, want},
	} {
		task := fmt.Sprintf(`{"runId":"r2","chunk":%s,"resumeAt":%d}`, tt.chunk, tt.resumeAt)
		if resp := run(tt.name, task); len(resp.BatchItemFailures) != 0 {
			t.Errorf("%s: failures %v", tt.name, resp.BatchItemFailures)
		}
		bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
		if diff := cmp.Diff(tt.want, bodies); diff != "" {
			t.Errorf("%s: records (-want +got):\n%s", tt.name, diff)
		}
	}

	// A task planned as a byte range before the encoding was known reads
	// no garbage: no retry reads it either, so its range is one failure,
	// ObjectEncoded, and the task is done.
	task := fmt.Sprintf(`{"runId":"r3","chunk":%s}`, chunkJSON(`"index":1,"count":3,"start":1024,"end":2048`))
	if resp := run("split", task); len(resp.BatchItemFailures) != 0 {
		t.Errorf("a byte range of the compressed bytes: failures %v, want none: no retry can read it", resp.BatchItemFailures)
	}
	if n := len(localaws.Drain(t, st.SQS, st.Target, time.Second)); n != 0 {
		t.Errorf("%d records sent from a byte range of compressed bytes, want none", n)
	}
	fails := localaws.Drain(t, st.SQS, st.Failure, time.Second)
	if len(fails) != 1 || !strings.Contains(aws.ToString(fails[0].Body), `"code":"ObjectEncoded"`) || !strings.Contains(aws.ToString(fails[0].Body), `"offset":1024`) {
		t.Errorf("failures %v from a byte range of compressed bytes, want one ObjectEncoded at 1024", fails)
	}
}
