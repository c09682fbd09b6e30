package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// sqsVia returns a client that goes through p, with the SDK's retries
// turned off so that the test sees each injected fault.
func sqsVia(p *faultproxy.Proxy) *sqs.Client {
	return sqs.NewFromConfig(localaws.Config(p.URL()), func(o *sqs.Options) { o.Retryer = aws.NopRetryer{} })
}

func s3Via(p *faultproxy.Proxy) *s3.Client {
	return s3.NewFromConfig(localaws.Config(p.URL()), func(o *s3.Options) {
		o.UsePathStyle = true
		o.Retryer = aws.NopRetryer{}
	})
}

// batchOf returns n entries with distinct ids, bodies and an attribute.
func batchOf(prefix string, n int) []types.SendMessageBatchRequestEntry {
	es := make([]types.SendMessageBatchRequestEntry, n)
	for i := range es {
		es[i] = types.SendMessageBatchRequestEntry{
			Id:          aws.String(fmt.Sprintf("e%d", i)),
			MessageBody: aws.String(fmt.Sprintf("%s-%d", prefix, i)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"n":   {DataType: aws.String("Number"), StringValue: aws.String(fmt.Sprint(i))},
				"bin": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2}},
			},
		}
	}
	return es
}

func isConnectionError(err error) bool {
	return retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestSQSRequestFaults(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	retryable := retry.NewStandard()
	for _, tc := range []struct {
		name  string
		rates faultproxy.Rates
		// check inspects the error the SDK client returned.
		check func(t *testing.T, err error)
		// sent says whether the messages reach the queue.
		sent  bool
		count func(faultproxy.Stats) int
	}{
		{
			name:  "500",
			rates: faultproxy.Rates{SQS500: 1},
			check: func(t *testing.T, err error) {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != "InternalError" || ae.ErrorFault() != smithy.FaultServer {
					t.Errorf("error %v is not an API error InternalError of the server", err)
				}
				if got := httpStatus(err); got != 500 {
					t.Errorf("HTTP status %d, want 500", got)
				}
				if !retryable.IsErrorRetryable(err) {
					t.Errorf("the SDK does not retry %v", err)
				}
			},
			count: func(s faultproxy.Stats) int { return s.SQS500 },
		},
		{
			name:  "throttled",
			rates: faultproxy.Rates{SQSThrottled: 1},
			check: func(t *testing.T, err error) {
				var rt *types.RequestThrottled
				if !errors.As(err, &rt) || rt.ErrorCode() != "RequestThrottled" {
					t.Errorf("error %v is not *types.RequestThrottled", err)
				}
				if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
					t.Errorf("the SDK does not take %v for throttling", err)
				}
				if !retryable.IsErrorRetryable(err) {
					t.Errorf("the SDK does not retry %v", err)
				}
			},
			count: func(s faultproxy.Stats) int { return s.SQSThrottled },
		},
		{
			name:  "reset before",
			rates: faultproxy.Rates{ResetBefore: 1},
			check: func(t *testing.T, err error) {
				if !isConnectionError(err) || httpStatus(err) != 0 {
					t.Errorf("error %v is not a connection error", err)
				}
			},
			count: func(s faultproxy.Stats) int { return s.ResetBefore },
		},
		{
			name:  "reset after",
			rates: faultproxy.Rates{ResetAfter: 1},
			check: func(t *testing.T, err error) {
				if !isConnectionError(err) || httpStatus(err) != 0 {
					t.Errorf("error %v is not a connection error", err)
				}
			},
			sent:  true,
			count: func(s faultproxy.Stats) int { return s.ResetAfter },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := localaws.CreateQueue(t, direct, "", nil)
			p := faultproxy.Start(t, target, faultproxy.Options{Rates: tc.rates, Seed: 1})
			entries := batchOf("m", 3)
			_, err := sqsVia(p).SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries})
			if err == nil {
				t.Fatal("SendMessageBatch succeeded through the fault")
			}
			t.Logf("client error: %v", err)
			tc.check(t, err)

			got := localaws.Bodies(localaws.Drain(t, direct, queue, 1500*time.Millisecond))
			var want []string
			var lost []faultproxy.LostEntry
			if tc.sent {
				want = []string{"m-0", "m-1", "m-2"}
				for i, e := range entries {
					lost = append(lost, faultproxy.LostEntry{
						Op: "SendMessageBatch", QueueURL: queue, ID: aws.ToString(e.Id), Body: aws.ToString(e.MessageBody),
						Attributes: map[string]string{"n": fmt.Sprint(i)},
					})
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("queue holds (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(lost, p.LostAnswers()); diff != "" {
				t.Errorf("LostAnswers (-want +got):\n%s", diff)
			}
			s := p.Stats()
			if tc.count(s) != 1 || s.Requests["SendMessageBatch"] != 1 {
				t.Errorf("stats %v: want the fault once in one SendMessageBatch", s)
			}
		})
	}
}

