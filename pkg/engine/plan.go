package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Run lists and plans the dataset req names and sends it: inline when it
// is small enough, else as tasks on the work queue; with req.Queue, all
// of it as tasks on the work queue. Planning stops at ctx's end: the rest
// of the listing then goes to the work queue as a planning step (see
// PlanStep), with the tasks planned so far. A request that Validate
// refuses fails before anything is listed; one with DryRun set is a dry
// run (see DryRun), which sends nothing.
func (r *Runner) Run(ctx context.Context, req Request) (Report, error) {
	if req.Queue && r.work == nil {
		return Report{RunID: req.RunID}, errors.New("fanout: no work queue to queue the dataset on")
	}
	if req.DryRun {
		o := dryRunOptions(req)
		o.Queue = req.Queue
		return r.DryRun(ctx, req, o)
	}
	if req.Queue {
		if err := r.targetOn(ctx, &req.Overrides); err != nil {
			return Report{RunID: req.RunID}, err
		}
		return r.request(ctx, req, r.queued)
	}
	return r.request(ctx, req, r.inline)
}

// targetOn names the runner's target queue in ov, unless ov names one, so
// that tasks queued for other workers, which may have a target of their
// own, send where this runner would.
func (r *Runner) targetOn(ctx context.Context, ov *worktask.Overrides) error {
	if ov.TargetQueueURL != "" {
		return nil
	}
	target, err := r.target(ctx, &worktask.Overrides{}, worktask.ModeRecord)
	if err != nil {
		return err
	}
	ov.TargetQueueURL = target.QueueURL()
	return nil
}

// request runs req as the first planning step of its run, its tasks going
// to to.
func (r *Runner) request(ctx context.Context, req Request, to sink) (Report, error) {
	if err := r.validate(ctx, &req); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	r.budgeted(&req.Overrides)
	runID := cmp.Or(req.RunID, NewRunID())
	if r.opts.Control.Runs == nil {
		r.ledger.reset(runID)
	}
	step := &worktask.Plan{RunID: runID, Source: req.Source, Step: 1}
	return r.runAndReport(ctx, r.list(ctx, req.Source, dataset.Cursor{}), newPlanRun(runID, req.Overrides, step), to)
}

// ObjectsOptions says how RunObjects runs its objects. The zero value
// sends them from this process, with the runner's settings, and writes the
// run report's manifest.
type ObjectsOptions struct {
	// Overrides are the run's own settings.
	Overrides worktask.Overrides
	// Queue sends every chunk to the work queue as a task, however small
	// the run, and writes no manifest: s3ingest hands large objects to
	// fanout's workers this way. The tasks name the runner's target queue
	// when Overrides name none.
	Queue bool
	// NoManifest leaves the run report's manifest unwritten: the drivers
	// (S3 Batch Operations, Distributed Map) run many objects in one run,
	// over many invocations, and write an invocation's report instead
	// (see WriteInvocationReport).
	NoManifest bool
}

// RunObjects plans and sends objects as one run: S3 event notifications
// come in here, each object pinned to the notified version, and so do the
// objects the drivers name.
func (r *Runner) RunObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], o ObjectsOptions) (Report, error) {
	if o.Queue {
		if err := r.targetOn(ctx, &o.Overrides); err != nil {
			return Report{RunID: runID}, err
		}
	}
	pr := newPlanRun(runID, o.Overrides, nil)
	switch {
	case o.Queue:
		return r.plan(ctx, listed(objs), pr, r.queued)
	case o.NoManifest:
		return r.plan(ctx, listed(objs), pr, r.inline)
	}
	return r.runAndReport(ctx, listed(objs), pr, r.inline)
}

// runAndReport runs and then writes the run report's manifest, unless the
// run was a repeat that found every task run by an earlier delivery (a
// notification S3 sent twice, a request sent again with its runId): the
// manifest then stays the one of the delivery that sent the records.
func (r *Runner) runAndReport(ctx context.Context, objs iter.Seq2[dataset.Listed, error], pr *planRun, to sink) (Report, error) {
	at := time.Now().UTC()
	rep, err := r.plan(ctx, objs, pr, to)
	if err == nil && !rep.Queued && rep.TasksSkipped > 0 && rep.RecordsRead == 0 {
		return rep, nil
	}
	// Written after work ends, as the continuations are (see queued).
	if rerr := r.report.manifest(partialbatch.SendContext(ctx), rep, at); err == nil {
		err = rerr
	}
	return rep, err
}

