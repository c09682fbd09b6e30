package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// DefaultMaxFailures is the failure budget, of records and of chunks of
// objects alike, of a run a request starts when neither the request nor
// the runner gives one (see Options.Control.MaxFailures). A backfill that fails a
// tenth of what it reads has a wrong setting (a format, a mapping, a
// target too small for its records) far more often than bad data, and
// stopping it then keeps the rest of the dataset from being written off
// to the failure output; a run with a few bad records goes on.
const DefaultMaxFailures = "10%"

// The least a share of failures is judged on: a share of a few records or
// chunks says little.
const (
	leastRecords = 100
	leastChunks  = 10
)

// budgeted gives a requested run's overrides the failure budget that
// applies: the request's, else the runner's, else DefaultMaxFailures.
func (r *Runner) budgeted(ov *worktask.Overrides) {
	if ov.MaxFailures.IsZero() {
		ov.MaxFailures = cmp.Or(r.opts.Control.MaxFailures, worktask.LimitOf(DefaultMaxFailures))
	}
	if ov.MaxFailedObjects.IsZero() {
		ov.MaxFailedObjects = cmp.Or(r.opts.Control.MaxFailedObjects, worktask.LimitOf(DefaultMaxFailures))
	}
}

// overBudget returns why the failures of res, the result of tr, take its
// run past the failure budget of its overrides, or the run stopped
// already, or "" when neither. The run's counts are its record's (one
// GetItem, only for a task with failures) and what this process's tasks
// did that is not in it yet (see ledger); a run whose record cannot be
// read is not stopped.
func (r *Runner) overBudget(ctx context.Context, tr *taskRun, res TaskResult) string {
	if !r.budgets(tr.task) || res.RecordsFailed == 0 && res.ObjectsFailed == 0 {
		return ""
	}
	runID := tr.task.RunID
	run := r.ledger.get(runID)
	ov := overridesOf(tr.task.Overrides)
	if r.opts.Control.Runs != nil {
		stored, err := r.opts.Control.Runs.Get(ctx, runID)
		if err != nil && !errors.Is(err, runstate.ErrNoRun) {
			r.log.WarnContext(ctx, "the run's failure budget could not be read; the task's failures are written off", "runId", runID, "error", err)
			return ""
		}
		run.Reason = stored.Reason
		run.Counters = addCounters(stored.Counters, run.Counters)
		run.FailureCodes = addCodes(stored.FailureCodes, run.FailureCodes)
		// A budget a resume gave the run wins over the one the task was
		// queued with: a task on its way when the run stopped was not
		// parked, and so not rewritten.
		if stored.MaxFailures != "" {
			ov.MaxFailures = worktask.LimitOf(stored.MaxFailures)
		}
		if stored.MaxFailedObjects != "" {
			ov.MaxFailedObjects = worktask.LimitOf(stored.MaxFailedObjects)
		}
	}
	if run.Reason != "" {
		return run.Reason // its failures wait for the fix too
	}
	failed, read := run.RecordsFailed+res.RecordsFailed, run.RecordsRead+res.RecordsRead
	chunks, planned := run.ObjectsFailed+int64(res.ObjectsFailed), run.TasksPlanned
	codes := addCodes(run.FailureCodes, res.failures)
	switch {
	case ov.MaxFailures.Exceeded(failed, read, leastRecords):
		return fmt.Sprintf("failure budget spent: %d of the %d records read failed, past maxFailures %s (%s)", failed, read, ov.MaxFailures, FailureCodes(codes, 3))
	case ov.MaxFailedObjects.Exceeded(chunks, planned, leastChunks):
		return fmt.Sprintf("failure budget spent: %d of the %d chunks planned could not be read, past maxFailedObjects %s (%s)", chunks, planned, ov.MaxFailedObjects, FailureCodes(codes, 3))
	}
	return ""
}

// pend adds what the task of tr, whose failures are written, did to its
// run's ledger, until its run's record holds it (see settleTask).
func (r *Runner) pend(tr *taskRun, res *TaskResult) {
	if !r.budgets(tr.task) {
		return
	}
	res.pending = runstate.Counters{RecordsRead: res.RecordsRead, RecordsFailed: res.RecordsFailed, ObjectsFailed: int64(res.ObjectsFailed)}
	res.pendingCodes = res.failures
	r.ledger.tally(tr.task.RunID, res.pending, res.pendingCodes)
}

