package engine

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// readGroup reads the lanes of specs, up to concurrency at once, hands each
// task's taskRun back on done as its read ends, and then closes done and
// pipe.
func (r *Runner) readGroup(work, readCtx context.Context, specs []*taskSpec, concurrency int, pipe *entryPipe, done chan<- *taskRun) {
	defer pipe.close()
	defer close(done)
	var g errgroup.Group
	g.SetLimit(concurrency)
	for _, lane := range lanes(specs, specs[0].sender.FIFO()) {
		if work.Err() != nil || readCtx.Err() != nil {
			break // not started: their whole chunk is their continuation
		}
		g.Go(func() error {
			r.readLane(work, readCtx, specs, lane, pipe, done)
			return nil
		})
	}
	g.Wait()
}

// readLane reads the tasks of one lane (their places in specs) one after
// another.
func (r *Runner) readLane(work, readCtx context.Context, specs []*taskSpec, lane []int, pipe *entryPipe, done chan<- *taskRun) {
	for i, g := range lane {
		if work.Err() != nil || readCtx.Err() != nil {
			return
		}
		tr := r.gated(work, readCtx, specs[g], g)
		if tr == nil {
			tr = r.read(work, readCtx, specs[g], g, pipe)
			r.judgeRead(partialbatch.SendContext(work), tr)
		}
		readErr, resumes, held := tr.readErr, tr.resumeAt >= 0 || !tr.started, tr.held
		done <- tr
		switch {
		case readErr != nil:
			// The object's later chunks must not overtake this one's
			// retry: they fail with it.
			for _, later := range lane[i+1:] {
				lt := newTaskRun(specs[later], later)
				lt.readErr = fmt.Errorf("an earlier chunk of the object failed: %w", readErr)
				done <- lt
			}
			return
		case held != nil:
			// Held with it, they go back in their order.
			for _, later := range lane[i+1:] {
				lt := newTaskRun(specs[later], later)
				lt.held = held
				done <- lt
			}
			return
		case resumes:
			return // the lane's later tasks keep their place after its continuation
		}
	}
}

// gated checks s's gate before its read starts, and returns the taskRun
// of a task that does not start: held (its run stopped, or its target's
// backlog high), failed (the gate could not be read) or not started (work
// ended). It returns nil when the read may start.
func (r *Runner) gated(work, readCtx context.Context, s *taskSpec, group int) *taskRun {
	if r.ledger.stopped(s.task.RunID) != "" {
		// Its run spent its failure budget in this process: it is held as
		// a cancelled run's task is, not started.
		tr := newTaskRun(s, group)
		tr.held = &runstate.StopError{State: runstate.StateCancelled}
		return tr
	}
	if s.gate == nil {
		return nil
	}
	ctx, stop := context.WithCancel(readCtx)
	defer stop()
	defer context.AfterFunc(work, stop)()
	err := s.gate.check(ctx)
	if err == nil {
		return nil
	}
	tr := newTaskRun(s, group)
	switch {
	case holds(err):
		tr.held = err
	case ctx.Err() == nil:
		tr.readErr = err
	}
	return tr
}

// lanes are the places in specs of the tasks that are read one after
// another. On a FIFO queue the tasks of one object share a lane, in order,
// so that its records keep their order in its group; elsewhere each task
// is a lane of its own.
func lanes(specs []*taskSpec, fifo bool) [][]int {
	var out [][]int
	byObject := map[dataset.Object]int{}
	for g, s := range specs {
		obj := s.task.Chunk.Object
		if i, ok := byObject[obj]; ok && fifo {
			out[i] = append(out[i], g)
			continue
		}
		byObject[obj] = len(out)
		out = append(out, []int{g})
	}
	return out
}
