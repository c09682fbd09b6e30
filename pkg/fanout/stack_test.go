package fanout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// The engine tests here run tasks as the fanout function does, through
// its dispatcher (package fanouthandler, whose tests hold the originals of
// these helpers): an SQS event of chunk tasks in, a partial batch response
// out.

// stack is the AWS side of a test: an S3 bucket and the queues.
type stack struct {
	s3 *s3.Client
	// s3api, if set, is what the handler reads S3 with.
	s3api   fanout.S3API
	sqs     *sqs.Client
	bucket  string
	target  string
	work    string
	failure string
}

func newStack(t *testing.T, targetSuffix string) *stack {
	t.Helper()
	st := &stack{s3: localaws.FakeS3(t), sqs: sqs.NewFromConfig(localaws.SQS(t)), bucket: "lake"}
	if _, err := st.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(st.bucket)}); err != nil {
		t.Fatal(err)
	}
	st.target = localaws.CreateQueue(t, st.sqs, "-target"+targetSuffix, map[string]string{"ContentBasedDeduplication": "false"})
	st.work = localaws.CreateQueue(t, st.sqs, "-work", nil)
	st.failure = localaws.CreateQueue(t, st.sqs, "-failure", nil)
	return st
}

func (st *stack) put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := st.s3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// handler builds a handler the way main does, with real clients; wrap,
// if given, stands between the runner and SQS. The buffer holds its logs,
// summary lines and metrics.
func (st *stack) handler(t *testing.T, opts fanout.Options, wrap func(sqsbatch.API) sqsbatch.API) (*fanouthandler.Handler, *bytes.Buffer) {
	t.Helper()
	if opts.Target.URL == "" {
		opts.Target.URL = st.target
	}
	if opts.WorkQueueURL == "" {
		opts.WorkQueueURL = st.work
	}
	if opts.FailureQueueURL == "" && opts.FailureS3URI == "" {
		opts.FailureQueueURL = st.failure
	}
	opts.Send.Backoff = func(int) time.Duration { return 0 }
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	opts.Logger = log
	var api sqsbatch.API = st.sqs
	if wrap != nil {
		api = wrap(api)
	}
	var s3api fanout.S3API = st.s3
	if st.s3api != nil {
		s3api = st.s3api
	}
	r, err := fanout.New(t.Context(), s3api, api, opts)
	if err != nil {
		t.Fatal(err)
	}
	return fanouthandler.New(r, s3api, fanouthandler.Options{Logger: log, Out: logs}), &logs.Buffer
}

// lockedBuffer is a buffer that the handler's goroutines write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func invoke[T any](t *testing.T, h *fanouthandler.Handler, ctx context.Context, payload any) T {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Invoke(ctx, b)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	got, ok := out.(T)
	if !ok {
		t.Fatalf("Invoke answered %T, want %T", out, got)
	}
	return got
}

func received(msgs []types.Message) (bodies []string, ids map[string]int) {
	ids = map[string]int{}
	for _, m := range msgs {
		bodies = append(bodies, aws.ToString(m.Body))
		ids[aws.ToString(m.MessageAttributes[fanout.AttrRecordID].StringValue)]++
	}
	slices.Sort(bodies)
	return bodies, ids
}

// workARN is the ARN of the work queue that tasks arrive from.
const workARN = "arn:aws:sqs:us-east-1:000000000000:work"

// records puts n JSON Lines records of 17 bytes each,
// {"value":"r000"} and so on, and returns their values, the task that
// reads them whole and the object's size.
func (st *stack) records(t *testing.T, key string, n int) ([]string, string, int) {
	t.Helper()
	var b strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%03d"}`+"\n", i)
		want = append(want, fmt.Sprintf("r%03d", i))
	}
	st.put(t, key, b.String())
	task := fmt.Sprintf(`{"runId":"r","chunk":{"bucket":"lake","key":%q,"size":%d,"index":0,"count":1,"start":0,"end":%d,"format":"jsonl"}}`, key, b.Len(), b.Len())
	return want, task, b.Len()
}

func fanoutPlan(chunkSize int64) dataset.PlanOptions {
	return dataset.PlanOptions{ChunkSize: chunkSize}
}