// addCounters returns the sum of the counters the budget reads.
func addCounters(a, b runstate.Counters) runstate.Counters {
	a.TasksPlanned += b.TasksPlanned
	a.RecordsRead += b.RecordsRead
	a.RecordsFailed += b.RecordsFailed
	a.ObjectsFailed += b.ObjectsFailed
	return a
}

// budgets reports whether t's run has a failure budget that this runner
// keeps (see keepsBudget).
func (r *Runner) budgets(t worktask.Task) bool {
	return r.keepsBudget(t.RunID, overridesOf(t.Overrides))
}

// keepsBudget reports whether run runID, with overrides ov, has a failure
// budget that this runner keeps: a queued run's needs Options.Control.Runs, where
// its invocations share its counts (as MaxRate's budget does); each
// invocation alone would see only its own tasks.
func (r *Runner) keepsBudget(runID string, ov worktask.Overrides) bool {
	return runID != "" && !(ov.MaxFailures.IsZero() && ov.MaxFailedObjects.IsZero()) && (r.opts.Control.Runs != nil || r.work == nil)
}

// stopOverBudget stops tr's run for why, and makes res, the result of a
// task that would have spent its run's failure budget, a task held by the
// stop: its failures are not written off but read again when the run is
// resumed (after a fix), from the first of them, and it is parked as a
// cancel parks a task. It reports nothing the run did not do: its failed
// records count as cut off.
func (r *Runner) stopOverBudget(ctx context.Context, tr *taskRun, res *TaskResult, why string) {
	tr.unwritten()
	res.RecordsCutOff += res.RecordsFailed
	res.RecordsFailed, res.ObjectsFailed, res.BadRecords, res.failures = 0, 0, 0, nil
	if err := r.stopRun(ctx, tr.task.RunID, why); err != nil {
		// The task fails, its failures not written: its message comes
		// back after its visibility timeout, to stop the run then.
		res.Err = err
		return
	}
	next := tr.task
	next.ResumeAt = tr.releaseAt()
	res.Continuation, res.Held = &next, &runstate.StopError{State: runstate.StateCancelled}
	res.StopReason = why
}

// stopRun stops run runID for why, unless it is stopped (or paused)
// already, and has this runner's tasks of the run see it before they next
// start or send.
func (r *Runner) stopRun(ctx context.Context, runID, why string) error {
	ok := false
	if r.opts.Control.Runs == nil {
		ok = r.ledger.stop(runID, why)
	} else {
		var err error
		if ok, err = r.opts.Control.Runs.Stop(ctx, runID, why); err != nil {
			return fmt.Errorf("fanout: stop run %s past its failure budget: %w", runID, err)
		}
		r.stale(runID)
	}
	if ok {
		r.log.ErrorContext(ctx, "run stopped", "runId", runID, "reason", why)
	}
	return nil
}

// judgeRead stops tr's run as soon as tr's read ends, when the failures
// the read met (records that cannot be read or mapped, a chunk that
// cannot be read) take the run past its budget, so that the tasks not
// started yet are held rather than read. The task itself, and SQS's
// refusals, are judged as it settles (see overBudget).
func (r *Runner) judgeRead(ctx context.Context, tr *taskRun) {
	if tr.held != nil || tr.readErr != nil || tr.res.RecordsFailed == 0 && tr.res.ObjectsFailed == 0 {
		return
	}
	res := tr.res
	res.failures = failureCodes(tr.fails)
	if why := r.overBudget(ctx, tr, res); why != "" {
		if err := r.stopRun(ctx, tr.task.RunID, why); err != nil {
			r.log.WarnContext(ctx, "the run could not be stopped; its tasks settle it", "runId", tr.task.RunID, "error", err)
		}
	}
}

// failureCodes counts fs's records by failure code.
func failureCodes(fs []Failure) map[string]int64 {
	if len(fs) == 0 {
		return nil
	}
	codes := map[string]int64{}
	for _, f := range fs {
		codes[f.Code] += max(f.records, 1)
	}
	return codes
}

