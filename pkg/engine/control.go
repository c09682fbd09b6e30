package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// A run is steered through its gate: before a task takes its claim, before
// its read starts and before each message is handed to the send, the task
// asks the run's Pacer (its control record and its rate) and, with
// TargetMaxBacklog, its target's backlog. A task the gate stops ends as at
// a deadline, its continuation from the first record not handed on, and
// is then put back on the work queue (paused, or a backlog that did not
// drain) or parked (cancelled). Without a work queue a paused or
// backlogged task waits in place instead. The gate keeps no memory of a
// stop: each check reads the control state, as fresh as the Pacer's
// CheckEvery.

// Defaults of the hold timings.
const (
	defaultHold         = 20 * time.Second
	defaultHoldDelay    = 10 * time.Second
	defaultControlEvery = 2 * time.Second
	// maxHoldDelay is SQS's largest DelaySeconds.
	maxHoldDelay = 15 * time.Minute
	// maxPacers bounds the Pacers a Runner keeps: a warm function may see
	// many runs, and a run's Pacer is only worth keeping while its tasks
	// come.
	maxPacers = 256
)

// ErrBacklog is why a task was put back when its target's backlog stayed
// above TargetMaxBacklog for Options.Control.Hold.
var ErrBacklog = errors.New("fanout: the target's backlog stayed above targetMaxBacklog")

// ErrRunStateBusy is why a task was put back when the run's state in the
// claims table answered with throttling, or another error a retry fixes,
// after the SDK's own retries: the task cannot learn its run's state or
// take from its budget, and a task that failed instead would count toward
// the work DLQ for a table's busy minute.
var ErrRunStateBusy = errors.New("fanout: the run's state in the claims table is busy")

// holds reports whether err stops a task to put it back or park it: its
// run is paused or cancelled, its target's backlog did not drain, or its
// run's state could not be read for a while.
func holds(err error) bool {
	var stop *runstate.StopError
	return errors.As(err, &stop) || errors.Is(err, ErrBacklog) || errors.Is(err, ErrRunStateBusy)
}

// busy marks err, an error of the Pacer, as ErrRunStateBusy when it is the
// table's and a retry may fix it.
func busy(ctx context.Context, err error) error {
	var stop *runstate.StopError
	if err == nil || ctx.Err() != nil || errors.As(err, &stop) || awserr.Classify(err) != awserr.Retryable {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRunStateBusy, err)
}

// cancelled reports whether err is the stop of a cancelled run.
func cancelled(err error) bool {
	var stop *runstate.StopError
	return errors.As(err, &stop) && stop.State == runstate.StateCancelled
}

// gate is what a task checks before it reads and sends. Its Pacer and
// backlog are shared by the tasks of the run (and target) in one Runner;
// it is safe for concurrent use.
type gate struct {
	pacer   *runstate.Pacer
	backlog *backlog // nil without TargetMaxBacklog
	limit   int64
	hold    time.Duration
	every   time.Duration
	// inPlace makes a paused run's tasks, and those whose target's backlog
	// is high, wait where they are: there is no work queue to put them
	// back on.
	inPlace bool
}

// gateOf returns the gate of run runID's tasks that send with sender, or
// nil when the run is neither steered nor paced.
func (r *Runner) gateOf(runID string, ov *worktask.Overrides, sender *sqsbatch.Sender) *gate {
	rate := cmp.Or(ov.MaxRate.Value(), r.opts.Control.MaxRate)
	limit := cmp.Or(ov.TargetMaxBacklog.Value(), r.opts.Control.TargetMaxBacklog)
	if r.opts.Control.Runs == nil && rate == 0 && limit == 0 {
		return nil
	}
	g := &gate{pacer: r.pacer(runID, rate), limit: limit,
		hold: r.opts.Control.Hold, every: r.opts.Control.ReadEvery, inPlace: r.work == nil}
	if limit > 0 {
		g.backlog = r.backlogOf(sender.QueueURL())
	}
	return g
}

// pacer returns run runID's Pacer, made once per Runner, so that the
// concurrent tasks of a run in one invocation share its budget and its
// reads of the control record.
func (r *Runner) pacer(runID string, rate int64) *runstate.Pacer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pacers[runID]; ok {
		return p
	}
	if len(r.pacers) >= maxPacers {
		clear(r.pacers)
	}
	p := runstate.NewPacer(r.opts.Control.Runs, runID, runstate.PacerOptions{MaxRate: rate, CheckEvery: r.opts.Control.ReadEvery})
	r.pacers[runID] = p
	return p
}

