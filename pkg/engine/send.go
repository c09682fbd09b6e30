package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

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
