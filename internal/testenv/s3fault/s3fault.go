// Package s3fault breaks the reads of a real S3 client, for tests of what
// the readers and the engine do when S3 misbehaves part-way through an
// object.
package s3fault

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

// CutAt wraps a real client so that every object reads up to byte At and
// no further: a body that reaches At is reset, and a GET for bytes from At
// on fails with a reset connection, as a network path that keeps breaking
// does, until Heal. Other calls go to the real client.
type CutAt struct {
	engine.S3API
	At     int64
	healed atomic.Bool
}

// Heal makes every later read go through whole.
func (c *CutAt) Heal() { c.healed.Store(true) }

// GetObject implements engine.S3API.
func (c *CutAt) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if c.healed.Load() {
		return c.S3API.GetObject(ctx, in, opts...)
	}
	var from int64
	if r := aws.ToString(in.Range); r != "" {
		if _, err := fmt.Sscanf(r, "bytes=%d-", &from); err != nil {
			return nil, fmt.Errorf("s3fault: range %q: %w", r, err)
		}
	}
	if from >= c.At {
		return nil, fmt.Errorf("s3fault: GET from byte %d: %w", from, syscall.ECONNRESET)
	}
	out, err := c.S3API.GetObject(ctx, in, opts...)
	if err == nil {
		out.Body = &resetBody{ReadCloser: out.Body, left: c.At - from}
	}
	return out, err
}

type resetBody struct {
	io.ReadCloser
	left int64
}

func (b *resetBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, syscall.ECONNRESET
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, err
}

// OnClose returns body with close run once, at its first Close, so that a
// test can see when a reader is done with an object's response.
func OnClose(body io.ReadCloser, close func()) io.ReadCloser {
	return &closeHook{ReadCloser: body, close: close}
}

type closeHook struct {
	io.ReadCloser
	close func()
	once  sync.Once
}

func (c *closeHook) Close() error {
	c.once.Do(c.close)
	return c.ReadCloser.Close()
}
