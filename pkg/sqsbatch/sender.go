package sqsbatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"time"
)

// Defaults used when the matching [Options] field is zero.
const (
	DefaultMaxInFlight      = 256
	DefaultMaxBytesInFlight = 32 << 20
	DefaultMaxAttempts      = 5
	DefaultBaseDelay        = 100 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
)

// Options configures a [Sender]. The zero value is ready to use.
type Options struct {
	// MaxInFlight is the ceiling on SendMessageBatch requests in flight at
	// once for the Sender, shared by all its concurrent Sends. If zero,
	// DefaultMaxInFlight is used, enough for 10-entry requests to carry
	// about 50,000 entries/s at 50 ms a request. Below the ceiling the
	// Sender sizes its limit itself (see the package documentation),
	// starting at 16 or the ceiling if lower; [Sender.InFlightLimit]
	// returns it. At most MaxInFlight*10+10 entries are held in memory at
	// any time, whatever the input's size.
	MaxInFlight int
	// FixedInFlight turns the controller off: the limit is MaxInFlight
	// requests at once, still bounded by MaxBytesInFlight.
	FixedInFlight bool
	// MaxBytesInFlight bounds the memory of the Sender's requests in
	// flight: the bytes of their entries (as SQS counts them) plus 96 KiB
	// per request for what a request costs besides its entries (its
	// goroutine's stack, the SDK's and the HTTP connection's state, the
	// answer: about 90 KiB measured). If zero, DefaultMaxBytesInFlight
	// (32 MiB) is used, which allows the 256 requests of small entries
	// that 50 ms needs and about 28 of 1 MiB; lower it where memory is
	// short (the functions take 1/32 of theirs). A request larger than the
	// bound still goes, alone, when nothing else of the Sender is in
	// flight. Entries waiting for their request are not counted: they are
	// at most ten plus a request's worth per Send.
	MaxBytesInFlight int64
	// MaxAttempts is the most requests an entry is part of before it fails.
	// If zero, DefaultMaxAttempts is used. A Sender that makes its own
	// requests (see the package documentation) makes no others; one whose
	// requests go through the client has the client's retryer retry each
	// underneath, and these attempts come on top.
	MaxAttempts int
	// Backoff returns the wait before retry number attempt (from 1). If
	// nil, exponential backoff with full jitter from DefaultBaseDelay,
	// capped at DefaultMaxDelay, is used.
	Backoff func(attempt int) time.Duration
	// ReplaceInvalidCharacters replaces characters SQS rejects in bodies
	// and string attribute values with U+FFFD instead of failing the entry.
	ReplaceInvalidCharacters bool
	// Logger receives a debug line for each retry. If nil, nothing is
	// logged.
	Logger *slog.Logger
}

// Sender sends entries to one queue. It is safe for concurrent use; its
// concurrent calls to Send share its limit on requests in flight, and what
// its controller learnt lasts from one call to the next.
type Sender struct {
	client      API
	direct      *direct // nil: requests go through client
	queueURL    string
	limits      queueLimits
	lim         *limiter
	maxInFlight int
	maxAttempts int
	backoff     func(int) time.Duration
	replace     bool
	log         *slog.Logger
}

// New resolves the queue (its URL once, with GetQueueUrl when only a name is
// given, and its MaximumMessageSize and FifoQueue attributes unless
// overridden) and returns a Sender for it. A failure to resolve is a
// [*StopError] that wraps the AWS error. When client is a *sqs.Client
// that allows it, the Sender makes its SendMessageBatch requests itself,
// with the client's endpoint, credentials, signer and HTTP client (see
// the package documentation).
func New(ctx context.Context, client API, q Queue, opts Options) (*Sender, error) {
	url, limits, err := q.resolve(ctx, client)
	if err != nil {
		return nil, err
	}
	s := &Sender{
		client:      client,
		direct:      newDirect(ctx, client),
		queueURL:    url,
		limits:      limits,
		maxInFlight: opts.MaxInFlight,
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		replace:     opts.ReplaceInvalidCharacters,
		log:         opts.Logger,
	}
	if s.maxInFlight <= 0 {
		s.maxInFlight = DefaultMaxInFlight
	}
	maxBytes := opts.MaxBytesInFlight
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytesInFlight
	}
	s.lim = newLimiter(s.maxInFlight, opts.FixedInFlight, maxBytes)
	if s.maxAttempts <= 0 {
		s.maxAttempts = DefaultMaxAttempts
	}
	if s.backoff == nil {
		s.backoff = jitterBackoff
	}
	s.log = cmp.Or(s.log, slog.New(slog.DiscardHandler))
	return s, nil
}

