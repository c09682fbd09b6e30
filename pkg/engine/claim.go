package engine

import (
	"context"
	"errors"
	"time"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Leases of the claims store.
const (
	// leaseSlack is how long a claim outlives its invocation's deadline,
	// for clocks that disagree a little.
	leaseSlack = 30 * time.Second
	// leaseWithoutDeadline is the lease of a run with no deadline (the
	// CLI): a crashed run's tasks are taken over after it.
	leaseWithoutDeadline = 15 * time.Minute
)

// ClaimKey is the key of a task in the claims store: its run and chunk
// (and whether it announces every version, as its ID says), and not where
// it resumes, so that a task, its continuations and every delivery of each
// share one claim.
func ClaimKey(t worktask.Task) string {
	if t.Versions {
		return t.RunID + "/" + t.Chunk.ID() + "/versions"
	}
	return t.RunID + "/" + t.Chunk.ID()
}

// claim takes the claim of s's task, when a claims store is set, and moves
// s's start to where an earlier attempt stopped. It fails with
// claims.ErrDone or claims.ErrHeld when the task must not run.
func (r *Runner) claim(ctx context.Context, s *taskSpec) error {
	if r.opts.Claims == nil {
		return nil
	}
	c, err := r.opts.Claims.Acquire(ctx, ClaimKey(s.task), r.leaseUntil(ctx))
	if err != nil {
		return err
	}
	s.claim = &c
	if c.ResumeAt > s.from {
		r.log.InfoContext(ctx, "task resumes where an earlier attempt stopped", "chunk", s.task.Chunk.URI(),
			"task", s.task.ID(), "resumeAt", c.ResumeAt, "takenOver", c.TakenOver)
		s.from = c.ResumeAt
	}
	return nil
}

// leaseUntil is when a claim taken now ends.
func (r *Runner) leaseUntil(ctx context.Context) time.Time {
	if d, ok := partialbatch.SendContext(ctx).Deadline(); ok {
		// An invocation does not live past its deadline: a lease to then
		// lets the next delivery take over the task of one that died.
		return d.Add(leaseSlack)
	}
	return time.Now().Add(leaseWithoutDeadline)
}

// settleTimeout bounds the settling of a claim after its run was
// cancelled (an interrupted CLI): long enough for one UpdateItem and its
// retries.
const settleTimeout = 5 * time.Second

// settleContext returns the context a claim is settled in: the send
// context, which lasts a little longer than the work context; or, when
// that was cancelled (Ctrl-C on the CLI, not a deadline), one that is not,
// for settleTimeout, so that the claim is released where the next run
// resumes instead of being held for its lease, refusing the same command
// meanwhile. A deadline is kept: past it, Lambda ends the invocation, and
// the lease lets the next delivery take over.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	send := partialbatch.SendContext(ctx)
	if errors.Is(send.Err(), context.Canceled) {
		return context.WithTimeout(context.WithoutCancel(send), settleTimeout)
	}
	return send, func() {}
}

// settle tells the claims store what became of tr: done (also when what
// follows is its chain's next chunk), or released where the next attempt
// (a continuation, or the message again) resumes.
// It reports whether the chunk is done for its run to count: with a
// claims store, when the store has made it done, which it does once per
// run however often the chunk's task is delivered; without one, each
// time it is sent to its end.
func (r *Runner) settle(ctx context.Context, tr *taskRun, res TaskResult) (counted bool) {
	continues := res.Continuation != nil && res.Continuation.Chunk.ID() == tr.task.Chunk.ID()
	if tr.claim == nil {
		return res.Err == nil && !continues
	}
	ctx, cancel := settleContext(ctx)
	defer cancel()
	var err error
	switch {
	case res.Err != nil:
		err = r.opts.Claims.Release(ctx, *tr.claim, tr.releaseAt())
	case continues:
		err = r.opts.Claims.Release(ctx, *tr.claim, max(res.Continuation.ResumeAt, tr.from))
	default:
		err = r.opts.Claims.Done(ctx, *tr.claim)
		counted = err == nil
	}
	if err != nil {
		// The records are sent (or not) either way; the claim ends with
		// its lease, and a later delivery may then send them again.
		r.log.WarnContext(ctx, "claims store not updated", "task", tr.task.ID(), "error", err)
	}
	return counted
}
