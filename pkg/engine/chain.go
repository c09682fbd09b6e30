package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// RunChains runs tasks, such as a batch from the work queue, as RunTasks
// does, and then, while ctx lasts, the next links of the chained ones that
// sent their chunk (see worktask.Chain), here rather than through the work
// queue, so that each FIFO chain runs in order. Each result is its task's
// chain's: the stats of its links summed, and as Continuation what is left
// of the chain. A link after the first that fails is handed back as that
// Continuation, to be queued and retried on its own, so that the chunks
// before it are not sent again. A task its run's gate stopped (see
// TaskResult.Held) is put back on the work queue or parked here; each
// result is added to its run's counters (see Options.Control.Runs).
func (r *Runner) RunChains(ctx context.Context, tasks []worktask.Task) []TaskResult {
	results := r.RunTasks(ctx, tasks, 0)
	ran := slices.Clone(tasks)
	for ctx.Err() == nil {
		var links []worktask.Task
		var of []int
		for i, res := range results {
			if c := res.Continuation; res.Err == nil && c != nil && c.Chunk.ID() != ran[i].Chunk.ID() {
				links = append(links, *c)
				of = append(of, i)
			}
		}
		if len(links) == 0 {
			break
		}
		for j, lr := range r.RunTasks(ctx, links, 0) {
			i := of[j]
			res := &results[i]
			res.Stats.Add(lr.Stats)
			res.BadRecords += lr.BadRecords
			res.BytesRead += lr.BytesRead
			res.chunksDone += lr.chunksDone
			res.failures = addCodes(res.failures, lr.failures)
			res.pending = addCounters(res.pending, lr.pending)
			res.pendingCodes = addCodes(res.pendingCodes, lr.pendingCodes)
			res.Continuation, res.Stopped, res.Held = lr.Continuation, lr.Stopped, lr.Held
			if lr.Err != nil {
				r.log.WarnContext(ctx, "a chained chunk failed; it is queued to run again on its own", "chunk", links[j].Chunk.URI(), "task", links[j].ID(), "error", lr.Err)
				res.Continuation = &links[j]
			}
			ran[i] = links[j]
		}
	}
	sendCtx := partialbatch.SendContext(ctx)
	if slices.ContainsFunc(results, func(res TaskResult) bool {
		return res.Held != nil && !cancelled(res.Held) && res.Continuation != nil && res.Err == nil
	}) {
		r.holdHere(sendCtx)
	}
	for i := range results {
		r.settleHeld(sendCtx, &results[i])
		if tasks[i].MessageID != "" {
			r.continueQueued(sendCtx, tasks[i], &results[i])
		}
		r.settleTask(sendCtx, tasks[i], results[i])
	}
	return results
}

// errNotStarted fails the message of a task that stopped before it read a
// record: it comes back, as the task itself.
var errNotStarted = errors.New("stopped before reading a record of the task")

// continueQueued queues the continuation of task t, which came from the
// work queue, before t is settled, so that what its run counts is what
// became of its message: continued once the continuation is queued;
// otherwise the message comes back (res.Err). A continuation that is the
// task itself (it stopped before reading a record) is not queued, since a
// FIFO work queue would drop it as a duplicate: the message comes back.
func (r *Runner) continueQueued(ctx context.Context, t worktask.Task, res *TaskResult) {
	c := res.Continuation
	if c == nil || res.Err != nil || r.work == nil {
		return
	}
	if c.ID() == t.ID() {
		res.Err, res.Continuation = fmt.Errorf("%w: %w", errNotStarted, partialbatch.ErrDeadline), nil
		return
	}
	if err := r.Enqueue(ctx, *c); err != nil {
		res.Err = fmt.Errorf("queue the continuation at offset %d: %w", c.ResumeAt, err)
		return
	}
	res.Continuation, res.ContinuationQueued = nil, true
}

// settleHeld puts back or parks the continuation of a task its run's gate
// stopped (see putBack), which then has none, and counts the task held or,
// parked, cancelled. Without a work queue only a cancelled run's tasks stop (the
// others wait in place): they end, counted cancelled. A continuation that
// cannot be put back fails the task, whose message comes back.
func (r *Runner) settleHeld(ctx context.Context, res *TaskResult) {
	c := res.Continuation
	if res.Held == nil || c == nil || res.Err != nil {
		return
	}
	parked := cancelled(res.Held) // without a work queue: the task ends
	if r.work != nil {
		var err error
		if parked, err = r.putBack(ctx, c.RunID, *c, res.Held); err != nil {
			res.Err = err
			return
		}
	}
	res.Continuation = nil
	if parked {
		res.TasksCancelled++
	} else {
		res.TasksHeld++
	}
}