// QueueURL returns the URL of the queue the Sender sends to.
func (s *Sender) QueueURL() string { return s.queueURL }

// FIFO reports whether the queue is a FIFO queue.
func (s *Sender) FIFO() bool { return s.limits.fifo }

// MaxMessageSize returns the largest message, in bytes, the queue accepts.
func (s *Sender) MaxMessageSize() int { return s.limits.maxMessageSize }

// Check returns the failure Send would give e before making any request
// (sanitized as Options.ReplaceInvalidCharacters says, then checked against
// SQS's rules and the queue's limits), or nil when Send would send it. A
// dry run uses it to say what a real one would refuse.
func (s *Sender) Check(e Entry) *EntryError {
	_, fail := admit(e, 0, s.limits, s.replace)
	return fail
}

// InFlightLimit returns the Sender's current limit on requests in flight:
// the controller's, or MaxInFlight when it is fixed. It is safe to call
// while Sends run.
func (s *Sender) InFlightLimit() int { return s.lim.current() }

// Result accounts for the entries of one Send.
type Result struct {
	// Sent is the number of entries SQS accepted.
	Sent int
	// Failed is len(Failures).
	Failed int
	// Requests is the number of SendMessageBatch requests made.
	Requests int
	// Retries is the number of times an entry was sent again.
	Retries int
	// Bytes is the size, as SQS counts it, of the entries accepted.
	Bytes int64
	// PeakInFlight is the most requests of the Sender, this Send's and
	// its concurrent Sends', in flight at once while this Send ran.
	PeakInFlight int
	// Throttled counts the requests answered with a throttle or a server
	// error (HTTP 5xx), plus the entries failed with such a code.
	Throttled int
	// Failures holds every entry that was not accepted, in no set order.
	Failures []*EntryError
}

// SendEntries sends entries. See [Sender.Send]. Unlike Send, when it stops
// early it reports the entries it did not reach as failed too, so that every
// entry is either sent or in Result.Failures.
func (s *Sender) SendEntries(ctx context.Context, entries []Entry) (Result, error) {
	res, err := s.Send(ctx, slices.Values(entries))
	if err != nil {
		for i := res.Sent + res.Failed; i < len(entries); i++ {
			res.Failures = append(res.Failures, failure(&item{seq: i, entry: entries[i]}, err))
		}
		res.Failed = len(res.Failures)
	}
	return res, err
}

// Send sends every entry of entries, reading them as it goes so that memory
// does not grow with the input. Every entry read is either accepted or in
// Result.Failures.
//
// Entries that fail are not an error of Send: they are in the Result. Send
// returns an error only when it stopped early: a [*StopError] when SQS
// answered in a way no retry can fix, or the context's error when ctx ended.
// Entries it did not read are then neither sent nor reported.
func (s *Sender) Send(ctx context.Context, entries iter.Seq[Entry]) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	r := &run{
		Sender: s,
		ctx:    ctx,
		cancel: cancel,
		work:   make(chan job),
		// Room for every request the run can have in flight, so that a
		// request's goroutine never waits to report.
		done: make(chan *outcome, s.maxInFlight),
	}
	if s.limits.fifo {
		r.inFlight = make(map[string]int)
		r.failedGroups = groupFailures{}
	}
	s.lim.join(&r.res.PeakInFlight)
	r.pack(entries)
	close(r.work)
	for r.outstanding > 0 {
		r.absorb(<-r.done)
	}
	r.wg.Wait()
	s.lim.leave(&r.res.PeakInFlight)

	r.res.Failed = len(r.res.Failures)
	var stop *StopError
	switch {
	case r.stopErr == nil:
		return r.res, nil
	case errors.As(r.stopErr, &stop):
		return r.res, stop
	default:
		return r.res, fmt.Errorf("sqsbatch: send stopped: %w", r.stopErr)
	}
}
