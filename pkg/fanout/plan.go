package fanout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/s3sqs/s3sqs/internal/inorder"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Run lists and plans the dataset req names and sends it: inline when it
// is small enough, else as tasks on the work queue. Planning stops at ctx's
// end: the rest of the listing then goes to the work queue as a planning
// step (see PlanStep), with the tasks planned so far. A request that
// Validate refuses fails before anything is listed.
func (r *Runner) Run(ctx context.Context, req Request) (Report, error) {
	return r.request(ctx, req, false)
}

// Queue plans the dataset req names and queues all of its chunk tasks on
// the work queue, however small it is, for the deployed function's workers
// to send: the CLI's -work-queue-url. Planning stops at ctx's end, as in
// Run.
func (r *Runner) Queue(ctx context.Context, req Request) (Report, error) {
	if r.work == nil {
		return Report{RunID: req.RunID}, errors.New("fanout: no work queue to queue the dataset on")
	}
	return r.request(ctx, req, true)
}

// request runs req as the first planning step of its run: Run, or with
// queue set Queue.
func (r *Runner) request(ctx context.Context, req Request, queue bool) (Report, error) {
	if err := req.Validate(); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	runID := cmp.Or(req.RunID, NewRunID())
	step := &worktask.Plan{RunID: runID, Source: req.Source, Step: 1}
	return r.runAndReport(ctx, runID, r.list(ctx, req.Source, dataset.Cursor{}), req.Overrides, queue, step)
}

// RunObjects plans and sends objects as one run. S3 event notifications
// come in here, each object pinned to the notified version.
func (r *Runner) RunObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides) (Report, error) {
	return r.runAndReport(ctx, runID, listed(objs), ov, false, nil)
}

// runAndReport runs and then writes the run report's manifest, unless the
// run was a repeat that found every task run by an earlier delivery (a
// notification S3 sent twice, a request sent again with its runId): the
// manifest then stays the one of the delivery that sent the records.
func (r *Runner) runAndReport(ctx context.Context, runID string, objs iter.Seq2[dataset.Listed, error], ov Overrides, queue bool, step *worktask.Plan) (Report, error) {
	at := time.Now().UTC()
	rep, err := r.run(ctx, runID, objs, ov, queue, step)
	if err == nil && !rep.Queued && rep.TasksSkipped > 0 && rep.RecordsRead == 0 {
		return rep, nil
	}
	// Written after work ends, as the continuations are (see run).
	if rerr := r.report.manifest(partialbatch.SendContext(ctx), rep, at); err == nil {
		err = rerr
	}
	return rep, err
}

// QueueObjects plans objects as one run and sends every chunk to the work
// queue as a task, however small the run: s3ingest hands large objects to
// fanout's workers this way.
func (r *Runner) QueueObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides) (Report, error) {
	return r.run(ctx, runID, listed(objs), ov, true, nil)
}

// PlanStep runs a planning step from the work queue: it lists the rest of
// the step's dataset from its cursor, and queues the chunk tasks it plans
// and, when ctx ends first, the next step. A step whose claim (with a
// claims store) is done queues nothing: its tasks and next step are on the
// work queue already. A step that ends before it planned an object fails,
// to come back, since its next step would be itself.
func (r *Runner) PlanStep(ctx context.Context, p worktask.Plan) (Report, error) {
	rep := Report{RunID: p.RunID}
	ov := overridesOf(p.Overrides)
	var c *claims.Claim
	if r.opts.Claims != nil {
		got, err := r.opts.Claims.Acquire(ctx, p.RunID+"/plan/"+p.ID(), r.leaseUntil(ctx))
		switch {
		case errors.Is(err, claims.ErrDone):
			rep.TasksSkipped = 1
			return rep, nil
		case err != nil:
			return rep, fmt.Errorf("fanout: planning step %d of run %s: %w", p.Step, p.RunID, err)
		}
		c = &got
	}
	rep, err := r.run(ctx, p.RunID, r.list(ctx, p.Source, p.Cursor), ov, true, &p)
	if c != nil {
		sendCtx := partialbatch.SendContext(ctx)
		var serr error
		if err != nil {
			serr = r.opts.Claims.Release(sendCtx, *c, 0)
		} else {
			serr = r.opts.Claims.Done(sendCtx, *c)
		}
		if serr != nil {
			r.log.WarnContext(ctx, "claims store not updated", "planStep", p.ID(), "error", serr)
		}
	}
	return rep, err
}

