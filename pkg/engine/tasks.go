package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// A task runs in three rooms: RunTasks turns it into a fixed taskSpec
// (here), a reader goroutine reads its chunk into a taskRun and hands the
// entries to its group's one send (read.go), and the group's goroutine,
// once the send and the readers have ended, adds what the send did and
// settles the task (send.go, result.go).

// tracer makes the engine's spans; without a tracer provider (tracing
// off) they are no-ops.
var tracer = otel.Tracer("github.com/s3sqs/s3sqs/pkg/engine")

// TaskResult is what a task did.
type TaskResult struct {
	Stats
	// BadRecords counts the records that could not be read or mapped; they
	// are on the failure output, and counted in RecordsFailed too.
	BadRecords int64
	// Continuation is the rest of the task, when it stopped before the
	// end of its chunk, or, for a chained task that sent its chunk, the
	// next chunk of its object (see worktask.Chain); whoever runs the task
	// must see that it is run.
	Continuation *worktask.Task
	// Stopped is why a task with a Continuation stopped: a read that
	// failed after it had read some records (their entries were sent). It
	// is nil when the task ran out of time.
	Stopped error
	// Held is why its run's gate stopped a task with a Continuation: its
	// run paused or cancelled (a *runstate.StopError), or its target's
	// backlog high (ErrBacklog). RunChains puts such a task back on the
	// work queue or parks it, and counts it in TasksHeld or TasksCancelled
	// instead of returning its Continuation.
	Held error
	// ContinuationQueued reports that RunChains queued the Continuation of
	// a task from the work queue (worktask.Task.MessageID) on the work
	// queue itself, and cleared it.
	ContinuationQueued bool
	// BytesRead counts the bytes of the records this attempt read.
	BytesRead int64
	// chunksDone counts the chunks this attempt made done (see settle):
	// what its run counts done, with the rest of what it did.
	chunksDone int64
	// failures counts the records this attempt failed by failure code.
	failures map[string]int64
	// pending and pendingCodes are what the attempt added to its run's
	// ledger, taken out once its run's record holds them (see
	// ledger.settled).
	pending      runstate.Counters
	pendingCodes map[string]int64
	// Err, when set, means the task must be run again: some of its records
	// were neither sent nor put on the failure output.
	Err error
}

// RunTasks reads tasks, up to concurrency at once (zero means the runner's
// ChunkConcurrency), and sends their records with one sender per target
// queue, so that the records of small tasks share full requests. Records SQS
// refuses for good, and records that cannot be read or mapped, go to the
// failure output. Results are in the order of tasks.
//
// Work stops at ctx's end: a task not finished then returns the rest of its
// chunk as a continuation. What was read is sent until
// partialbatch.SendContext(ctx) ends, which the Lambda handlers set a little
// later than ctx.
func (r *Runner) RunTasks(ctx context.Context, tasks []worktask.Task, concurrency int) []TaskResult {
	results := make([]TaskResult, len(tasks))
	var groups [][]*taskSpec
	bySender := map[*sqsbatch.Sender]int{}
	for i, t := range tasks {
		s, err := r.admit(ctx, i, t, &results[i])
		if s == nil {
			results[i].Err = err
			continue
		}
		g, ok := bySender[s.sender]
		if !ok {
			g = len(groups)
			bySender[s.sender] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], s)
	}
	for _, specs := range groups {
		conc := cmp.Or(concurrency, r.opts.ChunkConcurrency)
		ahead := newAheadSet(r.s3, specs, conc)
		for _, s := range specs {
			s.ahead = ahead
		}
		runs := r.runGroup(ctx, specs, conc)
		ahead.close() // the readers have returned
		for _, tr := range runs {
			results[tr.index] = r.finish(ctx, tr)
		}
	}
	return results
}

// admit prepares task t, the index-th of RunTasks, and takes its claim. It
// returns nil when t does not run: with the error that fails it, or,
// when another delivery has done it, none and res marked skipped.
func (r *Runner) admit(ctx context.Context, index int, t worktask.Task, res *TaskResult) (*taskSpec, error) {
	s, err := r.prepare(ctx, index, t)
	if err == nil {
		ov := overridesOf(t.Overrides)
		if s.gate = r.gateOf(t.RunID, &ov, s.sender); s.gate != nil {
			// Before the claim, so that a task of a stopped run takes none.
			switch err = s.gate.control(ctx, 0); {
			case holds(err):
				res.Continuation, res.Held = &t, err
				return nil, nil
			case err != nil && ctx.Err() != nil:
				res.Continuation = &t // not started
				return nil, nil
			case err != nil:
				return nil, fmt.Errorf("fanout: task %s: read the control record of run %s: %w", t.ID(), t.RunID, err)
			}
		}
		err = r.claim(ctx, s)
	}
	switch {
	case errors.Is(err, claims.ErrDone):
		r.log.InfoContext(ctx, "task skipped: another delivery of it has run", "chunk", t.Chunk.URI(), "task", t.ID())
		res.TasksSkipped = 1
		// The delivery that ran it may have ended before its chain's next
		// link was queued.
		if next, ok := t.Next(); ok {
			res.Continuation = &next
		}
		return nil, nil
	case errors.Is(err, claims.ErrHeld):
		// Not a success: this may be the holder's own message, seen again
		// after its visibility timeout, and the holder may still fail. It
		// comes back, and then finds the task done or released (as
		// Powertools' idempotency does with a record in progress).
		return nil, fmt.Errorf("fanout: task %s is being run by another delivery; this one comes back later: %w", t.ID(), err)
	case err != nil:
		return nil, err
	}
	return s, nil
}

