package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// DryRun plans the dataset req names as Run would (or, with o.Queue, as
// Queue would), and reads its chunks, all of them when there are at most
// o.SampleChunks and else a random sample of that many, with the run's
// own reader and encoder (mode, mapping, FIFO ids, attributes, offload),
// packing the messages with the target's sqsbatch.Packer, the packing its
// sender's Send uses. It sends nothing to the target or the work queue,
// writes nothing to S3 (no offloaded payload, failure output or run
// report) and takes no claim; it reads the dataset and the queues'
// attributes. The report's DryRun says what the run would do; its Stats
// count the planning only, and it is never Queued.
func (r *Runner) DryRun(ctx context.Context, req Request, o DryRunOptions) (Report, error) {
	req.DryRun, req.DryRunOptions = true, nil
	if err := r.validate(ctx, &req); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	if err := o.Validate(); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	runID := cmp.Or(req.RunID, NewRunID())
	_, mode, err := r.sender(ctx, &req.Overrides)
	if err != nil {
		return Report{RunID: runID}, err
	}
	o = o.withDefaults(mode)
	dp := &dryPlan{r: r, sample: newSampler(o.SampleChunks, runID)}
	if r.work != nil {
		dp.work = r.work.Packer()
	}
	rep, err := r.plan(ctx, r.list(ctx, req.Source, dataset.Cursor{}), newPlanRun(runID, req.Overrides, nil), dp.sink)
	if err != nil {
		return rep, err
	}
	d := &DryRun{Objects: rep.Objects, Bytes: rep.BytesPlanned, Chunks: rep.Chunks, Tasks: dp.tasks}
	d.Queued = r.work != nil && (o.Queue || rep.BytesPlanned > r.opts.Planning.InlineMaxBytes)
	if d.Queued {
		d.WorkRequests, d.WorkBilledRequests = dp.workRequests, dp.workBilled
	}
	t, err := r.dryRead(ctx, dp.sample.sample())
	if err != nil {
		return rep, fmt.Errorf("fanout: dry run of run %s: %w", runID, err)
	}
	d.scale(t)
	r.budgeted(&req.Overrides)
	if l := req.MaxFailures; l.Exceeded(d.Failed, d.Records, leastRecords) {
		// The run judges the share as it goes: failures early in the
		// listing may stop it sooner.
		d.WouldStop = fmt.Sprintf("%d of its %d records would fail, past maxFailures %s (%s)", d.Failed, d.Records, l, FailureCodes(t.codes, 3))
	}
	d.estimate(o, cmp.Or(req.MaxRate.Value(), r.opts.Control.MaxRate))
	rep.DryRun = d
	return rep, nil
}

// dryPlan is the sink of a dry run's planning: it counts the tasks, packs
// them as the work queue's sender would, and offers each chunk to the
// sample.
type dryPlan struct {
	r      *Runner
	sample *sampler
	tasks  int
	// work packs the tasks as work queue messages, when there is one.
	work                     *sqsbatch.Packer
	workRequests, workBilled int64
}

func (dp *dryPlan) sink(_ context.Context, pr *planRun, tasks iter.Seq[worktask.Task]) (Report, error) {
	count := func(b *sqsbatch.Batch) {
		if b != nil {
			dp.workRequests++
			dp.workBilled += int64(b.BilledRequests())
		}
	}
	for t := range tasks {
		dp.tasks++
		if dp.work != nil {
			e, err := t.Entry(dp.r.work.FIFO())
			if err != nil {
				return pr.rep, err
			}
			b, fail := dp.work.Add(e)
			if fail != nil {
				return pr.rep, fmt.Errorf("fanout: a task would not reach the work queue: %w", fail)
			}
			count(b)
		}
		// A chained task (a FIFO target's object) is its object's chunks.
		for c, ok := t, true; ok; c, ok = c.Next() {
			dp.sample.offer(c)
		}
	}
	if dp.work != nil {
		count(dp.work.Flush())
	}
	return pr.rep, pr.err
}

