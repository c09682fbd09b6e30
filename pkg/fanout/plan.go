package fanout

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"encoding/json"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Run lists and plans the dataset req names and sends it: inline when it
// is small enough, else as tasks on the work queue. A request that Validate
// refuses fails before anything is listed.
func (r *Runner) Run(ctx context.Context, req Request) (Report, error) {
	if err := req.Validate(); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	return r.RunObjects(ctx, req.RunID, dataset.Objects(ctx, r.s3, req.Source), req.Overrides)
}

// RunObjects plans and sends objects as one run. S3 event notifications
// come in here, each object pinned to the notified version.
func (r *Runner) RunObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides) (Report, error) {
	at := time.Now().UTC()
	rep, err := r.run(ctx, runID, objs, ov, false)
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
	return r.run(ctx, runID, objs, ov, true)
}

// run is the one planning loop: it plans objects into chunk tasks as it
// lists them, and keeps them while the run is small enough to send here;
// past InlineMaxBytes (or with queue set) the tasks go to the work queue as
// they are planned.
func (r *Runner) run(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides, queue bool) (Report, error) {
	if runID == "" {
		runID = NewRunID()
	}
	rep := Report{RunID: runID}
	if err := ov.Validate(); err != nil {
		return rep, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(runID, ov)
	if err != nil {
		return rep, err
	}
	var planErr error
	tasks := func(yield func(worktask.Task) bool) {
		for obj, err := range objs {
			var ts []worktask.Task
			if err == nil {
				ts, err = plan(ctx, obj)
			}
			if err != nil {
				planErr = err
				return
			}
			rep.Objects++
			rep.Chunks += len(ts)
			rep.BytesPlanned += obj.Size
			if p := r.opts.Progress; p != nil {
				p.BytesPlanned.Add(obj.Size)
			}
			for _, t := range ts {
				if !yield(t) {
					return
				}
			}
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
	if !queue {
		if planErr != nil {
			return rep, planErr
		}
		var rest []worktask.Task
		for _, res := range r.RunTasks(ctx, inline, 0) {
			rep.Stats.Add(res.Stats)
			if res.Continuation != nil {
				rest = append(rest, *res.Continuation)
			}
			err = errors.Join(err, res.Err)
		}
		if err == nil && len(rest) > 0 {
			// Out of time: what is left goes to the work queue, in the
			// time the send context leaves after work ended.
			rep.Queued = true
			rep.TasksQueued, err = r.enqueue(partialbatch.SendContext(ctx), func(yield func(worktask.Task) bool) {
				for _, t := range rest {
					if !yield(t) {
						return
					}
				}
			})
		}
		return rep, err
	}
	rep.Queued = true
	rep.TasksQueued, err = r.enqueue(ctx, func(yield func(worktask.Task) bool) {
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
	})
	return rep, errors.Join(err, planErr)
}

// Tasks plans obj into the chunk tasks of run runID, sent as ov says. It
// reads a CSV object's header or a Parquet object's footer.
func (r *Runner) Tasks(ctx context.Context, runID string, obj dataset.Object, ov Overrides) ([]worktask.Task, error) {
	if err := ov.Validate(); err != nil {
		return nil, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(runID, ov)
	if err != nil {
		return nil, err
	}
	return plan(ctx, obj)
}

// planner returns the function that plans an object of run runID into
// tasks, with the chunk size and format ov gives, or the runner's.
func (r *Runner) planner(runID string, ov Overrides) (func(context.Context, dataset.Object) ([]worktask.Task, error), error) {
	raw, err := json.Marshal(ov)
	if err != nil {
		return nil, err
	}
	opts := r.opts.Plan
	if ov.Format != "" {
		opts.Format = ov.Format
	}
	if n, _, _ := ov.settings(); n > 0 {
		opts.ChunkSize = n
	}
	planner := dataset.NewPlanner(r.s3, opts)
	return func(ctx context.Context, obj dataset.Object) ([]worktask.Task, error) {
		chunks, err := planner.Plan(ctx, obj)
		if err != nil {
			return nil, err
		}
		tasks := make([]worktask.Task, len(chunks))
		for i, c := range chunks {
			tasks[i] = worktask.Task{RunID: runID, Chunk: c, Overrides: raw}
		}
		return tasks, nil
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
	_, err := r.enqueue(ctx, func(yield func(worktask.Task) bool) {
		for _, t := range tasks {
			if !yield(t) {
				return
			}
		}
	})
	return err
}

// enqueue sends tasks to the work queue and returns how many it accepted.
func (r *Runner) enqueue(ctx context.Context, tasks iter.Seq[worktask.Task]) (int, error) {
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