func TestLostSendMessage(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, direct, "", nil)
	p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{ResetAfter: 1}})
	_, err := sqsVia(p).SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl:    aws.String(queue),
		MessageBody: aws.String("only"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"k": {DataType: aws.String("String"), StringValue: aws.String("v")},
		},
	})
	if !isConnectionError(err) {
		t.Fatalf("SendMessage error %v, want a connection error", err)
	}
	want := []faultproxy.LostEntry{{Op: "SendMessage", QueueURL: queue, Body: "only", Attributes: map[string]string{"k": "v"}}}
	if diff := cmp.Diff(want, p.LostAnswers()); diff != "" {
		t.Errorf("LostAnswers (-want +got):\n%s", diff)
	}
	if got := localaws.Bodies(localaws.Drain(t, direct, queue, 1500*time.Millisecond)); !slices.Equal(got, []string{"only"}) {
		t.Errorf("queue holds %q, want the message", got)
	}
}

func TestEntryFailed(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))

	send := func(t *testing.T, rate float64, seed int64) (*sqs.SendMessageBatchOutput, []string, faultproxy.Stats) {
		t.Helper()
		queue := localaws.CreateQueue(t, direct, "", nil)
		p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{EntryFailed: rate}, Seed: seed})
		out, err := sqsVia(p).SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: batchOf("m", 10)})
		if err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
		return out, localaws.Bodies(localaws.Drain(t, direct, queue, 1500*time.Millisecond)), p.Stats()
	}
	failedIDs := func(out *sqs.SendMessageBatchOutput) []string {
		var ids []string
		for _, f := range out.Failed {
			ids = append(ids, aws.ToString(f.Id))
		}
		slices.Sort(ids)
		return ids
	}

	t.Run("half", func(t *testing.T) {
		out, inQueue, stats := send(t, 0.5, 7)
		if len(out.Failed) == 0 || len(out.Successful) == 0 {
			t.Fatalf("seed 7 gave %d successful and %d failed; the test needs both", len(out.Successful), len(out.Failed))
		}
		var ids, sent []string
		for _, s := range out.Successful {
			ids = append(ids, aws.ToString(s.Id))
			sent = append(sent, "m-"+strings.TrimPrefix(aws.ToString(s.Id), "e"))
		}
		for _, f := range out.Failed {
			ids = append(ids, aws.ToString(f.Id))
			if aws.ToString(f.Code) != "InternalError" || f.SenderFault {
				t.Errorf("failed entry %+v: want Code InternalError, SenderFault false", f)
			}
		}
		slices.Sort(ids)
		if want := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9"}; !slices.Equal(ids, want) {
			t.Errorf("answer ids %q, want each of %q once", ids, want)
		}
		slices.Sort(sent)
		if diff := cmp.Diff(sent, inQueue); diff != "" {
			t.Errorf("queue holds other than the successful entries (-successful +queue):\n%s", diff)
		}
		if stats.EntriesFailed != len(out.Failed) {
			t.Errorf("stats count %d failed entries, the answer %d", stats.EntriesFailed, len(out.Failed))
		}

		// The same seed fails the same entries.
		again, _, _ := send(t, 0.5, 7)
		if a, b := failedIDs(out), failedIDs(again); !slices.Equal(a, b) {
			t.Errorf("seed 7 failed %q, then %q", a, b)
		}
	})

	// Only the entries the queue took are lost answers: the ones failed
	// in the same request were not sent.
	t.Run("with reset after", func(t *testing.T) {
		queue := localaws.CreateQueue(t, direct, "", nil)
		p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{EntryFailed: 0.5, ResetAfter: 1}, Seed: 7})
		_, err := sqsVia(p).SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: batchOf("m", 10)})
		if !isConnectionError(err) {
			t.Fatalf("SendMessageBatch error %v, want a connection error", err)
		}
		inQueue := localaws.Bodies(localaws.Drain(t, direct, queue, 1500*time.Millisecond))
		var lost []string
		for _, l := range p.LostAnswers() {
			lost = append(lost, l.Body)
		}
		slices.Sort(lost)
		if len(inQueue) == 0 || len(inQueue) == 10 {
			t.Fatalf("seed 7 sent %d of 10 entries; the test needs some failed", len(inQueue))
		}
		if diff := cmp.Diff(inQueue, lost); diff != "" {
			t.Errorf("lost answers are not the entries sent (-queue +lost):\n%s", diff)
		}
	})

	t.Run("all", func(t *testing.T) {
		out, inQueue, stats := send(t, 1, 1)
		if len(out.Successful) != 0 || len(out.Failed) != 10 {
			t.Errorf("%d successful, %d failed; want all 10 failed", len(out.Successful), len(out.Failed))
		}
		if len(inQueue) != 0 {
			t.Errorf("queue holds %q; want nothing sent", inQueue)
		}
		if stats.EntriesFailed != 10 {
			t.Errorf("stats %v: want 10 failed entries", stats)
		}
	})
}