// dryRead reads tasks as an inline run does, their records encoded by
// each task's spec and their entries packed, not sent, and returns what
// they gave. The tasks of one sender share a packing, as they share a Send
// in RunTasks; the links of FIFO chains are packed link by link, as
// RunChains sends each round of links in a Send of its own.
func (r *Runner) dryRead(ctx context.Context, tasks []worktask.Task) (tally, error) {
	var t tally
	type key struct {
		round  int
		sender *sqsbatch.Sender
	}
	var groups [][]*taskSpec
	var keys []key
	at := map[key]int{}
	for i, task := range tasks {
		s, err := r.prepare(ctx, i, task)
		if err != nil {
			return t, err
		}
		if s.offload != nil {
			if s.offload, err = r.dryOffloader(s.sender); err != nil {
				return t, err
			}
		}
		k := key{sender: s.sender}
		if task.Chain != nil {
			k.round = task.Chunk.Index
		}
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups, keys = append(groups, nil), append(keys, k)
		}
		groups[g] = append(groups[g], s)
		t.chunks++
		if task.Versions {
			t.objects += task.Chunk.End // its range counts versions, not bytes
			continue
		}
		if s.notify {
			t.objects++
		}
		t.bytes += chunkBytes(task.Chunk)
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a].round, keys[b].round) })
	for _, g := range order {
		if err := r.dryGroup(ctx, groups[g], &t); err != nil {
			return t, err
		}
	}
	return t, nil
}

// dryGroup reads specs (tasks with one sender) ChunkConcurrency at once,
// as runGroup does, and packs their entries with the sender's Packer in
// the order the reads hand them on, adding what they gave to t.
func (r *Runner) dryGroup(ctx context.Context, specs []*taskSpec, t *tally) error {
	readCtx, stopReading := context.WithCancelCause(ctx)
	defer stopReading(nil)
	ahead := newAheadSet(r.s3, specs, r.opts.ChunkConcurrency)
	for _, s := range specs {
		s.ahead = ahead
	}
	pipe := newEntryPipe()
	done := make(chan *taskRun, len(specs))
	go r.readGroup(ctx, readCtx, specs, r.opts.ChunkConcurrency, pipe, done)
	pk := specs[0].sender.Packer()
	count := func(b *sqsbatch.Batch) {
		if b != nil {
			t.requests++
			t.billed += int64(b.BilledRequests())
		}
	}
	for p := range pipe.all() {
		b, fail := pk.Add(p.entry)
		if fail != nil {
			// Refused by SQS's rules: the run puts its records on the
			// failure output.
			t.failed += int64(p.entry.Ref.Count)
			t.fail(fail.Code, int64(p.entry.Ref.Count))
			t.messages--
		}
		count(b)
	}
	if last := pk.Flush(); last != nil {
		count(last)
		// The last request is cut short by the end of what was read: in
		// an estimate it stands for the share of a full one it holds.
		fill := max(float64(len(last.Entries))/sqsbatch.MaxBatchEntries, float64(last.Bytes)/float64(specs[0].sender.MaxMessageSize()))
		t.unfilled += 1 - min(fill, 1)
	}
	var errs []error
	for tr := range done {
		t.records += tr.res.RecordsRead
		t.messages += tr.res.Messages
		t.failed += tr.res.RecordsFailed
		for _, f := range tr.fails {
			t.fail(f.Code, 1)
		}
		t.offloaded += tr.res.RecordsOffloaded
		c := tr.task.Chunk
		switch {
		case tr.readErr != nil:
			errs = append(errs, fmt.Errorf("read %s [%d,%d): %w", c.Object, c.Start, c.End, tr.readErr))
		case tr.resumeAt >= 0:
			errs = append(errs, fmt.Errorf("read %s [%d,%d): stopped at offset %d: %w", c.Object, c.Start, c.End, tr.resumeAt, cmp.Or(tr.stopped, context.Cause(ctx))))
		}
	}
	ahead.close() // the readers have returned
	if ctx.Err() != nil {
		return fmt.Errorf("the dry run ran out of time after planning (read fewer chunks with a smaller sample): %w", context.Cause(ctx))
	}
	return errors.Join(errs...)
}

// dryOffloader returns an offloader of s's records as the run's, whose
// payloads go nowhere: a dry run makes the pointer messages the run
// would send, without writing their bodies to S3.
func (r *Runner) dryOffloader(s *sqsbatch.Sender) (*sqsextended.Offloader, error) {
	o := *r.offload
	o.MaxMessageSize = s.MaxMessageSize()
	off, err := sqsextended.NewOffloader(sqsextended.Discard, o)
	if err != nil {
		return nil, fmt.Errorf("fanout: offload: %w", err)
	}
	return off, nil
}

// dryRunOptions returns the dry run options req gives, or none.
func dryRunOptions(req Request) DryRunOptions {
	if req.DryRunOptions == nil {
		return DryRunOptions{}
	}
	return *req.DryRunOptions
}