// PlanStep runs a planning step from the work queue: it lists the rest of
// the step's dataset from its cursor, and queues the chunk tasks it plans
// and, when ctx ends first, the next step. A step whose claim (with a
// claims store) is done queues nothing: its tasks and next step are on the
// work queue already. A step that ends before it planned an object fails,
// to come back, since its next step would be itself. With Options.Control.Runs, a
// step of a paused run goes back on the work queue after HoldDelay, and
// one of a cancelled run is parked, both without error.
func (r *Runner) PlanStep(ctx context.Context, p worktask.Plan) (Report, error) {
	rep := Report{RunID: p.RunID}
	ov := overridesOf(p.Overrides)
	if r.opts.Control.Runs != nil {
		// A paused run's step goes back on the work queue, a cancelled
		// run's is parked, as its tasks are.
		err := r.pacer(p.RunID, cmp.Or(ov.MaxRate.Value(), r.opts.Control.MaxRate)).Wait(ctx, 0)
		switch {
		case holds(err):
			if !cancelled(err) {
				r.holdHere(partialbatch.SendContext(ctx))
			}
			_, err := r.putBack(partialbatch.SendContext(ctx), p.RunID, p, err)
			return rep, err
		case err != nil:
			return rep, fmt.Errorf("fanout: planning step %d of run %s: read the run's control record: %w", p.Step, p.RunID, err)
		}
	}
	var c *claims.Claim
	if r.opts.Claims != nil {
		got, err := r.opts.Claims.Acquire(ctx, p.RunID+"/plan/"+p.ID(), r.leaseUntil(ctx))
		switch {
		case errors.Is(err, claims.ErrDone):
			rep.TasksSkipped = 1
			return rep, nil
		case err != nil:
			return rep, fmt.Errorf("fanout: planning step %d of run %s: %w", p.Step, p.RunID, err)
		}
		c = &got
	}
	rep, err := r.plan(ctx, r.list(ctx, p.Source, p.Cursor), newPlanRun(p.RunID, ov, &p), r.queued)
	if c != nil {
		sendCtx, cancel := settleContext(ctx)
		defer cancel()
		var serr error
		if err != nil {
			serr = r.opts.Claims.Release(sendCtx, *c, 0)
		} else {
			serr = r.opts.Claims.Done(sendCtx, *c)
		}
		if serr != nil {
			r.log.WarnContext(ctx, "claims store not updated", "planStep", p.ID(), "error", serr)
		}
	}
	return rep, err
}

// listed turns objects into a listing that cannot resume.
func listed(objs iter.Seq2[dataset.Object, error]) iter.Seq2[dataset.Listed, error] {
	return func(yield func(dataset.Listed, error) bool) {
		for o, err := range objs {
			if !yield(dataset.Listed{Object: o}, err) || err != nil {
				return
			}
		}
	}
}

// tasks plans obj into the chunk tasks of run runID, sent as ov says. It
// reads a CSV object's header or a Parquet object's footer. The tasks are
// not chained: whoever runs them keeps the object's chunks in order.
func (r *Runner) tasks(ctx context.Context, runID string, obj dataset.Object, ov worktask.Overrides) ([]worktask.Task, error) {
	if err := ov.Validate(); err != nil {
		return nil, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(ctx, runID, ov, false)
	if err != nil {
		return nil, err
	}
	ts, _, err := plan(ctx, obj)
	return ts, err
}

// Enqueue sends tasks to the work queue, such as the continuation of a task
// that ran out of time.
func (r *Runner) Enqueue(ctx context.Context, tasks ...worktask.Task) error {
	_, err := enqueue(ctx, r, slices.Values(tasks))
	return err
}
