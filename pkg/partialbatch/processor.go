package partialbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"
)

// DefaultConcurrency is how many messages PerMessage runs at once when its
// concurrency is zero.
const DefaultConcurrency = 4

// Handler does the work of some messages and returns one error per message,
// in the same order, nil for success; a slice of another length fails them
// all. Process calls it once with every message of a standard batch, so that
// it may pipeline them, and once per message, in order, for a FIFO batch.
// ctx is the work context: start no new work once it has ended, and send
// what was read in SendContext(ctx), which ends later.
type Handler func(ctx context.Context, msgs []events.SQSMessage) []error

// PerMessage returns a Handler that calls fn for each message, at most
// concurrency at once (zero or less means DefaultConcurrency), and returns
// once every call has. A message not started because ctx ended fails with
// ctx's cause. fn must be safe for concurrent use.
func PerMessage(concurrency int, fn func(ctx context.Context, m events.SQSMessage) error) Handler {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	return func(ctx context.Context, msgs []events.SQSMessage) []error {
		errs := make([]error, len(msgs))
		var g errgroup.Group
		g.SetLimit(concurrency)
		for i, m := range msgs {
			if ctx.Err() != nil {
				errs[i] = context.Cause(ctx)
				continue
			}
			g.Go(func() error {
				if ctx.Err() != nil { // ended while waiting for a slot
					errs[i] = context.Cause(ctx)
				} else {
					errs[i] = fn(ctx, m)
				}
				return nil
			})
		}
		_ = g.Wait() // every goroutine returns nil
		return errs
	}
}

// Reason says why a message is reported as failed.
type Reason string

// The reasons for a message to fail.
const (
	// ReasonHandler: the Handler returned an error for the message.
	ReasonHandler Reason = "handler"
	// ReasonDeadline: the work context had ended before the message was
	// started, or the Handler's error for it is ErrDeadline or the work
	// context's own error, after it ended.
	ReasonDeadline Reason = "deadline"
	// ReasonEarlierFailure: FIFO, not processed because an earlier message
	// of the batch failed.
	ReasonEarlierFailure Reason = "fifo-earlier-failure"
	// ReasonGroupFailed: FIFO with Options.SkipGroupOnError, not processed
	// because an earlier message of its message group failed.
	ReasonGroupFailed Reason = "fifo-group-failed"
)

// MessageFailure is one message reported as failed.
type MessageFailure struct {
	MessageID string
	// Group is the message's MessageGroupId; empty on a standard queue.
	Group  string
	Reason Reason
	Err    error
}

// Result says what Process did with a batch.
type Result struct {
	// Messages is the number of messages in the batch.
	Messages int
	// Failed is the number of messages that failed, len(Failures).
	Failed int
	// FIFO is true when the batch came from a FIFO queue.
	FIFO bool
	// Failures lists the failed messages in batch order, one per message:
	// a message id delivered twice appears twice.
	Failures []MessageFailure
}

// MissingIDError reports failed messages without a message id: they cannot
// be named in a partial batch response, so the whole batch must fail, which
// Lambda does when the handler returns this error.
type MissingIDError struct {
	// Missing is the number of failed messages without an id.
	Missing int
	// Failed is the number of failed messages, with or without an id.
	Failed int
}

// Error implements error.
func (e *MissingIDError) Error() string {
	return fmt.Sprintf("partialbatch: %d of %d failed messages have no messageId, so they cannot be reported in batchItemFailures; "+
		"the whole batch must fail and come back", e.Missing, e.Failed)
}

// Options configures a Processor. The zero value gives the defaults.
type Options struct {
	// SkipGroupOnError: on a FIFO queue, once a message fails, only the
	// later messages of its message group fail unprocessed (Powertools'
	// skip_group_on_error). When false, the default, every later message of
	// the batch fails unprocessed.
	SkipGroupOnError bool
	// DeadlineMargin is how long before the context's deadline no new work
	// starts; results are sent until half of it before the deadline (see
	// Contexts). Zero or less means AutoMargin of the time left when Process
	// starts.
	DeadlineMargin time.Duration
	// Now is the clock for AutoMargin; nil means time.Now.
	Now func() time.Time
}

// Processor runs a Handler over the messages of a Lambda SQS event and
// builds the partial batch response. It holds no state between calls and is
// safe for concurrent use. The zero Processor uses the default Options.
type Processor struct {
	opts Options
}

// New returns a Processor with opts.
func New(opts Options) *Processor {
	return &Processor{opts: opts}
}

