package sqsbatch_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
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
