package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// inline is the sink of a run sent in the invocation that plans it: it
// keeps the tasks while the run is small enough, then runs them here. Past
// InlineMaxBytes (with a work queue), or when a listing that can resume
// ends at ctx's end, the tasks kept and those still to come go to the work
// queue instead (see queued).
func (r *Runner) inline(ctx context.Context, pr *planRun, tasks iter.Seq[worktask.Task]) (Report, error) {
	next, stop := iter.Pull(tasks)
	defer stop()
	var kept []worktask.Task
	for t, ok := next(); ok; t, ok = next() {
		kept = append(kept, t)
		if r.work != nil && pr.rep.BytesPlanned > r.opts.Planning.InlineMaxBytes {
			return r.queued(ctx, pr, func(yield func(worktask.Task) bool) {
				for _, t := range kept {
					if !yield(t) {
						return
					}
				}
				for t, ok := next(); ok; t, ok = next() {
					if !yield(t) {
						return
					}
				}
			})
		}
	}
	switch {
	case pr.more:
		return r.queued(ctx, pr, slices.Values(kept))
	case pr.err != nil:
		return pr.rep, pr.err
	}
	return r.runKept(ctx, pr, kept)
}

// runKept runs the tasks of a run small enough to send here, each FIFO
// chain in order.
func (r *Runner) runKept(ctx context.Context, pr *planRun, tasks []worktask.Task) (Report, error) {
	rep := &pr.rep
	// Counted before the tasks run, not after, so that status shows the
	// run while they do, and a cancel finds it.
	if err := r.addPlanned(partialbatch.SendContext(ctx), pr); err != nil {
		return *rep, err // nothing ran: the request comes back
	}
	pr.planned, pr.counted = true, true // its tasks run, whatever becomes of them
	var rest []worktask.Task
	var err error
	for _, res := range r.RunChains(ctx, tasks) {
		rep.Stats.Add(res.Stats)
		rep.Queued = rep.Queued || res.TasksHeld > 0
		rep.Cancelled = rep.Cancelled || res.TasksCancelled > 0
		if res.Continuation != nil {
			rest = append(rest, *res.Continuation)
		}
		err = errors.Join(err, res.Err)
	}
	if len(rest) > 0 {
		// Out of time: what is left goes to the work queue, in the time the
		// send context leaves after work ended, also when another task
		// failed, so that a retry of the run finds it done rather than
		// starting it again.
		rep.Queued = true
		var qerr error
		rep.TasksQueued, qerr = enqueue(partialbatch.SendContext(ctx), r, slices.Values(rest))
		err = errors.Join(err, qerr)
	}
	return *rep, err
}

// queued is the sink of a run whose tasks go to the work queue: each task
// as it is planned and, when the listing can resume and ctx ended first,
// the next planning steps, once the planning is counted with its extent
// (see extent). Planning stops at ctx's end; what it planned is queued in
// the time the send context leaves.
func (r *Runner) queued(ctx context.Context, pr *planRun, tasks iter.Seq[worktask.Task]) (Report, error) {
	rep := &pr.rep // the planning iterator counts in it as the send takes tasks
	rep.Queued = true
	var stop error // why no next step was queued, when one was due
	steps := 0
	var err error
	rep.TasksQueued, err = enqueue(partialbatch.SendContext(ctx), r, func(yield func(message) bool) {
		for t := range tasks {
			if !yield(t) {
				return
			}
		}
		var next []worktask.Plan
		next, stop = r.nextOf(ctx, pr)
		for _, ns := range next {
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
	err = cmp.Or(err, stop)
	pr.planned = err == nil && pr.err == nil
	return *rep, errors.Join(err, pr.err)
}

// nextOf returns the planning steps that follow pr's, once its tasks are
// all queued: none when the listing ended or failed; those from the
// extent an earlier delivery counted; or, counted first with this
// delivery's extent, those from where ctx's end stopped it. The error
// says why none were, when some were due.
func (r *Runner) nextOf(ctx context.Context, pr *planRun) ([]worktask.Plan, error) {
	switch x := pr.extent; {
	case pr.err != nil:
		return nil, nil
	case x != nil && x.end && pr.more, x != nil && !x.end && pr.more && !reached(pr.cursor, x.cursor):
		return nil, errShortOfExtent
	case x != nil && x.end:
		return nil, nil
	case x != nil:
		// Also when the listing ended before the extent (its last objects
		// deleted since): the steps counted are queued.
		return nextSteps(*pr.step, x.cursor, &pr.ov), nil
	case !pr.more:
		return nil, nil
	case pr.cursor == pr.step.Cursor && pr.step.Step > 1:
		return nil, errNoProgress
	}
	next := nextSteps(*pr.step, pr.cursor, &pr.ov)
	pr.steps = len(next)
	if err := r.addPlanned(partialbatch.SendContext(ctx), pr); err != nil {
		return nil, err
	}
	pr.counted = true
	return next, nil
}

// maxStepKeyBytes bounds the keys one planning step carries: its message
// stays under 256 KiB, the MaximumMessageSize of queues made before 2025
// (counted as JSON, escapes included).
const maxStepKeyBytes = 128 << 10

// nextSteps are the planning steps that follow step, from cursor on: none
// when nothing is left. A key list's steps carry only the keys left, cut
// into steps of at most maxStepKeyBytes so that each fits in a message;
// they plan in parallel.
func nextSteps(step worktask.Plan, cursor dataset.Cursor, overrides *worktask.Overrides) []worktask.Plan {
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

// message is what travels on the work queue: a chunk task
// (worktask.Task) or a planning step (worktask.Plan).
type message interface {
	Entry(fifo bool) (sqsbatch.Entry, error)
}

// enqueue sends messages to the work queue and returns how many it
// accepted.
func enqueue[M message](ctx context.Context, r *Runner, tasks iter.Seq[M]) (int, error) {
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
