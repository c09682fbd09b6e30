package sqsbatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/localaws"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// newClient returns a client for the SQS stand-in that `make test` starts.
func newClient(tb testing.TB) *sqs.Client {
	tb.Helper()
	return sqs.NewFromConfig(localaws.SQS(tb))
}

// createQueue creates a queue named after the test and deletes it when the
// test ends. fifo adds the ".fifo" suffix and FifoQueue attribute.
func createQueue(tb testing.TB, c *sqs.Client, fifo bool, attrs map[string]string) string {
	tb.Helper()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	return localaws.CreateQueue(tb, c, suffix, attrs)
}

// receiveAll receives and deletes the queue's messages and checks that
// there are n.
func receiveAll(tb testing.TB, c *sqs.Client, url string, n int) []types.Message {
	tb.Helper()
	got := localaws.Drain(tb, c, url, 2500*time.Millisecond)
	if len(got) != n {
		tb.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

func bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	slices.Sort(out)
	return out
}

// request is one SendMessageBatch call as a faultClient saw it.
type request struct {
	entries []types.SendMessageBatchRequestEntry
	err     error
}

// faultClient wraps a real client. It records every SendMessageBatch and can
// fail whole requests or chosen entries before the rest go to SQS.
type faultClient struct {
	sqsbatch.API

	// requestErr, if set, is asked before each request (n from 1); an error
	// fails the request without sending it.
	requestErr func(n int) error
	// entryErr, if set, is asked for each entry with the number of times
	// its body has been sent so far (from 1); a non-nil result fails the
	// entry without sending it.
	entryErr func(body string, attempt int) *types.BatchResultErrorEntry

	mu       sync.Mutex
	requests []request
	attempts map[string]int
}

func (f *faultClient) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	n := len(f.requests) + 1
	f.requests = append(f.requests, request{entries: slices.Clone(in.Entries)})
	var err error
	if f.requestErr != nil {
		err = f.requestErr(n)
	}
	var failed []types.BatchResultErrorEntry
	pass := *in
	pass.Entries = nil
	if err == nil {
		if f.attempts == nil {
			f.attempts = map[string]int{}
		}
		for _, e := range in.Entries {
			body := aws.ToString(e.MessageBody)
			f.attempts[body]++
			var fe *types.BatchResultErrorEntry
			if f.entryErr != nil {
				fe = f.entryErr(body, f.attempts[body])
			}
			if fe != nil {
				fe.Id = e.Id
				failed = append(failed, *fe)
				continue
			}
			pass.Entries = append(pass.Entries, e)
		}
	}
	f.requests[n-1].err = err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(pass.Entries) > 0 {
		real, err := f.API.SendMessageBatch(ctx, &pass, opts...)
		if err != nil {
			return nil, err
		}
		out = real
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func (f *faultClient) calls() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// entries makes n entries with bodies prefix-0, prefix-1, ...
func entries(prefix string, n int) []sqsbatch.Entry {
	out := make([]sqsbatch.Entry, n)
	for i := range out {
		out[i] = sqsbatch.Entry{ID: fmt.Sprintf("%s-%d", prefix, i), Body: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return out
}

// noWait is a backoff that does not sleep, so retry tests run fast.
func noWait(int) time.Duration { return 0 }

func failureCodes(res sqsbatch.Result) map[string]string {
	m := map[string]string{}
	for _, f := range res.Failures {
		m[f.Entry.ID] = f.Code
	}
	return m
}

func requestSize(entries []types.SendMessageBatchRequestEntry) int {
	n := 0
	for _, e := range entries {
		n += len(aws.ToString(e.MessageBody))
		for k, a := range e.MessageAttributes {
			n += len(k) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
		}
	}
	return n
}

func pad(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}
