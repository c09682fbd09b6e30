package fanout

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/internal/runtime/emf"
	"github.com/s3sqs/s3sqs/internal/runtime/summary"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// HandlerOptions configures a Handler. The zero value is ready to use.
type HandlerOptions struct {
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
}

// Handler answers the fanout Lambda function's three kinds of invocation:
// a direct request, an S3 event notification, and an SQS event (of chunk
// tasks from the work queue, or of S3 notifications), which it answers with
// a partial batch response. It is safe for concurrent use.
type Handler struct {
	runner *Runner
	opts   HandlerOptions
	proc   *partialbatch.Processor
	log    *slog.Logger
}

// NewHandler returns the Handler that runs invocations with r.
func NewHandler(r *Runner, opts HandlerOptions) *Handler {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Concurrency = cmp.Or(opts.Concurrency, partialbatch.DefaultConcurrency)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Filter.Now = opts.Now
	proc := partialbatch.New(partialbatch.Options{SkipGroupOnError: opts.SkipGroupOnError, DeadlineMargin: opts.DeadlineMargin, Now: opts.Now})
	return &Handler{runner: r, opts: opts, proc: proc, log: log}
}

// Invocation is the summary of one invocation: its log line and metrics.
type Invocation struct {
	Kind           string `json:"kind"`
	RunID          string `json:"runId,omitempty"`
	Queued         bool   `json:"queued,omitempty"`
	SQSMessages    int    `json:"sqsMessages,omitempty"`
	FailedMessages int    `json:"failedMessages,omitempty"`
	Continuations  int    `json:"continuations,omitempty"`
	PlanSteps      int    `json:"planSteps,omitempty"`
	PlanContinued  bool   `json:"planContinued,omitempty"`
	BadRecords     int64  `json:"badRecords,omitempty"`
	Skipped        int    `json:"skippedObjects,omitempty"`
	DurationMs     int64  `json:"durationMs"`
	Stats

	// Items counts the objects a driver named (Batch Operations tasks,
	// Distributed Map items); ItemsFailed those that failed for good,
	// ItemsToRetry those the driver retries.
	Items        int `json:"items,omitempty"`
	ItemsFailed  int `json:"itemsFailed,omitempty"`
	ItemsToRetry int `json:"itemsToRetry,omitempty"`
}

// Invoke is the Lambda entry point. It returns an error only when it cannot
// answer: a request that cannot be run, or an SQS event it cannot answer
// message by message (which then comes back whole).
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	start := h.opts.Now()
	var (
		inv = &Invocation{}
		out any
		err error
	)
	switch kind := kindOf(payload); kind {
	case "batch-operations", "distributed-map":
		// Drivers answer per object; FAIL_ON_ERROR acts per object too.
		inv.Kind = kind
		if kind == "batch-operations" {
			out, err = h.batchOperations(ctx, inv, payload)
		} else {
			out, err = h.distributedMap(ctx, inv, payload)
		}
		return h.answer(ctx, inv, start, out, err)
	case "sqs":
		inv.Kind = "sqs"
		var ev events.SQSEvent
		if ev, err = partialbatch.Decode(payload); err != nil {
			break
		}
		var res partialbatch.Result
		var resp events.SQSEventResponse
		resp, res, err = h.proc.Process(ctx, ev, h.messages(inv))
		out = resp
		inv.SQSMessages, inv.FailedMessages = res.Messages, res.Failed
		for _, f := range res.Failures {
			h.log.ErrorContext(ctx, "message failed", "messageId", f.MessageID, "reason", f.Reason, "err", f.Err)
		}
	case "notification":
		inv.Kind = "s3-event"
		ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
		defer cancel()
		r := h.notifications(ctx, inv, []s3event.Message{{Body: string(payload)}})[0]
		out, err = r.report, r.err
	default:
		inv.Kind = "request"
		var req Request
		if req, err = DecodeRequest(payload); err != nil {
			break
		}
		ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
		defer cancel()
		var rep Report
		rep, err = h.runner.Run(ctx, req)
		inv.RunID, inv.Queued, inv.PlanContinued = rep.RunID, rep.Queued, rep.PlanContinued
		inv.Stats.Add(rep.Stats)
		out = rep
	}
	if err == nil && h.opts.FailOnError && inv.RecordsFailed > 0 {
		err = fmt.Errorf("fanout: %d records failed (FAIL_ON_ERROR is set; they are on the failure output)", inv.RecordsFailed)
	}
	inv.DurationMs = h.opts.Now().Sub(start).Milliseconds()
	h.report(ctx, inv, err)
	return out, err
}