// createBucket creates a bucket on moto_server for the test and empties and
// deletes it when the test ends.
func createBucket(t *testing.T, c *s3.Client) string {
	t.Helper()
	name := fmt.Sprintf("faultproxy-%d", time.Now().UnixNano())
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		if err == nil {
			for _, o := range out.Contents {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

func putObject(t *testing.T, c *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// getObject returns the object's body, or nil when it does not exist.
func getObject(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

func TestS3Faults(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvS3)
	direct := localaws.S3Client(target)
	bucket := createBucket(t, direct)
	putObject(t, direct, bucket, "dir/there.txt", []byte("there"))

	t.Run("500", func(t *testing.T) {
		p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{S3500: 1}})
		c := s3Via(p)
		ctx := t.Context()
		for _, call := range []struct {
			op   string
			head bool
			do   func() error
		}{
			{op: "GetObject", do: func() error {
				_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("dir/there.txt")})
				return err
			}},
			{op: "PutObject", do: func() error {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("new.txt"), Body: strings.NewReader("new")})
				return err
			}},
			{op: "ListObjectsV2", do: func() error {
				_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
				return err
			}},
			{op: "HeadObject", head: true, do: func() error {
				_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("dir/there.txt")})
				return err
			}},
		} {
			err := call.do()
			if got := httpStatus(err); got != 500 {
				t.Errorf("%s: error %v, want HTTP 500", call.op, err)
			}
			var ae smithy.APIError
			if !call.head && (!errors.As(err, &ae) || ae.ErrorCode() != "InternalError") {
				t.Errorf("%s: error %v, want code InternalError", call.op, err)
			}
			if !retry.NewStandard().IsErrorRetryable(err) {
				t.Errorf("%s: the SDK does not retry %v", call.op, err)
			}
		}
		if got := getObject(t, direct, bucket, "new.txt"); got != nil {
			t.Errorf("PutObject answered 500 wrote the object: %q", got)
		}
		// Bucket set-up is not among the default operations.
		if _, err := c.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
			t.Errorf("ListBuckets got a fault: %v", err)
		}
		s := p.Stats()
		if s.S3500 != 4 || s.Requests["HeadObject"] != 1 || s.Requests["ListObjectsV2"] != 1 || s.Requests["ListBuckets"] != 1 {
			t.Errorf("stats %v: want 4 S3 500s, one per operation", s)
		}
	})

	for _, tc := range []struct {
		name    string
		rates   faultproxy.Rates
		written bool
	}{
		{"reset before", faultproxy.Rates{ResetBefore: 1}, false},
		{"reset after", faultproxy.Rates{ResetAfter: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := faultproxy.Start(t, target, faultproxy.Options{Rates: tc.rates})
			key := strings.ReplaceAll(tc.name, " ", "-") + "/obj.txt"
			_, err := s3Via(p).PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("payload")})
			if !isConnectionError(err) {
				t.Fatalf("PutObject error %v, want a connection error", err)
			}
			got := getObject(t, direct, bucket, key)
			if tc.written && string(got) != "payload" {
				t.Errorf("object holds %q, want it written", got)
			}
			if !tc.written && got != nil {
				t.Errorf("object holds %q, want it not written", got)
			}
		})
	}
}

