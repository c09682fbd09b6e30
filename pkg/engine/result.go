package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// taskRun is what became of one task of RunTasks: its fixed spec and what
// its read and its send did. One goroutine owns it at a time: its reader
// while it reads (see read), then, handed back on its group's done
// channel, the group's goroutine, which adds what the send did (see
// runGroup) and settles the task.
type taskRun struct {
	*taskSpec
	group int // the task's place in its group
	res   TaskResult
	fails []Failure
	// started is set when the read began; a task never started continues
	// as it is.
	started  bool
	resumeAt int64 // -1: the task finished its chunk
	readErr  error
	stopped  error // why the read stopped at resumeAt, if not for the deadline
	// held is why the run's gate stopped the task at resumeAt, or before
	// it started (see TaskResult.Held).
	held error
	// bytesRead counts the bytes of the records read.
	bytesRead int64
	// produced counts the entries handed to the send, consumed those the
	// send took.
	produced int
	consumed int
	// unaccepted is the offset of the first record that the send did not
	// accept because it stopped (unread, unsent, or unanswered), or -1.
	// The task's claim is released there, so that a task whose records
	// were all accepted is done and the others resume where they must.
	unaccepted int64
	// found collects the offsets of spec.only that start a record of the
	// chunk (RunRecords).
	found map[int64]bool
}

func newTaskRun(s *taskSpec, group int) *taskRun {
	tr := &taskRun{taskSpec: s, group: group, resumeAt: -1, unaccepted: -1}
	if s.only != nil {
		tr.found = make(map[int64]bool, len(s.only))
	}
	return tr
}

// noteMapping adds what the task's mapping took and left out of its
// records to its result.
func (tr *taskRun) noteMapping() {
	if m := tr.mapper; m != nil {
		tr.res.RecordsMapped = m.mapped
		tr.res.FieldsLeftOut = slices.Sorted(slices.Values(m.leftOut))
	}
}

// notAccepted notes that the record at offset, and so the task from there
// on, was not accepted by a send that stopped.
func (tr *taskRun) notAccepted(offset int64) {
	if tr.unaccepted < 0 || offset < tr.unaccepted {
		tr.unaccepted = offset
	}
}

// unwritten notes that tr's failures could not be written: the next
// attempt must start at the first of them, to fail it again.
func (tr *taskRun) unwritten() {
	for _, f := range tr.fails {
		tr.notAccepted(f.at)
	}
}

// releaseAt is where the next attempt of a failed task starts: its first
// record that a stopped send did not accept, else where this one started.
func (tr *taskRun) releaseAt() int64 {
	return max(tr.from, tr.unaccepted)
}

// wants reports whether the record at offset is to be sent, and notes it
// as found when only some records are.
func (tr *taskRun) wants(offset int64) bool {
	if tr.only == nil {
		return true
	}
	if !tr.only[offset] {
		return false
	}
	tr.found[offset] = true
	return true
}

// finish writes a task's failures to the failure output and the run report,
// and returns its result.
func (r *Runner) finish(ctx context.Context, tr *taskRun) TaskResult {
	res := r.result(ctx, tr)
	if res.Err == nil && res.Continuation == nil {
		if next, ok := tr.task.Next(); ok {
			res.Continuation = &next
		}
	}
	if r.settle(ctx, tr, res) {
		res.chunksDone = 1
	}
	return res
}

// result is what tr did, once its failures are written.
func (r *Runner) result(ctx context.Context, tr *taskRun) TaskResult {
	res := tr.res
	res.BytesRead = tr.bytesRead
	t, c := tr.task, tr.task.Chunk
	res.RecordsSent = res.RecordsRead - res.RecordsFailed - res.RecordsCutOff
	if p := r.opts.Progress; p != nil {
		p.RecordsFailed.Add(res.RecordsFailed)
	}
	sendCtx := partialbatch.SendContext(ctx)
	switch {
	case tr.readErr != nil:
		res.Err = fmt.Errorf("fanout: %s [%d,%d): %w", c.Object, c.Start, c.End, tr.readErr)
		if tr.claim != nil && tr.releaseAt() > tr.from {
			// The next attempt resumes after the records this one
			// settled: those of them that failed are put on the failure
			// output now, or nobody would.
			if err := r.writeFailures(sendCtx, tr, tr.releaseAt()); err != nil {
				r.log.WarnContext(ctx, "failures of a task that fails not written; it is sent again from its first failed record", "task", t.ID(), "error", err)
				tr.unwritten()
			}
		}
		return res
	case !tr.started:
		res.Continuation, res.Held = &tr.task, tr.held
		return res
	case tr.consumed < tr.produced:
		res.Err = fmt.Errorf("fanout: %s [%d,%d): %d records were not sent: the send stopped", c.Object, c.Start, c.End, tr.produced-tr.consumed)
		return res
	}
	res.failures = failureCodes(tr.fails)
	if why := r.overBudget(sendCtx, tr, res); why != "" {
		r.stopOverBudget(sendCtx, tr, &res, why)
		return res
	}
	if err := r.writeFailures(sendCtx, tr, -1); err != nil {
		// The records before the first failed one are settled: the next
		// attempt starts there, to put it on the failure output.
		tr.unwritten()
		res.Err = err
		return res
	}
	r.pend(tr, &res)
	if tr.resumeAt >= 0 {
		next := t
		next.ResumeAt = tr.resumeAt
		res.Continuation = &next
		res.Stopped, res.Held = tr.stopped, tr.held
		if tr.stopped != nil {
			r.log.WarnContext(ctx, "read failed part-way; the records read were sent, the rest of the chunk continues from the first record not read",
				"object", c.URI(), "chunk", t.ID(), "resumeAt", tr.resumeAt, "error", tr.stopped)
		}
	}
	return res
}

// writeFailures puts tr's failures before offset before (all of them when
// before is negative) on the failure output and in the run report, under
// the name of this attempt: the task and where it started, so that the
// failures of an attempt that resumed part-way do not replace those of
// the attempt before it.
func (r *Runner) writeFailures(ctx context.Context, tr *taskRun, before int64) error {
	fs := tr.fails
	if before >= 0 {
		fs = slices.DeleteFunc(slices.Clone(fs), func(f Failure) bool { return f.at >= before })
	}
	name := attemptName(tr.task, tr.from)
	if err := r.failures.write(ctx, tr.task.RunID, name, fs); err != nil {
		return err
	}
	return r.report.failed(ctx, tr.task, name, fs)
}

// attemptName names one attempt at task t that started reading at from:
// the id of t resumed there, which is t's own id unless the attempt
// resumed from its claim.
func attemptName(t worktask.Task, from int64) string {
	t.ResumeAt = from
	return t.ID()
}
