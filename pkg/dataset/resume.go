package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// Defaults of Resume's zero value.
const (
	// DefaultResumeAttempts is how many times in a row a read is resumed
	// without getting a byte before it fails.
	DefaultResumeAttempts = 5
	// DefaultStallTimeout is how long a read waits for a response body's
	// next bytes before it breaks the response off and resumes.
	DefaultStallTimeout = 30 * time.Second
)

// ErrStalled is wrapped by the error of a read that got no bytes for
// Resume.StallTimeout.
var ErrStalled = errors.New("response body stalled")

// Resume says how a read recovers when a GET fails or its body breaks off
// (a reset connection, a body shorter than its Content-Length, 5xx, a
// stall): it asks again for the bytes from the first one not yet read,
// pinned to the same version or ETag. The zero value uses the defaults.
//
// Errors that asking again cannot fix end the read at once: the object
// changed or is gone (ErrChanged, ErrNotFound), its bytes are compressed
// by its Content-Encoding where a range of them was wanted
// (*EncodingError), access is denied, or the context ended.
type Resume struct {
	// Attempts is how many times in a row a read is resumed without
	// getting a byte; zero means DefaultResumeAttempts, and a negative
	// value turns resuming off.
	Attempts int
	// StallTimeout is how long a body may go without bytes; zero means
	// DefaultStallTimeout, and a negative value waits for ever.
	StallTimeout time.Duration
}

func (r Resume) attempts() int {
	if r.Attempts == 0 {
		return DefaultResumeAttempts
	}
	return max(r.Attempts, 0)
}

func (r Resume) stallTimeout() time.Duration {
	if r.StallTimeout == 0 {
		return DefaultStallTimeout
	}
	return r.StallTimeout
}

// retries counts the failed attempts of one read since its last progress.
type retries struct{ failed int }

func (t *retries) progress() { t.failed = 0 }

// again reports whether a read that failed with err should be tried again,
// after waiting its backoff.
func (t *retries) again(ctx context.Context, opts Resume, err error) bool {
	if !resumable(ctx, err) || t.failed >= opts.attempts() {
		return false
	}
	t.failed++
	// Full jitter over 100 ms·2^n, at most 3.2 s: the SDK's retryer has
	// already waited for a failed GET, so this only spreads out retries.
	wait := time.Duration(rand.Int64N(int64(100*time.Millisecond) << min(t.failed, 5)))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// resumable reports whether asking again for the same bytes may succeed:
// what the SDK retries, and what S3 did not answer (a reset, a short body,
// a stall) or answered with 408, 429 or 5xx; not a missing or changed
// object, nor any other answer.
func resumable(ctx context.Context, err error) bool {
	var enc *EncodingError
	if ctx.Err() != nil || errors.Is(err, ErrChanged) || errors.Is(err, ErrNotFound) || errors.As(err, &enc) {
		return false
	}
	switch awserr.Classify(err) {
	case awserr.Retryable:
		return true
	case awserr.Unknown:
		// Unknown with an answer is 408, a 429 or 5xx the SDK does not
		// retry, or one below 400 (a redirect), which asking again meets
		// again.
		status := awserr.StatusCode(err)
		return status == 0 || status >= 400
	}
	return false
}

// stallWatch breaks off a response body that goes StallTimeout without
// bytes, by closing it, which ends the Read that waits on it.
type stallWatch struct {
	timeout time.Duration
	timer   *time.Timer
	fired   atomic.Bool
}

func newStallWatch(timeout time.Duration, body io.Closer) *stallWatch {
	if timeout <= 0 {
		return nil
	}
	w := &stallWatch{timeout: timeout}
	w.timer = time.AfterFunc(time.Hour, func() {
		w.fired.Store(true)
		body.Close()
	})
	w.timer.Stop()
	return w
}

// read reads from body, at most timeout long.
func (w *stallWatch) read(body io.Reader, p []byte) (int, error) {
	if w == nil {
		return body.Read(p)
	}
	w.timer.Reset(w.timeout)
	n, err := body.Read(p)
	w.timer.Stop()
	if err != nil && w.fired.Load() {
		err = fmt.Errorf("%w: no bytes for %s", ErrStalled, w.timeout)
	}
	return n, err
}

func (w *stallWatch) stop() {
	if w != nil {
		w.timer.Stop()
	}
}
