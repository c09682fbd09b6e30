// Package ingesthandler is the logic of the s3ingest Lambda function and of
// `s3sqs ingest`: it takes S3 event notifications from SQS messages
// (S3→SNS→SQS wrapped or raw, S3→SQS, EventBridge→SQS), reads exactly the
// notified version of each new object, and sends its records, with the
// Hive partition values of the key and a _file object, to the output
// queue. It answers with a partial batch response, so that only the
// messages that failed come back.
//
// It stands on the engine (package engine): an object is planned into
// chunk tasks and run by an engine.Runner whose target is the output
// queue, with the records encoded as worktask.IngestEncoding says; large
// objects go to fanout's work queue as tasks instead. Record ids, FIFO groups, the
// failure output and the deadline are the runner's, the same as fanout's.
package ingesthandler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// Options configures a Handler. The zero value adds no partition fields
// and no _file; the function's configuration sets both by default.
type Options struct {
	// Filter selects the objects of a batch (event types, deletions,
	// prefix, suffix, age, duplicates).
	Filter s3event.Filter
	// Partitions says whether and how the key's partition values are
	// added to each record.
	Partitions recordjson.PartitionMode
	// FileMetadata adds the _file object to each record.
	FileMetadata bool
	// GroupIDPartition, when set, is a Hive partition column of the key
	// whose value is the message group of the object's records, on a
	// standard queue too (GROUP_ID_PARTITION); empty means none (on a
	// FIFO queue, the object's).
	GroupIDPartition string
	// FailBadRecords reports the message of an object with a record that
	// cannot be read, so that the object comes back whole (ON_BAD_RECORD
	// =fail). By default such records go to the failure output and the
	// message succeeds.
	FailBadRecords bool
	// FailOnError fails an invocation in which any record failed, as
	// fanout's FAIL_ON_ERROR does; the records are on the failure output.
	FailOnError bool
	// SkipGroupOnError, on a FIFO source queue, fails only the later
	// messages of a failed message's group instead of the rest of the
	// batch.
	SkipGroupOnError bool
	// ReadConcurrency is how many objects of a standard queue's batch are
	// read at once; zero means engine.DefaultReadConcurrency. A FIFO batch is
	// read one message at a time, in order.
	ReadConcurrency int
	// HandoffBytes, when above zero, sends objects larger than it to the
	// runner's work queue as chunk tasks, for fanout's workers, instead of
	// reading them here.
	HandoffBytes int64
	// DeadlineMargin is how long before the invocation's deadline work
	// stops; zero means partialbatch.AutoMargin.
	DeadlineMargin time.Duration
	// Out receives each invocation's summary line and EMF metrics; nil
	// discards them.
	Out io.Writer
	// Logger receives warnings and errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler answers SQS events of S3 notifications. It is safe for
// concurrent use: each call has its own state.
type Handler struct {
	runner *engine.Runner
	opts   Options
	send   engine.NotifiedOptions
	proc   *partialbatch.Processor
	log    *slog.Logger
}

// New returns a Handler that reads and sends with runner, whose target is
// the output queue (and whose work queue, with HandoffBytes, is fanout's).
func New(runner *engine.Runner, opts Options) *Handler {
	opts.Out = cmp.Or(opts.Out, io.Discard)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Filter.Now = opts.Now
	proc := partialbatch.New(partialbatch.Options{SkipGroupOnError: opts.SkipGroupOnError, DeadlineMargin: opts.DeadlineMargin, Now: opts.Now})
	return &Handler{runner: runner, opts: opts, send: sendOptions(opts), proc: proc, log: log}
}

// Invoke is the Lambda entry point: it reads the payload as an SQS event
// and processes it with Handle. Any other payload (null, {}, an S3 or SNS
// event sent to the function directly) is an error that says what it is,
// so that a miswired trigger does not look healthy.
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (events.SQSEventResponse, error) {
	ev, err := partialbatch.Decode(payload)
	if err != nil {
		h.log.ErrorContext(ctx, "s3ingest was not invoked with an SQS event", "err", err)
		return events.SQSEventResponse{}, fmt.Errorf("s3ingest: %w", err)
	}
	return h.Handle(ctx, ev)
}

// Handle processes one batch. Every message that is not fully processed
// (a parse failure, an object not delivered, the deadline, a FIFO message
// after a failure) is reported in batchItemFailures, so that only it comes
// back; test events, filtered-out objects and records on the failure
// output succeed.
//
// Handle returns an error only when it cannot answer message by message: a
// message to report has no message id, or FailOnError is set and a record
// failed. Lambda then fails the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp, _, err := h.HandleSummary(ctx, ev)
	return resp, err
}

// HandleSummary is Handle that also returns the invocation's summary, as
// its log line writes it, for callers that act on it, such as the
// benchmarks.
func (h *Handler) HandleSummary(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, Summary, error) {
	inv := &invocation{h: h, start: h.opts.Now(), failedBy: map[string]int{}, skipped: map[string]int{}}
	resp, res, err := h.proc.Process(ctx, ev, inv.messages)
	inv.result = res
	for _, f := range res.Failures {
		why := string(f.Reason)
		if f.Reason == partialbatch.ReasonHandler {
			var mf *messageError
			if errors.As(f.Err, &mf) {
				why = mf.why
			}
		}
		inv.failedBy[why]++
		if why != failParse {
			h.log.WarnContext(ctx, "message reported as failed", "messageId", f.MessageID, "reason", why, "err", f.Err)
		}
	}
	if err == nil && h.opts.FailOnError && inv.stats.RecordsFailed > 0 {
		err = fmt.Errorf("s3ingest: %d records failed (FAIL_ON_ERROR is set; they are on the failure output)", inv.stats.RecordsFailed)
	}
	if err != nil {
		h.log.ErrorContext(ctx, "s3ingest cannot answer message by message; the whole batch fails", "err", err)
	}
	sum := h.report(ctx, inv, err)
	if err != nil {
		return events.SQSEventResponse{}, sum, err
	}
	return resp, sum, nil
}

// Why a message failed, for the log and the summary, besides
// partialbatch's reasons.
const (
	failParse  = "parse"
	failObject = "object"
)

// messageError is why a message failed.
type messageError struct {
	why string
	err error
}

// Error returns the reason.
func (e *messageError) Error() string { return e.err.Error() }

// Unwrap returns the reason.
func (e *messageError) Unwrap() error { return e.err }

// invocation is the state of one Handle call.
type invocation struct {
	h     *Handler
	start time.Time

	mu         sync.Mutex
	result     partialbatch.Result
	objects    []engine.ObjectResult
	testEvents int
	failedBy   map[string]int
	skipped    map[string]int
	tasks      int
	stats      engine.Stats
	badRecords int64
}