// kindOf tells an SQS event, an S3 notification (raw, wrapped by SNS or
// sent by EventBridge), an S3 Batch Operations invocation (by its
// invocationSchemaVersion), a Step Functions Distributed Map item batch
// (an Items array) and a request apart.
func kindOf(payload []byte) string {
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) != nil {
		return "request"
	}
	if _, ok := probe["invocationSchemaVersion"]; ok {
		return "batch-operations"
	}
	if raw, ok := probe["Items"]; ok && len(raw) > 0 && raw[0] == '[' {
		return "distributed-map"
	}
	if raw, ok := probe["Records"]; ok {
		var recs []struct {
			EventSource string `json:"eventSource"`
		}
		if json.Unmarshal(raw, &recs) == nil && len(recs) > 0 && recs[0].EventSource == "aws:sqs" {
			return "sqs"
		}
		return "notification"
	}
	for _, k := range []string{"TopicArn", "detail-type", "Event"} {
		if _, ok := probe[k]; ok {
			return "notification"
		}
	}
	return "request"
}

// messages returns the partial-batch handler of an SQS event's messages:
// chunk tasks run together, so that small ones share requests; planning
// steps run beside them; each notification is a run of its own.
func (h *Handler) messages(inv *Invocation) partialbatch.Handler {
	return func(ctx context.Context, msgs []events.SQSMessage) []error {
		errs := make([]error, len(msgs))
		var (
			tasks   []worktask.Task
			taskMsg []int
			plans   []int
			steps   = make([]worktask.Plan, len(msgs))
			notes   []s3event.Message
			noteMsg = map[string][]int{}
		)
		for i, m := range msgs {
			t, err := worktask.Parse(m.Body)
			if errors.Is(err, worktask.ErrNotTask) {
				if steps[i], err = worktask.ParsePlan(m.Body); err == nil {
					plans = append(plans, i)
					continue
				}
			}
			switch {
			case err == nil:
				tasks = append(tasks, t)
				taskMsg = append(taskMsg, i)
			case errors.Is(err, worktask.ErrNotTask):
				notes = append(notes, s3event.Message{ID: m.MessageId, Body: m.Body})
				noteMsg[m.MessageId] = append(noteMsg[m.MessageId], i)
			default:
				// It will never run: it goes back until the work queue
				// moves it to its dead-letter queue, with this reason.
				errs[i] = err
			}
		}
		// Planning steps list and queue while the tasks send: they wait
		// mostly on S3 and SQS, not on the CPU. Up to Concurrency run at
		// once; the rest wait inside their goroutines, so that the tasks
		// start now.
		var planning sync.WaitGroup
		slots := make(chan struct{}, h.opts.Concurrency)
		planned := make([]Report, len(msgs))
		for _, i := range plans {
			planning.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				planned[i], errs[i] = h.runner.PlanStep(ctx, steps[i])
			})
		}
		defer func() {
			planning.Wait()
			for _, i := range plans {
				rep := planned[i]
				inv.PlanSteps++
				inv.Stats.Add(rep.Stats)
				inv.Queued = inv.Queued || rep.Queued
				inv.PlanContinued = inv.PlanContinued || rep.PlanContinued
				inv.RunID = cmp.Or(inv.RunID, rep.RunID)
			}
		}()
		for j, res := range h.runner.RunChains(ctx, tasks) {
			i := taskMsg[j]
			inv.Stats.Add(res.Stats)
			inv.BadRecords += res.BadRecords
			errs[i] = res.Err
			if res.Err == nil && res.Continuation != nil && res.Continuation.ID() == tasks[j].ID() {
				// Stopped before it read a record: a continuation would be
				// the task itself, which a FIFO work queue drops as a
				// duplicate. The message comes back instead.
				errs[i] = fmt.Errorf("stopped before reading a record of the task: %w", partialbatch.ErrDeadline)
				continue
			}
			if res.Err == nil && res.Continuation != nil {
				// The continuation takes over the rest of the task: if it
				// cannot be queued, the task comes back and runs again whole.
				if err := h.runner.Enqueue(partialbatch.SendContext(ctx), *res.Continuation); err != nil {
					errs[i] = fmt.Errorf("queue the continuation at offset %d: %w", res.Continuation.ResumeAt, err)
				} else {
					inv.Continuations++
				}
			}
		}
		for _, r := range h.notifications(ctx, inv, notes) {
			for _, i := range noteMsg[r.messageID] {
				errs[i] = r.err
			}
		}
		return errs
	}
}

