package sqsbatch

import (
	"context"
	"iter"
	"slices"
	"sync"
)

// item is an entry on its way: validated, and the source of its request
// entry at every attempt, so that every field survives retries.
type item struct {
	seq      int
	entry    Entry
	size     int
	attempts int
	// code and msg say why the entry's last attempt did not succeed, so
	// that an entry whose attempts run out fails with its own reason, not
	// that of another entry of its request.
	code, msg string
}

// outcome is what a worker reports for one batch. It holds none of the
// batch's entries, so that their bodies go as the request ends, not when
// the Send's loop absorbs it: the loop may be waiting for the next entry
// while more requests end, past MaxBytesInFlight. Every entry is settled
// by then, accepted or copied into its failure.
type outcome struct {
	groups   []string // the batch's FIFO groups (see run.groupsOf)
	sent     int
	bytes    int64
	requests int
	retries  int
	// throttled counts the requests and entries answered with a
	// throttle or a server error.
	throttled int
	failures  []*EntryError
	stop      *StopError
}

// run is the state of one Send. Only the goroutine that called Send touches
// it; its workers take requests from work and report through done.
type run struct {
	*Sender
	ctx    context.Context
	cancel context.CancelCauseFunc
	work   chan job
	done   chan *outcome
	wg     sync.WaitGroup

	res         Result
	outstanding int
	// stopErr is why the send stopped early, if it did.
	stopErr error
	// inFlight counts, per FIFO message group, the batches in flight that
	// hold it; failedGroups holds the reason a group failed for good.
	inFlight     map[string]int
	failedGroups groupFailures
}

// pack reads entries, validates them and hands full batches to the workers,
// packed as a Packer packs them.
func (r *run) pack(entries iter.Seq[Entry]) {
	var seq int
	p := packing{maxBytes: r.limits.maxMessageSize}
	for e := range entries {
		n := seq
		seq++
		if r.ctx.Err() != nil {
			r.stop(context.Cause(r.ctx))
			r.res.Failures = append(r.res.Failures, failure(&item{seq: n, entry: e}, r.stopErr))
			break
		}
		it, fail := admit(e, n, r.limits, r.replace)
		if fail != nil {
			r.res.Failures = append(r.res.Failures, fail)
			r.failedGroups.block(fail.Entry.GroupID, n, fail.Code)
			continue
		}
		if r.limits.fifo {
			if fail := r.failedGroups.failure(&it); fail != nil {
				r.res.Failures = append(r.res.Failures, fail)
				continue
			}
			// An entry waits while its group is in flight, so that it
			// cannot overtake an earlier entry being retried.
			for r.inFlight[it.entry.GroupID] > 0 && r.stopErr == nil {
				r.wait()
			}
			if fail := r.failedGroups.failure(&it); fail != nil {
				r.res.Failures = append(r.res.Failures, fail)
				continue
			}
		}
		if full := p.add(it); full != nil {
			r.dispatch(full)
		}
		if r.stopErr != nil {
			break
		}
	}
	if batch := p.flush(); len(batch) > 0 {
		r.dispatch(batch)
	}
}

// dispatch starts a request for batch once the Sender's limiter has a
// slot for it, absorbing finished batches while it waits. If the send has
// stopped, the batch fails instead.
func (r *run) dispatch(batch []*item) {
	cost := int64(requestOverhead)
	for _, it := range batch {
		cost += int64(it.size)
	}
	var waiting bool
	for {
		if r.ctx.Err() != nil {
			r.stop(context.Cause(r.ctx))
		}
		if r.stopErr != nil {
			r.lim.abandon(&waiting)
			r.failAll(batch, r.stopErr)
			return
		}
		wake := r.lim.acquire(cost, &waiting)
		if wake == nil {
			break
		}
		select {
		case <-wake:
		case o := <-r.done:
			r.absorb(o)
		case <-r.ctx.Done():
		}
	}
	groups := r.groupsOf(batch)
	r.track(groups, 1)
	r.outstanding++
	j := job{batch: batch, cost: cost, groups: groups}
	select {
	case r.work <- j:
	default:
		// No worker is idle: start one. Workers last until the Send
		// ends, at most one per slot the Send held at once, so that
		// their stacks, grown by the SDK's deep middleware, are grown
		// once rather than once per request.
		r.wg.Go(func() {
			r.serve(j)
			for j := range r.work {
				r.serve(j)
			}
		})
	}
}

// job is a request handed to a worker, with the bytes its slot holds and
// its FIFO groups.
type job struct {
	batch  []*item
	cost   int64
	groups []string
}

// serve sends one job's batch and reports it.
func (r *run) serve(j job) {
	o := r.sendBatch(r.ctx, j.batch)
	o.groups = j.groups
	if o.stop != nil {
		// Cancel before the slot is freed, so that no request of this
		// Send starts in it meanwhile.
		r.cancel(o.stop)
	}
	r.lim.release(j.cost)
	r.done <- o
}

// wait absorbs one finished batch, or notes that the send has stopped.
func (r *run) wait() {
	select {
	case o := <-r.done:
		r.absorb(o)
	case <-r.ctx.Done():
		r.stop(context.Cause(r.ctx))
	}
}

// stop records why the send stops early and cancels the requests in flight.
func (r *run) stop(err error) {
	if r.stopErr == nil {
		r.stopErr = err
		r.cancel(err)
	}
}

// absorb adds a finished batch to the result.
func (r *run) absorb(o *outcome) {
	r.outstanding--
	r.track(o.groups, -1)
	r.res.Sent += o.sent
	r.res.Bytes += o.bytes
	r.res.Requests += o.requests
	r.res.Retries += o.retries
	r.res.Throttled += o.throttled
	r.res.Failures = append(r.res.Failures, o.failures...)
	for _, f := range o.failures {
		r.failedGroups.block(f.Entry.GroupID, f.Seq, f.Code)
		if f.Stopped() {
			r.stop(f.Err)
		}
	}
}

// groupsOf returns the FIFO groups of batch, each once, or nil on a
// standard queue.
func (r *run) groupsOf(batch []*item) []string {
	if r.inFlight == nil {
		return nil
	}
	var groups []string
	for _, it := range batch {
		if !slices.Contains(groups, it.entry.GroupID) {
			groups = append(groups, it.entry.GroupID)
		}
	}
	return groups
}

// track counts FIFO groups in or out of flight.
func (r *run) track(groups []string, delta int) {
	for _, g := range groups {
		r.inFlight[g] += delta
	}
}

func (r *run) failAll(batch []*item, cause error) {
	for _, it := range batch {
		r.res.Failures = append(r.res.Failures, failure(it, cause))
	}
}