// Process runs h over ev and returns the partial batch response, which names
// each failed message once, in batch order (BatchItemFailures is [] when all
// succeeded), and a Result.
//
// A batch is FIFO when a record has Attributes["MessageGroupId"] (a standard
// queue's fair-queue groups count too: safe, but serial) or an
// EventSourceARN ending in ".fifo". After a FIFO message fails, the later
// messages of the batch, or with SkipGroupOnError of its group, fail
// unprocessed. Messages not started before the work context (see Contexts)
// ended fail with its cause, ErrDeadline when on time.
//
// The error is a *MissingIDError when a failed message has no message id:
// return it to Lambda, which then retries the whole batch.
func (p *Processor) Process(ctx context.Context, ev events.SQSEvent, h Handler) (events.SQSEventResponse, Result, error) {
	work, cancel := Deadlines(ctx, p.opts.DeadlineMargin, p.opts.Now)
	defer cancel()

	msgs := ev.Records
	out := make([]MessageFailure, len(msgs)) // Reason "" means success
	fifo := IsFIFO(msgs)
	if fifo {
		p.runFIFO(work, msgs, h, out)
	} else {
		run(work, msgs, h, out)
	}
	return respond(msgs, fifo, out)
}

// IsFIFO reports whether msgs come from a FIFO queue, as Process tells: a
// Handler of a FIFO batch, which Process calls one message at a time, reads
// that message's objects in order too.
func IsFIFO(msgs []events.SQSMessage) bool {
	return slices.ContainsFunc(msgs, func(m events.SQSMessage) bool {
		return m.Attributes["MessageGroupId"] != "" || strings.HasSuffix(m.EventSourceARN, ".fifo")
	})
}

// runFIFO runs the messages one by one, in order, until a failure stops the
// rest of the batch or of the failed message's group.
func (p *Processor) runFIFO(work context.Context, msgs []events.SQSMessage, h Handler, out []MessageFailure) {
	firstFailed := -1
	failedGroup := map[string]int{} // group → index of its first failure
	for i, m := range msgs {
		g := group(m)
		j, groupFailed := failedGroup[g]
		switch {
		case work.Err() != nil: // run fails it with the deadline
		case p.opts.SkipGroupOnError && groupFailed:
			out[i] = failure(m, ReasonGroupFailed, fmt.Errorf("partialbatch: not processed: message %q of group %q failed earlier", msgs[j].MessageId, g))
		case !p.opts.SkipGroupOnError && firstFailed >= 0:
			out[i] = failure(m, ReasonEarlierFailure, fmt.Errorf("partialbatch: not processed: message %q failed earlier in the batch", msgs[firstFailed].MessageId))
		}
		if out[i].Reason == "" {
			run(work, msgs[i:i+1], h, out[i:i+1])
		}
		if out[i].Reason != "" && firstFailed < 0 {
			firstFailed = i
		}
		if out[i].Reason != "" && !groupFailed {
			failedGroup[g] = i
		}
	}
}

// run calls h with msgs, unless work has ended, and records each message's
// outcome in out.
func run(work context.Context, msgs []events.SQSMessage, h Handler, out []MessageFailure) {
	if len(msgs) == 0 {
		return
	}
	if work.Err() != nil {
		for i, m := range msgs {
			out[i] = failure(m, ReasonDeadline, context.Cause(work))
		}
		return
	}
	errs := h(work, msgs)
	if len(errs) != len(msgs) {
		err := fmt.Errorf("partialbatch: the handler returned %d errors for %d messages", len(errs), len(msgs))
		errs = slices.Repeat([]error{err}, len(msgs))
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		why := ReasonHandler
		if errors.Is(err, ErrDeadline) || work.Err() != nil && errors.Is(err, work.Err()) {
			why = ReasonDeadline
		}
		out[i] = failure(msgs[i], why, err)
	}
}

// respond builds the response and the Result from the outcomes.
func respond(msgs []events.SQSMessage, fifo bool, out []MessageFailure) (events.SQSEventResponse, Result, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	res := Result{Messages: len(msgs), FIFO: fifo}
	reported := map[string]bool{}
	missing := 0
	for _, f := range out {
		if f.Reason == "" {
			continue
		}
		res.Failures = append(res.Failures, f)
		switch {
		case f.MessageID == "":
			missing++
		case !reported[f.MessageID]:
			reported[f.MessageID] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: f.MessageID})
		}
	}
	res.Failed = len(res.Failures)
	if missing > 0 {
		return resp, res, &MissingIDError{Missing: missing, Failed: res.Failed}
	}
	return resp, res, nil
}

// failure describes m failed for why.
func failure(m events.SQSMessage, why Reason, err error) MessageFailure {
	return MessageFailure{MessageID: m.MessageId, Group: group(m), Reason: why, Err: err}
}

// group returns m's MessageGroupId, empty on a standard queue.
func group(m events.SQSMessage) string { return m.Attributes["MessageGroupId"] }
