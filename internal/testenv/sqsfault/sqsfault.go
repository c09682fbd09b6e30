// Package sqsfault injects the failures SQS produces into a real client,
// for tests of the failure paths: whole requests that fail, and entries
// that SendMessageBatch refuses, before the rest go to the real queue.
package sqsfault

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Client wraps a real client. It records every SendMessageBatch and fails
// the requests and entries its funcs choose; the rest go to API. It is
// safe for concurrent use.
type Client struct {
	sqsbatch.API

	// RequestErr, if set, is asked before each request (n from 1); an
	// error fails the request without sending it.
	RequestErr func(n int) error
	// EntryErr, if set, is asked for each entry with the number of times
	// its body has been sent so far (from 1); a non-nil result fails the
	// entry without sending it. Its Id is filled in.
	EntryErr func(body string, attempt int) *types.BatchResultErrorEntry

	mu       sync.Mutex
	requests []Request
	attempts map[string]int
}

// Request is one SendMessageBatch call as the Client saw it.
type Request struct {
	Entries []types.SendMessageBatchRequestEntry
	// Err is the error the request failed with, injected or real.
	Err error
}

// SenderFault returns an EntryErr that refuses for good, as SQS does for
// a sender's fault, every entry whose body satisfies bad.
func SenderFault(code string, bad func(body string) bool) func(string, int) *types.BatchResultErrorEntry {
	return func(body string, _ int) *types.BatchResultErrorEntry {
		if !bad(body) {
			return nil
		}
		return &types.BatchResultErrorEntry{Code: aws.String(code), Message: aws.String("injected by the test"), SenderFault: true}
	}
}

// SendMessageBatch fails what the funcs choose and sends the rest.
func (c *Client) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	n := len(c.requests) + 1
	c.requests = append(c.requests, Request{Entries: slices.Clone(in.Entries)})
	var err error
	if c.RequestErr != nil {
		err = c.RequestErr(n)
	}
	var failed []types.BatchResultErrorEntry
	pass := *in
	pass.Entries = nil
	if err == nil {
		if c.attempts == nil {
			c.attempts = map[string]int{}
		}
		for _, e := range in.Entries {
			body := aws.ToString(e.MessageBody)
			c.attempts[body]++
			var fe *types.BatchResultErrorEntry
			if c.EntryErr != nil {
				fe = c.EntryErr(body, c.attempts[body])
			}
			if fe != nil {
				fe.Id = e.Id
				failed = append(failed, *fe)
				continue
			}
			pass.Entries = append(pass.Entries, e)
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.setErr(n, err)
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(pass.Entries) > 0 {
		real, err := c.API.SendMessageBatch(ctx, &pass, opts...)
		if err != nil {
			c.setErr(n, err)
			return nil, err
		}
		out = real
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func (c *Client) setErr(n int, err error) {
	c.mu.Lock()
	c.requests[n-1].Err = err
	c.mu.Unlock()
}

// Requests returns the requests seen so far.
func (c *Client) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}
