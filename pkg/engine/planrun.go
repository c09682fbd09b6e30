package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/internal/inorder"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// A run's planning is an iterator of chunk tasks (planRun.tasks) that a
// sink consumes: inline keeps them while the run is small enough and then
// runs them here, queued sends them to the work queue. The caller picks
// the sink; the iterator does not know where its tasks go.

// sink takes the tasks a run's planning yields and sends them, and
// returns the run's report.
type sink func(ctx context.Context, pr *planRun, tasks iter.Seq[worktask.Task]) (Report, error)

// planRun is one run's planning: its report, which the planning iterator
// fills as it plans and the sink completes, and where the listing got to.
// The iterator and the sink run on one goroutine, one after the other.
type planRun struct {
	runID string
	ov    worktask.Overrides
	// step, when set, is the planning step whose listing this is, which
	// can resume: when ctx ends first, the rest of it is queued as the
	// next planning step (see nextSteps).
	step *worktask.Plan
	rep  Report
	// cursor is where the listing resumes after the tasks yielded.
	cursor dataset.Cursor
	// more is set when planning stopped at ctx's end before the listing
	// ended; err when planning failed.
	more bool
	err  error
	// steps counts the planning steps queued after this one; planned is
	// set when the sink took the tasks all (queued them, or ran them), so
	// that they count in the run's counters: a step that fails comes back
	// and plans them again.
	steps   int
	planned bool
	// counted is set when the sink has added the planning to the run's
	// counters itself.
	counted bool
	// ids hashes the ids of the tasks planned, which name a planning
	// without a step (see plannedKey).
	ids hash.Hash
	// extent, when set, is where an earlier delivery of the step, whose
	// planning was counted, stopped: this one plans to it exactly.
	extent *extent
}

// newPlanRun starts the planning of run runID (a new id when empty).
func newPlanRun(runID string, ov worktask.Overrides, step *worktask.Plan) *planRun {
	if runID == "" {
		runID = NewRunID()
	}
	pr := &planRun{runID: runID, ov: ov, step: step, rep: Report{RunID: runID}, ids: sha256.New()}
	if step != nil {
		pr.cursor = step.Cursor
	}
	return pr
}

// plan is the one planning loop: it plans objs into chunk tasks as it
// lists them, Planning.Concurrency objects at once, and hands them to to.
func (r *Runner) plan(ctx context.Context, objs iter.Seq2[dataset.Listed, error], pr *planRun, to sink) (Report, error) {
	if err := pr.ov.Validate(); err != nil {
		return pr.rep, fmt.Errorf("fanout: bad request: %w", err)
	}
	plan, err := r.planner(ctx, pr.runID, pr.ov, true)
	if err != nil {
		return pr.rep, err
	}
	if err := r.readExtent(ctx, pr); err != nil {
		return pr.rep, err
	}
	ov := pr.ov // what a key's version tasks carry
	// Objects a listing found (a prefix, a manifest, a bucket) may be gone
	// by the time they are planned, or a manifest may name objects deleted
	// since it was made: those are skipped and counted. Keys a request
	// names itself, and notified objects, fail the run when missing.
	listedOnly := pr.step != nil && pr.step.Source.Key == "" && len(pr.step.Source.Keys) == 0
	plans := inorder.Map(ctx, objs, r.opts.Planning.Concurrency, func(ctx context.Context, l dataset.Listed) (planned, error) {
		switch {
		case l.Mark():
			return planned{next: l.Next, mark: true, filtered: l.Filtered}, nil
		case l.Err != nil:
			return planned{next: l.Next, obj: l.Object, missing: l.Err}, nil
		case l.Archive != "" && len(l.Versions) == 0:
			// Not read, nor announced: a GET would fail until it is
			// restored.
			return planned{next: l.Next, obj: l.Object, archived: true}, nil
		case len(l.Versions) > 0:
			ts, err := r.versionTasks(ctx, pr.runID, &ov, l)
			var size int64
			for _, v := range l.Versions {
				size += v.Size
			}
			return planned{next: l.Next, size: size, tasks: ts, count: len(ts), objects: len(l.Versions), filtered: l.Filtered}, err
		}
		ts, n, err := plan(ctx, l.Object)
		if listedOnly && errors.Is(err, dataset.ErrNotFound) {
			return planned{next: l.Next, obj: l.Object, missing: err}, nil
		}
		return planned{next: l.Next, size: l.Size, tasks: ts, count: n, objects: 1}, err
	})
	rep, err := to(ctx, pr, r.tasksOf(ctx, pr, plans))
	if pr.planned && !pr.counted {
		// Queued: the step (or request) fails without its count, and
		// comes back to plan and count again.
		err = errors.Join(err, r.addPlanned(partialbatch.SendContext(ctx), pr))
	}
	return rep, err
}

// planned is a listed object and its chunk tasks.
type planned struct {
	next  dataset.Cursor
	size  int64
	tasks []worktask.Task
	count int // chunks, which a chain plans as one task
	// objects is how many objects the tasks are of: every version of a
	// key (dataset.Source.Versions), else one.
	objects int
	mark    bool // no object: the listing moved past keys it leaves out
	// filtered is what the source's filters left out.
	filtered []dataset.Filtered
	// missing is why the listed object obj was not found; archived that
	// obj is in an archive (dataset.Object.Archive).
	obj      dataset.Object
	missing  error
	archived bool
}

