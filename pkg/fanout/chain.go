package fanout

import (
	"context"
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
// result is added to its run's counters (see Options.Runs).
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
			res.Continuation, res.Stopped, res.Held = lr.Continuation, lr.Stopped, lr.Held
			if lr.Err != nil {
				r.log.WarnContext(ctx, "a chained chunk failed; it is queued to run again on its own", "chunk", links[j].Chunk.URI(), "task", links[j].ID(), "error", lr.Err)
				res.Continuation = &links[j]
			}
			ran[i] = links[j]
		}
	}
	sendCtx := partialbatch.SendContext(ctx)
	for i := range results {
		r.settleHeld(sendCtx, &results[i])
		r.settleTask(sendCtx, tasks[i], results[i])
	}
	return results
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
