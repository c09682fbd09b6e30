package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"

	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// pending is an entry on its way to the sender. Its Entry.Ref leads it
// back to the task of its group that read it (Source, the task's place in
// the group) and the records it carries. The entry carries it to the send
// and back in a failure, so that a send keeps nothing per entry: one
// object in record mode is a million entries.
type pending struct {
	entry  sqsbatch.Entry
	weight int64 // of the pipe's bytes it holds
}

// refOf is the Ref of an entry of the group's task-th task that carries
// the records held.
func refOf(task int, held span) sqsbatch.Ref {
	return sqsbatch.Ref{Offset: held.offset, Source: int32(task), Count: int32(held.count)}
}

// span is the records an entry carries: from offset, count of them.
type span struct {
	offset int64
	count  int
}

// errSendStopped ends the reads when the send they feed has stopped.
var errSendStopped = errors.New("the send stopped")

// runGroup reads specs (tasks with one sender), up to concurrency at once,
// streams their entries through one Send, and returns what became of each
// task, in the order of specs. The readers own their taskRun until they
// hand it back on done; the send owns what it counts (groupSend); both are
// joined here once the readers and the send have ended.
func (r *Runner) runGroup(ctx context.Context, specs []*taskSpec, concurrency int) []*taskRun {
	readCtx, stopReading := context.WithCancelCause(partialbatch.SendContext(ctx))
	defer stopReading(nil)
	sender := specs[0].sender
	pipe := newEntryPipe()
	done := make(chan *taskRun, len(specs))
	go r.readGroup(ctx, readCtx, specs, concurrency, pipe, done)
	gs := &groupSend{consumed: make([]int, len(specs))}
	res, err := sender.Send(partialbatch.SendContext(ctx), gs.entries(pipe))
	stopReading(errSendStopped)
	// What is left in the pipe was read and never sent. It is noted once
	// the pipe is closed, when the readers, which note where they were
	// cut, have all returned and handed back their tasks.
	var unsent []sqsbatch.Ref
	for p := range pipe.all() {
		unsent = append(unsent, p.entry.Ref)
	}
	runs := make([]*taskRun, len(specs))
	for tr := range done {
		runs[tr.group] = tr
	}
	for i, s := range specs {
		if runs[i] == nil {
			runs[i] = newTaskRun(s, i) // not started: its whole chunk is its continuation
		}
		runs[i].consumed = gs.consumed[i]
		runs[i].noteMapping()
	}
	for _, ref := range unsent {
		tr := runs[ref.Source]
		tr.notAccepted(ref.Offset)
		tr.res.RecordsCutOff += int64(ref.Count)
		tr.res.Messages--
		if p := r.opts.Progress; p != nil {
			p.Messages.Add(-1)
		}
	}
	r.charge(runs, res, err)
	return runs
}

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

// groupSend is what a group's send counts as it takes entries from the
// pipe: the entries of each task.
type groupSend struct {
	consumed []int
}

// entries yields the pipe's entries to the send.
func (gs *groupSend) entries(pipe *entryPipe) iter.Seq[sqsbatch.Entry] {
	return func(yield func(sqsbatch.Entry) bool) {
		for p := range pipe.all() {
			gs.consumed[p.entry.Ref.Source]++
			if !yield(p.entry) {
				return
			}
		}
	}
}

// charge adds what the send did to runs: its totals to the first task,
// what failed to its own, and, when it stopped with err, the failure of
// each task not settled.
func (r *Runner) charge(runs []*taskRun, res sqsbatch.Result, err error) {
	runs[0].res.Requests += int64(res.Requests)
	runs[0].res.Retries += int64(res.Retries)
	runs[0].res.BytesSent += res.Bytes
	runs[0].res.PeakInFlight = max(runs[0].res.PeakInFlight, res.PeakInFlight)
	runs[0].res.Throttled += int64(res.Throttled)
	for _, f := range res.Failures {
		ref := f.Entry.Ref
		if ref.Source < 0 || int(ref.Source) >= len(runs) {
			continue
		}
		tr := runs[ref.Source]
		tr.res.Messages--
		if p := r.opts.Progress; p != nil {
			p.Messages.Add(-1)
		}
		if err != nil && (f.Stopped() || f.Code == sqsbatch.CodeGroupFailed) {
			// Not the record's fault (its send stopped, or an entry of
			// its FIFO group failed with it): it is sent again by the
			// task's next attempt, not put on the failure output, and
			// not counted failed.
			tr.res.RecordsCutOff += int64(ref.Count)
			tr.notAccepted(ref.Offset)
			continue
		}
		tr.res.RecordsFailed += int64(ref.Count)
		fl := failureFrom(tr.failure(ref.Offset), f)
		fl.records = int64(ref.Count)
		tr.fails = append(tr.fails, fl)
	}
	if err == nil {
		return
	}
	// Each task is settled on its own: one whose records were all accepted
	// is done (or continues, as it would have); the others fail, those not
	// started too (a continuation would only meet the same stop, and a
	// failed task comes back until its queue's DLQ takes it), and resume
	// at their first record not accepted.
	queue := runs[0].sender.QueueURL()
	for _, tr := range runs {
		if !tr.started || tr.unaccepted >= 0 || tr.readErr != nil {
			tr.readErr = cmp.Or(tr.readErr, fmt.Errorf("send to %s: %w", queue, err))
		}
	}
}