// FailureCodes writes the n commonest codes of counts of failed records by
// failure code, as a run's record (runstate.Run.FailureCodes) or a dry run
// (DryRun.FailureCodes) keeps them, with their counts, commonest first;
// every code when n is 0.
func FailureCodes(codes map[string]int64, n int) string {
	if n <= 0 {
		n = len(codes)
	}
	keys := slices.SortedFunc(maps.Keys(codes), func(a, b string) int {
		return cmp.Or(cmp.Compare(codes[b], codes[a]), strings.Compare(a, b))
	})
	var b strings.Builder
	for i, k := range keys[:min(n, len(keys))] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, codes[k])
	}
	return b.String()
}

// addCodes returns the sum of the counts of a and b.
func addCodes(a, b map[string]int64) map[string]int64 {
	if len(a)+len(b) == 0 {
		return nil
	}
	sum := maps.Clone(a)
	if sum == nil {
		sum = map[string]int64{}
	}
	for code, n := range b {
		sum[code] += n
	}
	return sum
}

// ledger keeps, in the process, what the failure budget of a run needs
// beside the run's record: with Options.Control.Runs, what this process's tasks
// did that the record does not hold yet (their counters are written as
// a batch of tasks settles); without, everything, and the stop itself,
// for a run sent in one process, as the CLI sends it without a claims
// table. It is safe for concurrent use.
type ledger struct {
	mu   sync.Mutex
	runs map[string]*runstate.Run
}

// run returns the run's record, made if need be; l.mu is held. Past
// maxPacers runs it forgets those that hold nothing, and then, a warm
// function having seen that many runs at once, all of them.
func (l *ledger) run(runID string) *runstate.Run {
	if l.runs == nil {
		l.runs = map[string]*runstate.Run{}
	}
	if _, ok := l.runs[runID]; !ok && len(l.runs) >= maxPacers {
		maps.DeleteFunc(l.runs, func(_ string, r *runstate.Run) bool {
			return r.Reason == "" && r.Counters.IsZero() && len(r.FailureCodes) == 0
		})
		if len(l.runs) >= maxPacers {
			clear(l.runs)
		}
	}
	run, ok := l.runs[runID]
	if !ok {
		run = &runstate.Run{ID: runID, State: runstate.StateRunning}
		l.runs[runID] = run
	}
	return run
}

// get returns a copy of the run's record.
func (l *ledger) get(runID string) runstate.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	run := *l.run(runID)
	run.FailureCodes = maps.Clone(run.FailureCodes)
	return run
}

// tally adds what a task or a planning did to the run's record.
func (l *ledger) tally(runID string, c runstate.Counters, failures map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	run := l.run(runID)
	run.Counters = addCounters(run.Counters, c)
	run.FailureCodes = addCodes(run.FailureCodes, failures)
}

// settled takes out of the run's record what a task added (see
// TaskResult.pending) once its run's record in the table holds it.
func (l *ledger) settled(runID string, c runstate.Counters, failures map[string]int64) {
	if c.IsZero() && len(failures) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	run, ok := l.runs[runID]
	if !ok {
		return // forgotten (see run): nothing to take out
	}
	run.TasksPlanned = max(run.TasksPlanned-c.TasksPlanned, 0)
	run.RecordsRead = max(run.RecordsRead-c.RecordsRead, 0)
	run.RecordsFailed = max(run.RecordsFailed-c.RecordsFailed, 0)
	run.ObjectsFailed = max(run.ObjectsFailed-c.ObjectsFailed, 0)
	for code, n := range failures {
		if run.FailureCodes[code] <= n {
			delete(run.FailureCodes, code)
		} else {
			run.FailureCodes[code] -= n
		}
	}
}

// reset forgets the run: a request that starts it again, after a fix,
// starts its budget afresh.
func (l *ledger) reset(runID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.runs, runID)
}

// stop stops the run for why, unless it is stopped, and reports whether it
// did.
func (l *ledger) stop(runID, why string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	run := l.run(runID)
	if run.Reason != "" {
		return false
	}
	run.State, run.Reason = runstate.StateCancelled, why
	return true
}

// stopped returns why the run stopped itself, or "".
func (l *ledger) stopped(runID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run, ok := l.runs[runID]; ok {
		return run.Reason
	}
	return ""
}

// stale makes the tasks of run runID in this runner read its control
// record before they next start or send (see runstate.Pacer.Stale).
func (r *Runner) stale(runID string) {
	r.mu.Lock()
	p := r.pacers[runID]
	r.mu.Unlock()
	if p != nil {
		p.Stale()
	}
}