// tasksOf yields the tasks of plans, counting each object in pr's report
// and moving pr's cursor past it. A listing that can resume stops at ctx's
// end (pr.more); a planning error stops it (pr.err).
func (r *Runner) tasksOf(ctx context.Context, pr *planRun, plans iter.Seq2[planned, error]) iter.Seq[worktask.Task] {
	resumable := pr.step != nil && r.work != nil
	return func(yield func(worktask.Task) bool) {
		for p, err := range plans {
			if pr.extent != nil && !pr.extent.end && reached(pr.cursor, pr.extent.cursor) {
				pr.more = true
				return
			}
			if resumable && ctx.Err() != nil {
				pr.more = true
				return
			}
			if err != nil {
				pr.err = err
				return
			}
			for _, f := range p.filtered {
				pr.rep.ObjectsFiltered++
				pr.rep.BytesFiltered += max(f.Size, 0)
				pr.rep.filter(f.By, 1)
			}
			switch {
			case p.mark:
			case p.missing != nil:
				pr.rep.ObjectsMissing++
				r.log.WarnContext(ctx, "object listed but not found: skipped", "runId", pr.runID, "object", p.obj.String(), "error", p.missing)
			case p.archived:
				pr.rep.ObjectsArchived++
				pr.rep.BytesArchived += p.obj.Size
				if r.opts.Planning.OnArchived != nil {
					r.opts.Planning.OnArchived(p.obj)
				}
			default:
				r.countPlanned(pr, p)
				for _, t := range p.tasks {
					io.WriteString(pr.ids, t.ID()+"\x00")
					if !yield(t) {
						return
					}
				}
			}
			pr.cursor = p.next
		}
	}
}

// countPlanned counts the object p in pr's report and the progress.
func (r *Runner) countPlanned(pr *planRun, p planned) {
	pr.rep.Objects += p.objects
	pr.rep.Chunks += p.count
	pr.rep.BytesPlanned += p.size
	if pg := r.opts.Progress; pg != nil {
		pg.BytesPlanned.Add(p.size)
		pg.ObjectsPlanned.Add(int64(p.objects))
		pg.TasksPlanned.Add(int64(len(p.tasks)))
	}
}

// planner returns the function that plans an object of run runID into
// tasks, with the chunk size and format ov gives, or the runner's, and
// the number of chunks. With chain set and a FIFO target, an object of
// several chunks is one chained task (see worktask.Chain), so that its
// records reach their groups in the object's order.
func (r *Runner) planner(ctx context.Context, runID string, ov worktask.Overrides, chain bool) (func(context.Context, dataset.Object) ([]worktask.Task, int, error), error) {
	carry := &ov // every task of the object carries the same overrides
	if chain {
		sender, _, err := r.sender(ctx, &ov)
		if err != nil {
			return nil, err
		}
		chain = sender.FIFO()
	}
	opts := r.opts.Plan
	if ov.Format != "" {
		opts.Format = ov.Format
	}
	if n := ov.ChunkSize.Value(); n > 0 {
		opts.ChunkSize = n
	}
	planner := dataset.NewPlanner(r.s3, opts)
	notify := r.notifyModeOf(&ov)
	return func(ctx context.Context, obj dataset.Object) ([]worktask.Task, int, error) {
		if notify {
			return []worktask.Task{{RunID: runID, Chunk: notificationChunk(obj), Overrides: carry}}, 1, nil
		}
		chunks, err := planner.Plan(ctx, obj)
		if _, ok := unreadable(err, ov.Ingest != nil); ok {
			// Planning read the object and met what no retry fixes (a
			// corrupt Parquet footer or compressed CSV header, an object
			// changed since it was listed): it becomes one task for the
			// whole object, whose read meets the same error and puts the
			// object on the failure output with the reason, instead of
			// ending the run.
			chunks, err = []dataset.Chunk{planner.Whole(obj)}, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if chain && len(chunks) > 1 {
			first := chunks[0]
			t := worktask.Task{RunID: runID, Chunk: first, Overrides: carry,
				Chain: &worktask.Chain{Step: first.End - first.Start, Total: chunks[len(chunks)-1].End}}
			return []worktask.Task{t}, len(chunks), nil
		}
		tasks := make([]worktask.Task, len(chunks))
		for i, c := range chunks {
			tasks[i] = worktask.Task{RunID: runID, Chunk: c, Overrides: carry}
		}
		return tasks, len(chunks), nil
	}, nil
}

// list lists src from cursor from, pinning objects Planning.Concurrency at once.
func (r *Runner) list(ctx context.Context, src dataset.Source, from dataset.Cursor) iter.Seq2[dataset.Listed, error] {
	return dataset.List(ctx, r.s3, src, from, dataset.ListOptions{PinConcurrency: r.opts.Planning.Concurrency})
}