// control checks the run's control record and waits for n messages of
// its rate: nil while it runs, the *runstate.StopError of a run paused or
// cancelled (in place: cancelled only; a paused run waits until it runs
// again), or ctx's error.
func (g *gate) control(ctx context.Context, n int) error {
	for {
		err := busy(ctx, g.pacer.Wait(ctx, n))
		if err == nil || !g.inPlace || !holds(err) || cancelled(err) {
			return err
		}
		if err := sleep(ctx, g.every); err != nil {
			return err
		}
	}
}

// check is the gate before a task's read starts: the run's control, then
// the target's backlog.
func (g *gate) check(ctx context.Context) error {
	if err := g.control(ctx, 0); err != nil {
		return err
	}
	return g.drained(ctx)
}

// take waits until one more message of the run may be handed to the
// send: while the target's backlog is high (see drained), and for the
// run's rate, which also checks its control record. The Pacer hands out
// from memory the blocks it takes from the run's budget, so that a call
// per message is cheap.
func (g *gate) take(ctx context.Context) error {
	if err := g.drained(ctx); err != nil {
		return err
	}
	return g.control(ctx, 1)
}

// drained returns nil once the target's backlog is at most the limit. It
// waits, reading it again, up to Hold (in place: as long as ctx lasts),
// and then returns ErrBacklog. A backlog that cannot be read for a while
// (SQS throttles, or errs) is waited for the same way: the task is held,
// not failed toward the work DLQ. One that may not be read fails.
func (g *gate) drained(ctx context.Context) error {
	if g.backlog == nil {
		return nil
	}
	var until time.Time
	for {
		n, err := g.backlog.read(ctx, g.every)
		unread := errors.Is(err, errBacklogUnread)
		switch {
		case err != nil && !unread:
			return err
		case !unread && n <= g.limit:
			return nil
		case until.IsZero():
			until = time.Now().Add(cmp.Or(g.hold, defaultHold))
		case !g.inPlace && !time.Now().Before(until) && unread:
			return fmt.Errorf("%w (not read for %s: %w)", ErrBacklog, cmp.Or(g.hold, defaultHold), err)
		case !g.inPlace && !time.Now().Before(until):
			return fmt.Errorf("%w (%d messages, above %d, for %s)", ErrBacklog, n, g.limit, cmp.Or(g.hold, defaultHold))
		}
		if err := sleep(ctx, g.every); err != nil {
			return err
		}
	}
}

// sleep waits d (zero: defaultControlEvery) or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(cmp.Or(d, defaultControlEvery))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backlog is a target queue's ApproximateNumberOfMessages, read at most
// once per interval for all the tasks of a Runner that send there.
type backlog struct {
	sqs sqsbatch.API
	url string

	mu  sync.Mutex
	at  time.Time
	n   int64
	err error
}

// backlogOf returns the backlog of the queue url, made once per Runner.
func (r *Runner) backlogOf(url string) *backlog {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backlogs[url]
	if !ok {
		b = &backlog{sqs: r.sqs, url: url}
		r.backlogs[url] = b
	}
	return b
}

// read returns the queue's backlog, read again when the last read is
// older than every (zero: defaultControlEvery). An error is read again
// the same way.
func (b *backlog) read(ctx context.Context, every time.Duration) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.at.IsZero() && time.Since(b.at) < cmp.Or(every, defaultControlEvery) {
		return b.n, b.err
	}
	out, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(b.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil && ctx.Err() != nil {
		return 0, err // not kept: the next task's context may still be live
	}
	b.at, b.err = time.Now(), nil
	switch {
	case err != nil && isAccessDenied(err):
		b.err = fmt.Errorf("fanout: targetMaxBacklog (TARGET_MAX_BACKLOG) needs sqs:GetQueueAttributes on the target queue %s: %w", b.url, err)
	case err != nil:
		b.err = fmt.Errorf("fanout: read the backlog of the target queue %s for targetMaxBacklog: %w: %w", b.url, errBacklogUnread, err)
	default:
		v := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
		if b.n, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.err = fmt.Errorf("fanout: the target queue %s answered ApproximateNumberOfMessages %q", b.url, v)
		}
	}
	return b.n, b.err
}

