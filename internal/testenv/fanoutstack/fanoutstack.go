// Package fanoutstack is the AWS side of the engine's and fanout's
// handler tests: a bucket on the in-process S3 and target, work and
// failure queues on the SQS stand-in, and handlers built on them the way
// the fanout function builds its own.
package fanoutstack

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

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// WorkARN is the ARN of the work queue that tasks arrive from.
const WorkARN = "arn:aws:sqs:us-east-1:000000000000:work"

// Stack is a test's bucket and queues.
type Stack struct {
	S3 *s3.Client
	// S3API, if set, is what the handler reads S3 with.
	S3API   engine.S3API
	SQS     *sqs.Client
	Bucket  string
	Target  string
	Work    string
	Failure string
	// Options configures the handlers the stack builds.
	Options fanouthandler.Options
}

// New creates the bucket "lake" and the queues; targetSuffix (".fifo")
// makes the target a FIFO queue.
func New(t *testing.T, targetSuffix string) *Stack {
	t.Helper()
	st := &Stack{S3: localaws.FakeS3(t), SQS: sqs.NewFromConfig(localaws.SQS(t)), Bucket: "lake"}
	if _, err := st.S3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(st.Bucket)}); err != nil {
		t.Fatal(err)
	}
	st.Target = localaws.CreateQueue(t, st.SQS, "-target"+targetSuffix, map[string]string{"ContentBasedDeduplication": "false"})
	st.Work = localaws.CreateQueue(t, st.SQS, "-work", nil)
	st.Failure = localaws.CreateQueue(t, st.SQS, "-failure", nil)
	return st
}

// Put writes an object to the bucket.
func (st *Stack) Put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := st.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// SparkMapping is the Spark SQS sink's column mapping, in which the
// stack's records (Records) are written: Handler maps them so when its
// options name no mapping (by default a record is sent whole).
var SparkMapping = worktask.Mapping{BodyField: "value", AttributesField: "msg_attributes", GroupIDField: "group_id"}

// Handler builds a handler the way main does, with real clients; wrap,
// if given, stands between the runner and SQS. The buffer holds its logs,
// summary lines and metrics.
func (st *Stack) Handler(t *testing.T, opts engine.Options, wrap func(sqsbatch.API) sqsbatch.API) (*fanouthandler.Handler, *bytes.Buffer) {
	t.Helper()
	if opts.Target.URL == "" {
		opts.Target.URL = st.Target
	}
	if opts.WorkQueueURL == "" {
		opts.WorkQueueURL = st.Work
	}
	if opts.FailureQueueURL == "" && opts.FailureS3URI == "" {
		opts.FailureQueueURL = st.Failure
	}
	if opts.Mapping == (worktask.Mapping{}) {
		opts.Mapping = SparkMapping
	}
	opts.Send.Backoff = func(int) time.Duration { return 0 }
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	opts.Logger = log
	var api sqsbatch.API = st.SQS
	if wrap != nil {
		api = wrap(api)
	}
	var s3api awssetup.S3API = st.S3
	if st.S3API != nil {
		s3api = Wrapped{st.S3API, st.S3}
	}
	r, _, err := awssetup.NewRunner(t.Context(), s3api, api, awssetup.RunnerConfig{Options: opts, Name: awssetup.Variable})
	if err != nil {
		t.Fatal(err)
	}
	hopts := st.Options
	hopts.Logger, hopts.Out = log, logs
	return fanouthandler.New(r, s3api, hopts), &logs.Buffer
}

// Wrapped is an S3 client whose reads and writes go through a test's
// wrapper (engine.S3API) and whose bucket checks and options are the
// client's own.
type Wrapped struct {
	engine.S3API
	Client *s3.Client
}

// HeadBucket asks the client.
func (w Wrapped) HeadBucket(ctx context.Context, in *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error) {
	return w.Client.HeadBucket(ctx, in, optFns...)
}

// Options returns the client's.
func (w Wrapped) Options() s3.Options { return w.Client.Options() }

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

// Invoke invokes h with payload as JSON and returns its answer as a T.
func Invoke[T any](t *testing.T, h *fanouthandler.Handler, ctx context.Context, payload any) T {
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

// Received returns the bodies of msgs, sorted, and how many times each
// record id came.
func Received(msgs []types.Message) (bodies []string, ids map[string]int) {
	ids = map[string]int{}
	for _, m := range msgs {
		bodies = append(bodies, aws.ToString(m.Body))
		ids[aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)]++
	}
	slices.Sort(bodies)
	return bodies, ids
}

// Sent drains the target and returns the records' values, sorted.
func (st *Stack) Sent(t *testing.T) []string {
	t.Helper()
	got, _ := Received(localaws.Drain(t, st.SQS, st.Target, 2*time.Second))
	return got
}

// Records puts n JSON Lines records of 17 bytes each, {"value":"r000"}
// and so on, and returns their values, the task that reads them whole and
// the object's size.
func (st *Stack) Records(t *testing.T, key string, n int) ([]string, string, int) {
	t.Helper()
	var b strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%03d"}`+"\n", i)
		want = append(want, fmt.Sprintf("r%03d", i))
	}
	st.Put(t, key, b.String())
	task := fmt.Sprintf(`{"runId":"r","chunk":{"bucket":"lake","key":%q,"size":%d,"index":0,"count":1,"start":0,"end":%d,"format":"jsonl"}}`, key, b.Len(), b.Len())
	return want, task, b.Len()
}

// ClaimsStore returns a claims table on the DynamoDB stand-in.
func ClaimsStore(t *testing.T) *claims.Table {
	client, name := localaws.ClaimsTable(t)
	return claims.NewTable(client, name, claims.TableOptions{})
}