func TestBodyCut(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvS3)
	direct := localaws.S3Client(target)
	bucket := createBucket(t, direct)
	body := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	putObject(t, direct, bucket, "big.bin", body)

	p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{BodyCut: 1}, Seed: 5})
	c := s3Via(p)
	const gets = 5
	for i := range gets {
		out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("big.bin")})
		if err != nil {
			t.Fatalf("get %d: %v; want the headers to arrive", i, err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("get %d: read %d bytes, error %v; want io.ErrUnexpectedEOF", i, len(got), err)
		}
		if len(got) >= len(body) || !bytes.Equal(got, body[:len(got)]) {
			t.Errorf("get %d: read %d bytes of %d, want a true prefix", i, len(got), len(body))
		}
	}
	// A HEAD is not cut: BodyCut is for GetObject only.
	if _, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("big.bin")}); err != nil {
		t.Errorf("HeadObject: %v", err)
	}
	if s := p.Stats(); s.BodyCut != gets {
		t.Errorf("stats %v: want %d cuts", s, gets)
	}
}

func TestDelay(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))

	t.Run("late answer", func(t *testing.T) {
		queue := localaws.CreateQueue(t, direct, "", nil)
		p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{Delay: 1, DelayFor: 300 * time.Millisecond}})
		start := time.Now()
		if _, err := sqsVia(p).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String("late")}); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("answer after %v, want at least the delay", took)
		}
		if s := p.Stats(); s.Delayed != 1 || len(p.LostAnswers()) != 0 {
			t.Errorf("stats %v, lost %v: want one delay, nothing lost", s, p.LostAnswers())
		}
	})

	t.Run("client gives up", func(t *testing.T) {
		queue := localaws.CreateQueue(t, direct, "", nil)
		p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{Delay: 1, DelayFor: time.Minute}})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := sqsVia(p).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String("gone")})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SendMessage error %v, want the deadline", err)
		}
		// The proxy sees the client go and stops waiting.
		for p.Stats().ClientGone == 0 && time.Since(start) < 5*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		want := []faultproxy.LostEntry{{Op: "SendMessage", QueueURL: queue, Body: "gone"}}
		if diff := cmp.Diff(want, p.LostAnswers()); diff != "" {
			t.Errorf("LostAnswers (-want +got):\n%s", diff)
		}
		if got := localaws.Bodies(localaws.Drain(t, direct, queue, 1500*time.Millisecond)); !slices.Equal(got, []string{"gone"}) {
			t.Errorf("queue holds %q, want the message sent before the delay", got)
		}
	})
}

func TestSetRates(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, direct, "", nil)
	p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{SQS500: 1}})
	c := sqsVia(p)
	send := func() error {
		_, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String("x")})
		return err
	}
	if err := send(); httpStatus(err) != 500 {
		t.Fatalf("SendMessage error %v, want HTTP 500", err)
	}
	if err := p.SetRates(faultproxy.Rates{SQS500: 2}); err == nil {
		t.Error("SetRates took a rate of 2")
	}
	if err := send(); httpStatus(err) != 500 {
		t.Errorf("after refused rates: SendMessage error %v, want the old rates' HTTP 500", err)
	}
	if err := p.SetRates(faultproxy.Rates{}); err != nil {
		t.Fatalf("SetRates: %v", err)
	}
	if err := send(); err != nil {
		t.Errorf("without faults: %v", err)
	}
	if s := p.Stats(); s.SQS500 != 2 || s.Requests["SendMessage"] != 3 {
		t.Errorf("stats %v: want 2 faults in 3 requests", s)
	}
}