// maxStepKeyBytes bounds the keys one planning step carries: its message
// stays under 256 KiB, the MaximumMessageSize of queues made before 2025
// (counted as JSON, escapes included).
const maxStepKeyBytes = 128 << 10

// nextSteps are the planning steps that follow step, from cursor on: none
// when nothing is left. A key list's steps carry only the keys left, cut
// into steps of at most maxStepKeyBytes so that each fits in a message;
// they plan in parallel.
func nextSteps(step worktask.Plan, cursor dataset.Cursor, overrides *Overrides) []worktask.Plan {
	next := worktask.Plan{RunID: step.RunID, Source: step.Source, Cursor: cursor, Overrides: overrides, Step: step.Step + 1}
	keys := step.Source.Keys
	if len(keys) == 0 {
		return []worktask.Plan{next}
	}
	keys = keys[min(cursor.Index, len(keys)):]
	next.Cursor = dataset.Cursor{}
	var out []worktask.Plan
	for len(keys) > 0 {
		n, size := 0, 0
		for n < len(keys) {
			b, _ := json.Marshal(keys[n])
			if n > 0 && size+len(b)+1 > maxStepKeyBytes {
				break
			}
			size += len(b) + 1
			n++
		}
		part := next
		part.Source.Keys = keys[:n:n]
		out = append(out, part)
		keys = keys[n:]
	}
	return out
}

// errNoProgress fails a planning step that ended before it planned an
// object.
var errNoProgress = fmt.Errorf("fanout: the planning step ended before it planned an object: %w", partialbatch.ErrDeadline)

// list lists src from cursor from, pinning objects PlanConcurrency at once.
func (r *Runner) list(ctx context.Context, src dataset.Source, from dataset.Cursor) iter.Seq2[dataset.Listed, error] {
	return dataset.List(ctx, r.s3, src, from, dataset.ListOptions{PinConcurrency: r.opts.PlanConcurrency})
}

// listed turns objects into a listing that cannot resume.
func listed(objs iter.Seq2[dataset.Object, error]) iter.Seq2[dataset.Listed, error] {
	return func(yield func(dataset.Listed, error) bool) {
		for o, err := range objs {
			if !yield(dataset.Listed{Object: o}, err) || err != nil {
				return
			}
		}
	}
}

// planned is a listed object and its chunk tasks.
type planned struct {
	next  dataset.Cursor
	size  int64
	tasks []worktask.Task
	count int  // chunks, which a chain plans as one task
	mark  bool // no object: the listing moved past keys it leaves out
	// missing is why the listed object obj was not found.
	obj     dataset.Object
	missing error
}