// noteResult is what became of one notification message.
type noteResult struct {
	messageID string
	report    Report
	err       error
}

// notifications sends the objects that msgs name and that the filter
// accepts, each object as a run of its own named after the event (see
// NotifiedRunID), up to Concurrency runs at once. A message's report sums
// its objects' runs and names the first. A message fails when one of its
// records could not be read, after its other objects were sent.
func (h *Handler) notifications(ctx context.Context, inv *Invocation, msgs []s3event.Message) []noteResult {
	if len(msgs) == 0 {
		return nil
	}
	res := h.opts.Filter.Apply(msgs)
	out := make([]noteResult, len(msgs))
	index := map[string]int{}
	for i, m := range msgs {
		out[i].messageID = m.ID
		index[m.ID] = i
	}
	for _, f := range res.Failed {
		i := index[f.MessageID]
		out[i].err = errors.Join(out[i].err, f.Err)
	}
	for _, s := range res.Skipped {
		inv.Skipped++
		level := slog.LevelDebug
		if s.Reason == s3event.SkipTooOld {
			// Unlike an event type or a prefix left out, the object is
			// data that is never sent: the log must say so.
			level = slog.LevelWarn
		}
		h.log.Log(ctx, level, "object skipped", "messageId", s.MessageID, "object", Notified(s.Object).String(),
			"eTag", s.Object.ETag, "reason", s.Reason.String(), "detail", s.Detail)
	}
	type job struct {
		msg   int
		runID string
		obj   dataset.Object
		rep   Report
		err   error
	}
	var jobs []*job
	for _, it := range res.Accepted {
		i := index[it.MessageID]
		runID, ok := NotifiedRunID(it.Object)
		if !ok {
			// Nothing tells this event from another on the key: named
			// after its message (a new id when invoked directly), a new
			// notification of the key is never taken for a repeat.
			runID = msgs[i].ID
		}
		jobs = append(jobs, &job{msg: i, runID: runID, obj: Notified(it.Object)})
	}
	var g errgroup.Group
	g.SetLimit(h.opts.Concurrency)
	for _, j := range jobs {
		g.Go(func() error {
			one := func(yield func(dataset.Object, error) bool) { yield(j.obj, nil) }
			j.rep, j.err = h.runner.RunObjects(ctx, j.runID, one, Overrides{})
			return nil
		})
	}
	g.Wait()
	for _, j := range jobs {
		inv.Stats.Add(j.rep.Stats)
		inv.Queued = inv.Queued || j.rep.Queued
		inv.RunID = cmp.Or(inv.RunID, j.rep.RunID)
		o := &out[j.msg]
		o.report.RunID = cmp.Or(o.report.RunID, j.rep.RunID)
		o.report.Queued = o.report.Queued || j.rep.Queued
		o.report.Stats.Add(j.rep.Stats)
		o.err = errors.Join(o.err, j.err)
	}
	return out
}