// errBacklogUnread marks a backlog read that failed for a reason that may
// pass (throttling, a server error).
var errBacklogUnread = errors.New("not read")

func isAccessDenied(err error) bool {
	switch awserr.Code(err) {
	case "AccessDenied", "AccessDeniedException", "AWS.SimpleQueueService.AccessDenied":
		return true
	}
	return false
}

// putBack puts a task (or planning step) its run's gate stopped back: a
// cancelled run's is parked in the run's state, for `s3sqs resume`;
// another goes back on the work queue as a new message, which comes back
// after HoldDelay. The message that brought it can then be deleted: its
// receive count does not grow toward the work queue's dead-letter queue.
// It reports whether m was parked.
func (r *Runner) putBack(ctx context.Context, runID string, m message, why error) (parked bool, err error) {
	if r.work == nil {
		return false, errors.New("fanout: no work queue to put the task back on")
	}
	e, err := m.Entry(r.work.FIFO())
	if err != nil {
		return false, err
	}
	delay := min(cmp.Or(r.opts.Control.HoldDelay, defaultHoldDelay), maxHoldDelay)
	if cancelled(why) && r.opts.Control.Runs != nil {
		// The Pacer's state may be up to CheckEvery old: a run resumed
		// since, whose parked tasks `s3sqs resume` has just put back, must
		// not have this one parked after them, where nothing would put it
		// back. The record is read again first.
		run, err := r.opts.Control.Runs.Get(ctx, runID)
		switch {
		case err != nil && !errors.Is(err, runstate.ErrNoRun):
			return false, fmt.Errorf("fanout: read the control record of cancelled run %s: %w", runID, err)
		case run.State == runstate.StateCancelled:
			// Parking numbers the task, then writes it: cut between the
			// two by the invocation's end, the number stays unused and a
			// resume passes over it, so both are made whole.
			err := r.opts.Control.Runs.Park(context.WithoutCancel(ctx), runID, e.Body)
			if errors.Is(err, runstate.ErrPassedOver) {
				// A resume put the run's parked tasks back while this one
				// was being parked, and passed over it: the run is
				// running, and the task goes back at once.
				delay = 0
				break
			}
			if err != nil {
				return false, fmt.Errorf("fanout: park a task of cancelled run %s: %w", runID, err)
			}
			return true, nil
		case run.State != runstate.StatePaused:
			delay = 0 // running again: back at once
		}
	}
	if r.work.FIFO() {
		// A FIFO queue takes no delay of a message's own, and would drop
		// the copy as a duplicate of the message it replaces.
		e.DeduplicationID = e.ID + "-held-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	} else {
		e.DelaySeconds = int32(delay / time.Second)
	}
	res, err := r.work.Send(ctx, func(yield func(sqsbatch.Entry) bool) { yield(e) })
	if err == nil && res.Failed > 0 {
		err = res.Failures[0]
	}
	if err != nil {
		return false, fmt.Errorf("fanout: put a held task of run %s back on the work queue: %w", runID, err)
	}
	return false, nil
}

// holdHere waits, before tasks held by a pause or a backlog go back on a
// FIFO work queue, for HoldDelay or half the time ctx has left, whichever
// is shorter. A FIFO queue takes no delay of a message's own: a task put
// back at once would come straight back, and a paused run would invoke
// the function in a loop. One wait serves all the tasks of a call.
func (r *Runner) holdHere(ctx context.Context) {
	if r.work == nil || !r.work.FIFO() {
		return
	}
	wait := min(cmp.Or(r.opts.Control.HoldDelay, defaultHoldDelay), maxHoldDelay)
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	if wait > 0 {
		_ = sleep(ctx, wait) // cut short, the tasks go back sooner
	}
}

