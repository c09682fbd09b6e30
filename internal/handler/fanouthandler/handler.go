package fanouthandler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// Options configures a Handler. The zero value is ready to use.
type Options struct {
	// Filter selects the objects of S3 notifications, as s3ingest's does.
	// Deletions are never sent: there is nothing left to read.
	Filter s3event.Filter
	// FailOnError fails an invocation in which any record failed; the
	// records are on the failure output all the same.
	FailOnError bool
	// SkipGroupOnError, on a FIFO work queue, fails only the later messages
	// of a failed message's group instead of the rest of the batch.
	SkipGroupOnError bool
	// Concurrency is how many notified objects of an SQS event (each a
	// run) and planning steps run at once; zero means
	// partialbatch.DefaultConcurrency. Chunk tasks are read
	// ChunkConcurrency at a time, as in any run.
	Concurrency int
	// DeadlineMargin is how long before an invocation's deadline work
	// stops; zero means partialbatch.AutoMargin.
	DeadlineMargin time.Duration
	// Out receives each invocation's summary line and EMF metrics; nil
	// discards them.
	Out io.Writer
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MemoryMB is the function's memory, which a dry run's estimate uses
	// unless the request gives one; zero means engine.DefaultMemoryMB.
	MemoryMB int
	// Reconcile answers reconcile requests; its zero value refuses them.
	Reconcile ReconcileOptions
}

// Handler answers the fanout Lambda function's invocations: a direct
// request, an S3 event notification, an SQS event (of chunk tasks and
// planning steps from the work queue, or of S3 notifications), which it
// answers with a partial batch response, and the invocations of its
// drivers, S3 Batch Operations and Step Functions Distributed Map. It is
// safe for concurrent use.
type Handler struct {
	runner *engine.Runner
	// s3 pins the objects a driver names with HeadObject.
	s3   dataset.ListAPI
	opts Options
	proc *partialbatch.Processor
	log  *slog.Logger
}

// New returns the Handler that runs invocations with r, and pins the
// objects a driver names by reading their metadata with s3c.
func New(r *engine.Runner, s3c dataset.ListAPI, opts Options) *Handler {
	opts.Out = cmp.Or(opts.Out, io.Discard)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Concurrency = cmp.Or(opts.Concurrency, partialbatch.DefaultConcurrency)
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Filter.Now = opts.Now
	proc := partialbatch.New(partialbatch.Options{SkipGroupOnError: opts.SkipGroupOnError, DeadlineMargin: opts.DeadlineMargin, Now: opts.Now})
	return &Handler{runner: r, s3: s3c, opts: opts, proc: proc, log: log}
}

// Payload kinds, as kindOf tells them apart.
const (
	kindRequest         = "request"
	kindSQS             = "sqs"
	kindNotification    = "notification"
	kindBatchOperations = "batch-operations"
	kindDistributedMap  = "distributed-map"
)

// Invoke is the Lambda entry point: it tells the payload's kind (see
// kindOf), decodes it and answers it with the typed method of that kind.
// It returns an error only when it cannot answer: a payload that cannot
// be decoded, a request that cannot be run, or an SQS event it cannot
// answer message by message (which then comes back whole).
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	switch kindOf(payload) {
	case kindBatchOperations:
		job, err := decodeBatchJob(payload)
		if err != nil {
			return nil, h.undecoded(ctx, kindBatchOperations, err)
		}
		return h.HandleBatchOperations(ctx, job)
	case kindDistributedMap:
		b, err := decodeMapBatch(payload)
		if err != nil {
			return nil, h.undecoded(ctx, kindDistributedMap, err)
		}
		res, err := h.HandleDistributedMap(ctx, b)
		if err != nil {
			return nil, err
		}
		return res, nil
	case kindSQS:
		ev, err := partialbatch.Decode(payload)
		if err != nil {
			return nil, h.undecoded(ctx, kindSQS, err)
		}
		return h.HandleSQS(ctx, ev)
	case kindNotification:
		return h.HandleNotification(ctx, s3event.Message{Body: string(payload)})
	case kindReconcile:
		req, err := decodeReconcile(payload)
		if err != nil {
			return nil, h.undecoded(ctx, kindReconcile, err)
		}
		return h.HandleReconcile(ctx, req)
	}
	req, err := engine.DecodeRequest(payload)
	if err != nil {
		return nil, h.undecoded(ctx, kindRequest, err)
	}
	return h.HandleRequest(ctx, req)
}