// NotifiedRunID returns the run id of the object an S3 notification
// names: "s3event-", a hash of its bucket, key, version id and ETag, and
// the event's sequencer, upper-cased and without trailing zeros (so that
// sequencers equal by CompareSequencers give one id). Every delivery of one
// event (S3 sends some twice; raw, wrapped by SNS or through EventBridge)
// is then one run, whose claims a repeat finds done; an overwrite, a new
// event on the key, is a run of its own. Without a sequencer (moto omits
// it) a new PUT of the same bytes, unversioned, is taken for a repeat: its
// records, with the same record ids, were sent. ok is false when the
// notification gives neither version, ETag nor sequencer: nothing then
// tells its event from another on the same key.
func NotifiedRunID(o s3event.Object) (id string, ok bool) {
	seq := strings.TrimRight(strings.ToUpper(o.Sequencer), "0")
	if seq == "" && o.Sequencer != "" {
		seq = "0"
	}
	if o.VersionID == "" && o.ETag == "" && seq == "" {
		return "", false
	}
	// The ETag too: the version id "null" (an object written while
	// versioning was off) is every such PUT's.
	sum := sha256.Sum256([]byte(o.Bucket + "\x00" + o.Key + "\x00" + o.VersionID + "\x00" + o.ETag))
	id = "s3event-" + hex.EncodeToString(sum[:16])
	if seq == "" {
		return id, true
	}
	if len(seq) > 32 || strings.Trim(seq, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		// Not a sequencer as AWS writes them: hashed, so that the id
		// stays a valid run id.
		s := sha256.Sum256([]byte(seq))
		seq = hex.EncodeToString(s[:8])
	}
	return id + "-" + seq, true
}

// Notified returns the object a notification names, pinned to the
// notified version (its version id, else its ETag), as a run reads it.
func Notified(o s3event.Object) dataset.Object {
	return dataset.Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
}

// report writes the invocation's summary line and metrics.
func (h *Handler) report(ctx context.Context, inv *Invocation, err error) {
	metrics := []emf.Metric{
		{Name: "RecordsRead", Unit: emf.Count, Value: float64(inv.RecordsRead)},
		{Name: "RecordsSent", Unit: emf.Count, Value: float64(inv.RecordsSent)},
		{Name: "RecordsOffloaded", Unit: emf.Count, Value: float64(inv.RecordsOffloaded)},
		{Name: "RecordsFailed", Unit: emf.Count, Value: float64(inv.RecordsFailed)},
		{Name: "BadRecords", Unit: emf.Count, Value: float64(inv.BadRecords)},
		{Name: "Requests", Unit: emf.Count, Value: float64(inv.Requests)},
		{Name: "Retries", Unit: emf.Count, Value: float64(inv.Retries)},
		{Name: "BytesSent", Unit: emf.Bytes, Value: float64(inv.BytesSent)},
		{Name: "TasksQueued", Unit: emf.Count, Value: float64(inv.TasksQueued)},
		{Name: "TasksSkipped", Unit: emf.Count, Value: float64(inv.TasksSkipped)},
		{Name: "ObjectsFailed", Unit: emf.Count, Value: float64(inv.ObjectsFailed)},
		{Name: "FailedMessages", Unit: emf.Count, Value: float64(inv.FailedMessages)},
		{Name: "Duration", Unit: emf.Milliseconds, Value: float64(inv.DurationMs)},
	}
	if werr := summary.Write(ctx, h.opts.Out, "fanout", inv, metrics, h.opts.Now(), err); werr != nil {
		h.log.ErrorContext(ctx, "write the invocation summary", "err", werr)
	}
}