// run is the one planning loop: it plans objects into chunk tasks as it
// lists them, PlanConcurrency objects at once, and keeps them while the run
// is small enough to send here; past InlineMaxBytes (or with queue set) the
// tasks go to the work queue as they are planned. With step set the listing
// can resume: when ctx ends first, the rest of it is queued as the next
// planning step.
func (r *Runner) run(ctx context.Context, runID string, objs iter.Seq2[dataset.Listed, error], ov Overrides, queue bool, step *worktask.Plan) (Report, error) {
	if runID == "" {
		runID = NewRunID()
	}
	rep := Report{RunID: runID}
	if err := ov.Validate(); err != nil {
		return rep, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(ctx, runID, ov, true)
	if err != nil {
		return rep, err
	}
	var (
		planErr error
		more    bool // ctx ended before the listing did
		cursor  dataset.Cursor
	)
	if step != nil {
		cursor = step.Cursor
	}
	resumable := step != nil && r.work != nil
	// Objects a listing found (a prefix, a manifest, a bucket) may be gone
	// by the time they are planned, or a manifest may name objects deleted
	// since it was made: those are skipped and counted. Keys a request
	// names itself, and notified objects, fail the run when missing.
	listedOnly := step != nil && step.Source.Key == "" && len(step.Source.Keys) == 0
	plans := inorder.Map(ctx, objs, r.opts.PlanConcurrency, func(ctx context.Context, l dataset.Listed) (planned, error) {
		switch {
		case l.Mark():
			return planned{next: l.Next, mark: true}, nil
		case l.Err != nil:
			return planned{next: l.Next, obj: l.Object, missing: l.Err}, nil
		}
		ts, n, err := plan(ctx, l.Object)
		if listedOnly && errors.Is(err, dataset.ErrNotFound) {
			return planned{next: l.Next, obj: l.Object, missing: err}, nil
		}
		return planned{next: l.Next, size: l.Size, tasks: ts, count: n}, err
	})
	tasks := func(yield func(worktask.Task) bool) {
		for p, err := range plans {
			if resumable && ctx.Err() != nil {
				more = true
				return
			}
			if err != nil {
				planErr = err
				return
			}
			if p.mark {
				cursor = p.next
				continue
			}
			if p.missing != nil {
				rep.ObjectsMissing++
				r.log.WarnContext(ctx, "object listed but not found: skipped", "runId", runID, "object", p.obj.String(), "error", p.missing)
				cursor = p.next
				continue
			}
			rep.Objects++
			rep.Chunks += p.count
			rep.BytesPlanned += p.size
			if pr := r.opts.Progress; pr != nil {
				pr.BytesPlanned.Add(p.size)
				pr.ObjectsPlanned.Add(1)
				pr.TasksPlanned.Add(int64(len(p.tasks)))
			}
			for _, t := range p.tasks {
				if !yield(t) {
					return
				}
			}
			cursor = p.next
		}
	}
	next, stop := iter.Pull(tasks)
	defer stop()
	var inline []worktask.Task
	for !queue {
		t, ok := next()
		if !ok {
			break
		}
		inline = append(inline, t)
		queue = r.work != nil && rep.BytesPlanned > r.opts.InlineMaxBytes
	}
	if !queue && !more {
		if planErr != nil {
			return rep, planErr
		}
		var rest []worktask.Task
		for _, res := range r.runChains(ctx, inline) {
			rep.Stats.Add(res.Stats)
			if res.Continuation != nil {
				rest = append(rest, *res.Continuation)
			}
			err = errors.Join(err, res.Err)
		}
		if len(rest) > 0 {
			// Out of time: what is left goes to the work queue, in the
			// time the send context leaves after work ended, also when
			// another task failed, so that a retry of the run finds it
			// done rather than starting it again.
			rep.Queued = true
			var qerr error
			rep.TasksQueued, qerr = r.enqueue(partialbatch.SendContext(ctx), messagesOf(rest))
			err = errors.Join(err, qerr)
		}
		return rep, err
	}
	// Planning stops at ctx's end; what it planned is queued in the time
	// the send context leaves.
	rep.Queued = true
	var noProgress bool
	steps := 0
	rep.TasksQueued, err = r.enqueue(partialbatch.SendContext(ctx), func(yield func(message) bool) {
		for _, t := range inline {
			if !yield(t) {
				return
			}
		}
		for t, ok := next(); ok; t, ok = next() {
			if !yield(t) {
				return
			}
		}
		if !more {
			return
		}
		if cursor == step.Cursor && step.Step > 1 {
			noProgress = true
			return
		}
		for _, ns := range nextSteps(*step, cursor, &ov) {
			steps++
			if !yield(ns) {
				return
			}
		}
	})
	if err == nil && steps > 0 {
		rep.PlanContinued = true
		rep.TasksQueued -= steps
	}
	if err == nil && noProgress {
		err = errNoProgress
	}
	return rep, errors.Join(err, planErr)
}

// Tasks plans obj into the chunk tasks of run runID, sent as ov says. It
// reads a CSV object's header or a Parquet object's footer. The tasks are
// not chained: whoever runs them keeps the object's chunks in order.
func (r *Runner) Tasks(ctx context.Context, runID string, obj dataset.Object, ov Overrides) ([]worktask.Task, error) {
	if err := ov.Validate(); err != nil {
		return nil, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(ctx, runID, ov, false)
	if err != nil {
		return nil, err
	}
	ts, _, err := plan(ctx, obj)
	return ts, err
}

// planner returns the function that plans an object of run runID into
// tasks, with the chunk size and format ov gives, or the runner's, and
// the number of chunks. With chain set and a FIFO target, an object of
// several chunks is one chained task (see worktask.Chain), so that its
// records reach their groups in the object's order.
func (r *Runner) planner(ctx context.Context, runID string, ov Overrides, chain bool) (func(context.Context, dataset.Object) ([]worktask.Task, int, error), error) {
	carried := &ov
	if chain {
		sender, _, err := r.sender(ctx, &ov)
		if err != nil {
			return nil, err
		}
		chain = sender.FIFO()
	}
	opts := r.opts.Plan
	if ov.Format != "" {
		opts.Format = ov.Format
	}
	if n := ov.ChunkSize.Value(); n > 0 {
		opts.ChunkSize = n
	}
	planner := dataset.NewPlanner(r.s3, opts)
	return func(ctx context.Context, obj dataset.Object) ([]worktask.Task, int, error) {
		chunks, err := planner.Plan(ctx, obj)
		if _, ok := unreadable(err, ov.Ingest != nil); ok {
			// Planning read the object and met what no retry fixes (a
			// corrupt Parquet footer or compressed CSV header, an object
			// changed since it was listed): it becomes one task for the
			// whole object, whose read meets the same error and puts the
			// object on the failure output with the reason, instead of
			// ending the run.
			chunks, err = []dataset.Chunk{planner.Whole(obj)}, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if chain && len(chunks) > 1 {
			first := chunks[0]
			t := worktask.Task{RunID: runID, Chunk: first, Overrides: carried,
				Chain: &worktask.Chain{Step: first.End - first.Start, Total: chunks[len(chunks)-1].End}}
			return []worktask.Task{t}, len(chunks), nil
		}
		tasks := make([]worktask.Task, len(chunks))
		for i, c := range chunks {
			tasks[i] = worktask.Task{RunID: runID, Chunk: c, Overrides: carried}
		}
		return tasks, len(chunks), nil
	}, nil
}

// Target returns the sender of the configured target queue, for what a
// caller sends there besides records, such as s3ingest's deletion events.
func (r *Runner) Target(ctx context.Context) (*sqsbatch.Sender, error) {
	return r.target(ctx, &Overrides{}, ModeRecord)
}

// Enqueue sends tasks to the work queue, such as the continuation of a task
// that ran out of time.
func (r *Runner) Enqueue(ctx context.Context, tasks ...worktask.Task) error {
	_, err := r.enqueue(ctx, messagesOf(tasks))
	return err
}

// messagesOf yields tasks as work queue messages.
func messagesOf(tasks []worktask.Task) iter.Seq[message] {
	return func(yield func(message) bool) {
		for _, t := range tasks {
			if !yield(t) {
				return
			}
		}
	}
}

// message is what travels on the work queue: a chunk task
// (worktask.Task) or a planning step (worktask.Plan).
type message interface {
	Entry(fifo bool) (sqsbatch.Entry, error)
}

// enqueue sends messages to the work queue and returns how many it
// accepted.
func (r *Runner) enqueue(ctx context.Context, tasks iter.Seq[message]) (int, error) {
	if r.work == nil {
		return 0, errors.New("fanout: the dataset needs the work queue, and none is configured")
	}
	var encErr error
	entries := func(yield func(sqsbatch.Entry) bool) {
		for t := range tasks {
			e, err := t.Entry(r.work.FIFO())
			if err != nil {
				encErr = err
				return
			}
			if !yield(e) {
				return
			}
		}
	}
	res, err := r.work.Send(ctx, entries)
	if err == nil && encErr != nil {
		err = encErr
	}
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("fanout: %d tasks did not reach the work queue: %s", res.Failed, res.Failures[0])
	}
	return res.Sent, err
}