// kindOf tells an SQS event, an S3 notification (raw, wrapped by SNS or
// sent by EventBridge), an S3 Batch Operations invocation (by its
// invocationSchemaVersion), a Step Functions Distributed Map item batch
// (an Items array) and a request apart.
func kindOf(payload []byte) string {
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) != nil {
		return kindRequest
	}
	if _, ok := probe["invocationSchemaVersion"]; ok {
		return kindBatchOperations
	}
	if isReconcile(probe) {
		return kindReconcile
	}
	if raw, ok := probe["Items"]; ok && len(raw) > 0 && raw[0] == '[' {
		return kindDistributedMap
	}
	if raw, ok := probe["Records"]; ok {
		var recs []struct {
			EventSource string `json:"eventSource"`
		}
		if json.Unmarshal(raw, &recs) == nil && len(recs) > 0 && recs[0].EventSource == "aws:sqs" {
			return kindSQS
		}
		return kindNotification
	}
	for _, k := range []string{"TopicArn", "detail-type", "Event"} {
		if _, ok := probe[k]; ok {
			return kindNotification
		}
	}
	return kindRequest
}

// HandleRequest runs a direct request with Runner.Run, within the
// invocation's deadline less the margin, and answers its report. The error
// is the run's, or, with FailOnError, that records failed. A request with
// dryRun is a dry run (see Runner.DryRun), estimated at the function's
// memory unless it gives another.
func (h *Handler) HandleRequest(ctx context.Context, req engine.Request) (engine.Report, error) {
	start := h.opts.Now()
	inv := &Invocation{Kind: "request"}
	if req.DryRun {
		inv.Kind, req.DryRunOptions = kindDryRun, h.dryRunOptions(req.DryRunOptions)
	}
	ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
	defer cancel()
	rep, err := h.runner.Run(ctx, req)
	inv.RunID, inv.Queued, inv.PlanContinued = rep.RunID, rep.Queued, rep.PlanContinued
	inv.Stats.Add(rep.Stats)
	err = h.failOnError(inv, err)
	h.summarize(ctx, inv, start, err)
	return rep, err
}

// HandleNotification answers an S3 event notification invoked directly
// (raw, wrapped by SNS or sent by EventBridge; msg.ID may be empty): each
// object it names that the filter accepts is a run of its own (see
// notifications). The report sums the runs.
func (h *Handler) HandleNotification(ctx context.Context, msg s3event.Message) (engine.Report, error) {
	start := h.opts.Now()
	inv := &Invocation{Kind: "s3-event"}
	ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
	defer cancel()
	r := h.notifications(ctx, inv, []s3event.Message{msg})[0]
	err := h.failOnError(inv, r.err)
	h.summarize(ctx, inv, start, err)
	return r.report, err
}

// failOnError returns err, or, when it is nil, FailOnError is set and
// records of the invocation failed, an error that says so.
func (h *Handler) failOnError(inv *Invocation, err error) error {
	if err == nil && h.opts.FailOnError && inv.RecordsFailed > 0 {
		return fmt.Errorf("fanout: %d records failed (FAIL_ON_ERROR is set; they are on the failure output)", inv.RecordsFailed)
	}
	return err
}

// undecoded ends an invocation whose payload of kind could not be decoded:
// its summary line names the kind and the error, which it returns.
func (h *Handler) undecoded(ctx context.Context, kind string, err error) error {
	h.summarize(ctx, &Invocation{Kind: kind}, h.opts.Now(), err)
	return err
}
