package sqsbatch

import (
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// requestOverhead is what a request in flight costs in memory besides its
// entries, counted against [Options.MaxBytesInFlight]: its goroutine's
// stack (the SDK's middleware is deep), the SDK's request and middleware
// state, its HTTP connection (buffers and two goroutines) and the answer.
// Measured as live heap and stacks after a GC with 256 requests of ten
// 10-byte entries held in flight by a delaying proxy: about 90 KiB per
// request; rounded up.
const requestOverhead = 96 << 10

// limiter hands out the Sender's slots for requests in flight, to every
// Send of the Sender, within the controller's limit (or the fixed one) and
// the bytes in flight. It is safe for concurrent use.
type limiter struct {
	mu       sync.Mutex
	ctl      *aimd // nil when the limit is fixed
	fixed    int
	maxBytes int64
	inFlight int
	bytes    int64
	// waiting counts the acquirers that the limit on requests holds back,
	// so that the controller knows its limit is in use.
	waiting int
	// wake is closed, and cleared, when a slot is freed or the limit
	// grows; it is made only when someone waits.
	wake chan struct{}
	// peaks are the PeakInFlight of the Sends running.
	peaks map[*int]struct{}
}

func newLimiter(ceiling int, fixed bool, maxBytes int64) *limiter {
	l := &limiter{maxBytes: maxBytes, peaks: map[*int]struct{}{}}
	if fixed {
		l.fixed = ceiling
	} else {
		l.ctl = newAIMD(ceiling)
	}
	return l
}

func (l *limiter) limitLocked() int {
	if l.ctl == nil {
		return l.fixed
	}
	return l.ctl.current()
}

// current returns the limit on requests in flight.
func (l *limiter) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limitLocked()
}

// join starts counting the peak requests in flight into *peak, until
// leave.
func (l *limiter) join(peak *int) {
	l.mu.Lock()
	*peak = l.inFlight
	l.peaks[peak] = struct{}{}
	l.mu.Unlock()
}

func (l *limiter) leave(peak *int) {
	l.mu.Lock()
	delete(l.peaks, peak)
	l.mu.Unlock()
}

// acquire takes a slot for a request of cost bytes and returns nil, or
// returns a channel that is closed when it is worth trying again. A
// request over the bytes bound goes when nothing is in flight. *waiting
// records whether this acquirer counts in l.waiting; the caller gives it
// back with abandon if it stops trying.
func (l *limiter) acquire(cost int64, waiting *bool) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	byCount := l.inFlight >= l.limitLocked()
	if !byCount && (l.inFlight == 0 || l.bytes+cost <= l.maxBytes) {
		if *waiting {
			l.waiting--
			*waiting = false
		}
		l.inFlight++
		l.bytes += cost
		for p := range l.peaks {
			*p = max(*p, l.inFlight)
		}
		return nil
	}
	switch {
	case byCount && !*waiting:
		l.waiting++
	case !byCount && *waiting:
		l.waiting--
	}
	*waiting = byCount
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// abandon undoes the waiting count of an acquirer that gives up.
func (l *limiter) abandon(waiting *bool) {
	if !*waiting {
		return
	}
	l.mu.Lock()
	l.waiting--
	l.mu.Unlock()
	*waiting = false
}

// release frees a slot taken for cost bytes.
func (l *limiter) release(cost int64) {
	l.mu.Lock()
	l.inFlight--
	l.bytes -= cost
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *limiter) wakeLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// attempt is one SendMessageBatch call being timed for the controller.
type attempt struct {
	start time.Time
	epoch uint64
}

// begin starts timing a call.
func (l *limiter) begin() attempt {
	if l.ctl == nil {
		return attempt{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return attempt{start: time.Now(), epoch: l.ctl.epoch}
}

// end feeds a finished call to the controller.
func (l *limiter) end(a attempt, throttled bool) {
	if l.ctl == nil {
		return
	}
	lat := time.Since(a.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.ctl.current()
	l.ctl.add(sample{latency: lat, throttled: throttled, inUse: l.waiting > 0 || l.inFlight >= before, epoch: a.epoch})
	if l.ctl.current() > before {
		l.wakeLocked()
	}
}

// overloaded reports whether an entry failure code says SQS (or KMS
// behind it) is overloaded, as the request errors that congested accepts
// do: a throttling code or a server fault.
func overloaded(code string) bool {
	return awserr.ThrottleCode(code) || code == "InternalError" || code == "InternalFailure" || code == "ServiceUnavailable"
}

// congested reports whether a request error says the service is
// overloaded: a throttle (the SDK's throttle codes, SQS's KMS throttles)
// or an HTTP 5xx. A network error is not: it says nothing about load.
func congested(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	return overloaded(awserr.Code(err)) || awserr.StatusCode(err) >= 500
}