// addPlanned adds what pr planned to its run's counters, once however
// often the same planning is made again (see runstate.Table.AddOnce and
// plannedKey): the run started again with its id, a request or a planning
// step retried; with a step's extent (see extent). Its error fails the
// planning, which comes back: a run whose planning went uncounted would
// be done before its tasks are.
func (r *Runner) addPlanned(ctx context.Context, pr *planRun) error {
	if r.opts.Control.Runs == nil {
		if r.keepsBudget(pr.runID, pr.ov) {
			r.ledger.tally(pr.runID, pr.counters(), nil) // its failure budget's
		}
		return nil
	}
	ctx, cancel := settleContext(ctx)
	defer cancel()
	if _, err := r.opts.Control.Runs.AddOnce(ctx, pr.runID, plannedKey(pr), pr.counters(), extentNote(pr)); err != nil {
		return fmt.Errorf("fanout: count the planning of run %s: %w", pr.runID, err)
	}
	return nil
}

// settleTask adds what a delivery of task t did to its run's counters,
// when the runner keeps run state: the chunks it made done (see settle),
// how it ended, as information, and the work it did. Without a work
// queue the tasks a cancel stopped are not parked: they count as stopped.
func (r *Runner) settleTask(ctx context.Context, t worktask.Task, res TaskResult) {
	c := taskCounters(res)
	if r.work == nil {
		c.TasksStopped, c.TasksCancelled = c.TasksCancelled, 0
	}
	if r.opts.Control.Runs == nil || c.IsZero() && len(res.failures) == 0 {
		return // without Runs, the ledger keeps what the budget needs
	}
	// Written after an interrupt too (settleContext), as a claim is, so
	// that status counts what the interrupted run did. A write that fails
	// is logged: the counters are for watching a run, and the work they
	// count is done either way; the ledger keeps it for the run's budget.
	ctx, cancel := settleContext(ctx)
	defer cancel()
	if _, err := r.opts.Control.Runs.Tally(ctx, t.RunID, c, res.failures); err != nil {
		r.log.WarnContext(ctx, "run counters not updated", "runId", t.RunID, "error", err)
		return
	}
	r.ledger.settled(t.RunID, res.pending, res.pendingCodes)
}

// taskCounters is what a delivery of a task (a chain of them, as
// RunChains runs it) adds to its run's counters as it settles: the chunks
// it made done, how it ended, unless it continues (its continuation
// settles it), and what this attempt did, in one write. A delivery that
// found the task held by another delivery, or stopped before it started,
// comes back, and is no failure.
func taskCounters(res TaskResult) runstate.Counters {
	c := runstate.Counters{
		TasksHeld: int64(res.TasksHeld), TasksCancelled: int64(res.TasksCancelled),
		TasksDone: res.chunksDone, BytesRead: res.BytesRead, RecordsRead: res.RecordsRead, RecordsSent: res.RecordsSent,
		RecordsFailed: res.RecordsFailed, RecordsOffloaded: res.RecordsOffloaded, ObjectsFailed: int64(res.ObjectsFailed),
		Messages: res.Messages, Requests: res.Requests,
	}
	switch {
	case res.TasksHeld > 0 || res.TasksCancelled > 0:
	case errors.Is(res.Err, claims.ErrHeld) || errors.Is(res.Err, errNotStarted):
	case res.Err != nil:
		c.TasksFailed = 1
	case res.TasksSkipped > 0 && res.RecordsRead == 0 && res.Continuation == nil:
		c.TasksSkipped = 1
	}
	return c
}

// counters is what pr's planning adds to its run's counters: the chunks
// and objects it planned, and, when it is a planning step, itself done
// and the steps it queued. A run's first step, the request, counts itself
// queued too, so that the steps left are those queued less those done.
func (pr *planRun) counters() runstate.Counters {
	c := runstate.Counters{TasksPlanned: int64(pr.rep.Chunks), Objects: int64(pr.rep.Objects), BytesPlanned: pr.rep.BytesPlanned,
		ObjectsArchived: int64(pr.rep.ObjectsArchived), BytesArchived: pr.rep.BytesArchived,
		ObjectsFiltered: int64(pr.rep.ObjectsFiltered), BytesFiltered: pr.rep.BytesFiltered}
	for by, n := range pr.rep.FilteredBy {
		if c.FilteredBy == nil {
			c.FilteredBy = map[string]int64{}
		}
		c.FilteredBy[by] = int64(n)
	}
	if pr.step != nil {
		c.StepsQueued, c.StepsDone = int64(pr.steps), 1
		if pr.step.Step == 1 {
			c.StepsQueued++
		}
	}
	return c
}