// TestMixedWithRetries sends N messages through every SQS fault at once,
// with the SDK's standard retryer (more attempts, short backoff and no
// retry quota, so that the test is quick) and a sender that resends what
// stays failed. Every message must arrive, and every duplicate must be one
// the proxy reports as a lost answer.
func TestMixedWithRetries(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, direct, "", nil)
	p := faultproxy.Start(t, target, faultproxy.Options{Seed: 42, Rates: faultproxy.Rates{
		EntryFailed: 0.1, SQS500: 0.08, SQSThrottled: 0.08, ResetBefore: 0.08, ResetAfter: 0.08,
		Delay: 0.05, DelayFor: 20 * time.Millisecond,
	}})
	c := sqs.NewFromConfig(localaws.Config(p.URL()), func(o *sqs.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 10
			so.Backoff = retry.NewExponentialJitterBackoff(20 * time.Millisecond)
			so.RateLimiter = ratelimit.None
		})
	})

	const n, workers = 1000, 4
	batches := make(chan []types.SendMessageBatchRequestEntry)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sendErrs []error
	for range workers {
		wg.Go(func() {
			for pending := range batches {
				for try := 0; len(pending) > 0; try++ {
					if try == 20 {
						mu.Lock()
						sendErrs = append(sendErrs, fmt.Errorf("%d entries still failing after %d tries", len(pending), try))
						mu.Unlock()
						break
					}
					out, err := c.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: &queue, Entries: pending})
					if err != nil {
						continue // the whole request again
					}
					failed := map[string]bool{}
					for _, f := range out.Failed {
						failed[aws.ToString(f.Id)] = true
					}
					pending = slices.DeleteFunc(pending, func(e types.SendMessageBatchRequestEntry) bool { return !failed[aws.ToString(e.Id)] })
				}
			}
		})
	}
	for i := 0; i < n; i += 10 {
		batches <- batchOf(fmt.Sprintf("b%03d", i/10), 10)
	}
	close(batches)
	wg.Wait()
	if len(sendErrs) > 0 {
		t.Fatalf("sending: %v", errors.Join(sendErrs...))
	}

	// Copies are counted by message id: a receive whose answer fauxqs
	// lost shows the same message twice, a duplicate send does not.
	ids := map[string]map[string]bool{}
	for _, m := range localaws.Drain(t, direct, queue, 3*time.Second) {
		b := aws.ToString(m.Body)
		if ids[b] == nil {
			ids[b] = map[string]bool{}
		}
		ids[b][aws.ToString(m.MessageId)] = true
	}
	lost := map[string]int{}
	for _, l := range p.LostAnswers() {
		lost[l.Body]++
	}
	// The sender resends every entry whose answer it did not get, so each
	// lost answer is exactly one extra copy, and there is no other.
	missing, dups := 0, 0
	for i := range n {
		b := fmt.Sprintf("b%03d-%d", i/10, i%10)
		copies := len(ids[b])
		if copies == 0 {
			missing++
			continue
		}
		dups += copies - 1
		if copies-1 != lost[b] {
			t.Errorf("%s arrived %d times, and %d of its answers were lost", b, copies, lost[b])
		}
	}
	if missing > 0 || len(ids) != n {
		t.Errorf("%d of %d messages missing; %d distinct bodies in the queue", missing, n, len(ids))
	}

	s := p.Stats()
	t.Logf("stats: %v; lost answers: %d; duplicates: %d", s, len(p.LostAnswers()), dups)
	reqs := s.Requests["SendMessageBatch"]
	if reqs < n/10 {
		t.Errorf("%d requests for %d batches", reqs, n/10)
	}
	for name, got := range map[string]int{
		"SQS500": s.SQS500, "SQSThrottled": s.SQSThrottled, "ResetBefore": s.ResetBefore, "ResetAfter": s.ResetAfter,
		"Delayed": s.Delayed, "EntriesFailed": s.EntriesFailed,
	} {
		if got == 0 || got > reqs*10 {
			t.Errorf("%s = %d for %d requests: implausible", name, got, reqs)
		}
	}
	if len(p.LostAnswers()) == 0 {
		t.Error("no lost answers recorded despite ResetAfter")
	}
}

// TestClose checks that Close ends a request held in a delay, records its
// lost answer, closes the port and leaves no goroutine behind.
func TestClose(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, direct, "", nil)
	ignore := goleak.IgnoreCurrent()

	p, err := faultproxy.New(target, faultproxy.Options{Rates: faultproxy.Rates{Delay: 1, DelayFor: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := sqs.NewFromConfig(localaws.Config(p.URL()), func(o *sqs.Options) {
		o.HTTPClient = &http.Client{Transport: tr}
		o.Retryer = aws.NopRetryer{}
	})
	errc := make(chan error, 1)
	go func() {
		_, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String("held")})
		errc <- err
	}()
	for p.Stats().Delayed == 0 {
		time.Sleep(10 * time.Millisecond)
	}

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v with a request held", took)
	}
	if err := <-errc; !isConnectionError(err) {
		t.Errorf("held SendMessage error %v, want a connection error", err)
	}
	want := []faultproxy.LostEntry{{Op: "SendMessage", QueueURL: queue, Body: "held"}}
	if diff := cmp.Diff(want, p.LostAnswers()); diff != "" {
		t.Errorf("LostAnswers (-want +got):\n%s", diff)
	}
	u, _ := url.Parse(p.URL())
	if conn, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", u.Host)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}
