package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
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
		if r.work != nil && pr.rep.BytesPlanned > r.opts.InlineMaxBytes {
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
	var rest []worktask.Task
	var err error
	for _, res := range r.RunChains(ctx, tasks) {
		rep.Stats.Add(res.Stats)
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
		rep.TasksQueued, qerr = r.enqueue(partialbatch.SendContext(ctx), messagesOf(rest))
		err = errors.Join(err, qerr)
	}
	return *rep, err
}

// queued is the sink of a run whose tasks go to the work queue: each task
// as it is planned and, when the listing can resume and ctx ended first,
// the next planning steps. Planning stops at ctx's end; what it planned is
// queued in the time the send context leaves.
func (r *Runner) queued(ctx context.Context, pr *planRun, tasks iter.Seq[worktask.Task]) (Report, error) {
	rep := &pr.rep // the planning iterator counts in it as the send takes tasks
	rep.Queued = true
	var noProgress bool
	steps := 0
	var err error
	rep.TasksQueued, err = r.enqueue(partialbatch.SendContext(ctx), func(yield func(message) bool) {
		for t := range tasks {
			if !yield(t) {
				return
			}
		}
		if !pr.more {
			return
		}
		if pr.cursor == pr.step.Cursor && pr.step.Step > 1 {
			noProgress = true
			return
		}
		raw, _ := json.Marshal(pr.ov)
		for _, ns := range nextSteps(*pr.step, pr.cursor, raw) {
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
	return *rep, errors.Join(err, pr.err)
}