// taskSpec is what one task of RunTasks is to do: its task, queue and
// encoding, and where its read starts. It is fixed once its claim is taken
// (see claim), and only read while the task runs.
type taskSpec struct {
	index   int // in RunTasks' tasks
	task    worktask.Task
	sender  *sqsbatch.Sender
	offload *sqsextended.Offloader
	// encode makes a record's entry in record mode; in chunk mode it is
	// nil and chunkMax, the largest message, is set.
	encode   func(rec records.Record) (sqsbatch.Entry, error)
	chunkMax int
	// group is, in chunk mode, the message group of the object's
	// messages (see objectGroup); empty for none.
	group string
	// mapper is record mode's mapping of the records, which counts what
	// it left out.
	mapper *recordMapper
	// ingest is set for s3ingest's objects (see worktask.IngestEncoding).
	ingest bool
	// notify is set in notification mode: the chunk is not read, and its
	// one entry is its object's notification (see notificationEntries).
	notify bool
	// versions is what a Versions task announces, by offset (a version
	// deleted since planning is the zero Object). Its read lists them
	// before it makes the first entry, the one exception to the rule
	// above: the entries, and so the sends and failures, come after.
	versions []dataset.Object
	// from is where the read starts: the task's ResumeAt, or later where
	// an earlier attempt's claim says it stopped.
	from  int64
	claim *claims.Claim
	// ahead opens the first GETs of the group's tasks ahead of their reads.
	ahead *aheadSet
	// gate, when set, is what the task checks before it reads and sends
	// (see gate).
	gate *gate
	// only, when set, is the offsets of the only records to send
	// (RunRecords), and last the highest of them.
	only map[int64]bool
	last int64
}

// mapping is the record mapping of a task with overrides ov: the
// request's, or the runner's.
func (r *Runner) mapping(ov worktask.Overrides) worktask.Mapping {
	if ov.Mapping != (worktask.Mapping{}) {
		return ov.Mapping
	}
	return r.opts.Mapping
}

// prepare reads a task's overrides and builds how its records become
// entries.
func (r *Runner) prepare(ctx context.Context, index int, t worktask.Task) (*taskSpec, error) {
	ov := overridesOf(t.Overrides)
	sender, mode, err := r.sender(ctx, &ov)
	if err != nil {
		return nil, err
	}
	s := &taskSpec{index: index, task: t, sender: sender, from: t.ResumeAt, offload: r.offloader(sender)}
	c, fifo := t.Chunk, sender.FIFO()
	switch {
	case ov.Ingest != nil:
		s.ingest = true
		s.encode = encodedEntries(ingestRecords(ctx, c, *ov.Ingest, r.log), c.Object, fifo, ov.Ingest.GroupIDPartition)
	case t.Versions && mode != worktask.ModeNotification:
		return nil, &worktask.MalformedError{Err: fmt.Errorf("task %s announces every version of %s, which only notification mode does; this task runs in %s mode", t.ID(), c.URI(), mode)}
	case mode == worktask.ModeNotification:
		s.notify = true
		s.encode = r.notificationEntries(t.RunID, ov.NotificationFormat, s, fifo)
	case mode == worktask.ModeChunk:
		s.chunkMax = sender.MaxMessageSize()
		s.group = objectGroup(c.Object, r.mapping(ov).GroupIDPartition, fifo)
	default:
		mapping := r.mapping(ov)
		if !fifo {
			// A standard queue takes no deduplication id: the field is
			// not the mapping's there, and a record sent as its body
			// field names it as left out.
			mapping.DedupIDField = ""
		}
		s.mapper = newRecordMapper(mapping, c.Object, c.Format != dataset.FormatText)
		s.encode = mappedEntries(s.mapper, c, fifo)
	}
	return s, nil
}

// RunRecords runs t for the records at offsets only, as RunTasks runs a
// task: they are encoded by t's overrides, carry the record ids and FIFO
// group and deduplication ids the engine gives them, and go to t's target;
// those SQS refuses, or that cannot be read or mapped, go to the failure
// output. It is how a redrive sends again only the failed records that a
// run report or the failure output lists. The claims store is not asked:
// these records are not the task.
//
// In chunk mode an offset is the first record of a message, whose other
// records a run report does not list: the chunk is then read from the first
// of offsets to its end, and messages packed from there again hold the same
// records, and the same record ids, as the ones that failed when the
// target's size limit is the same.
//
// missing lists, in record mode, the offsets at which no record of the
// chunk starts (or only before t.ResumeAt): the offset is not a record's,
// or the object is not what the caller took it for. It is nil when the
// task failed (res.Err) or stopped at ctx's end (res.Continuation).
func (r *Runner) RunRecords(ctx context.Context, t worktask.Task, offsets []int64) (res TaskResult, missing []int64) {
	if len(offsets) == 0 {
		return TaskResult{}, nil
	}
	s, err := r.prepare(ctx, 0, t)
	if err != nil {
		return TaskResult{Err: err}, nil
	}
	s.from = max(s.from, slices.Min(offsets))
	if s.chunkMax == 0 {
		s.only = make(map[int64]bool, len(offsets))
		for _, o := range offsets {
			s.only[o] = true
		}
		s.last = slices.Max(offsets)
	}
	tr := r.runGroup(ctx, []*taskSpec{s}, 1)[0]
	res = r.result(ctx, tr)
	if tr.only != nil && res.Err == nil && res.Continuation == nil {
		for _, o := range offsets {
			if !tr.found[o] {
				missing = append(missing, o)
			}
		}
		slices.Sort(missing)
		missing = slices.Compact(missing)
	}
	return res, missing
}
