package runstate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// serial is a claims table's client that makes one call at a time and
// counts them. moto_server checks an UpdateItem's condition and applies
// its update as two steps that concurrent calls can come between, where
// DynamoDB makes them one per item: one call at a time gives the tests
// what DynamoDB guarantees.
type serial struct {
	mu    sync.Mutex
	c     runstate.API
	calls atomic.Int64
}

func (s *serial) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls.Add(1)
	return s.c.UpdateItem(ctx, in, opts...)
}

func (s *serial) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls.Add(1)
	return s.c.GetItem(ctx, in, opts...)
}

func (s *serial) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls.Add(1)
	return s.c.TransactWriteItems(ctx, in, opts...)
}

// newTable returns a Table in a new claims table in moto_server, and the
// client it calls.
func newTable(tb testing.TB, opts runstate.TableOptions) (*runstate.Table, *serial) {
	tb.Helper()
	client, name := localaws.ClaimsTable(tb)
	s := &serial{c: client}
	return runstate.NewTable(s, name, opts), s
}

// clock is a time that the test moves, for Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
