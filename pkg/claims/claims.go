// Package claims lets one runner at a time hold a unit of work (a chunk
// task, a notified object version) and records how far it got, so that a
// second delivery of the same work does nothing and a retry resumes where
// the last attempt stopped.
//
// S3 delivers notifications at least once and SQS standard queues deliver
// messages at least once, so the same work can arrive twice, even at the
// same time. A claim is a lease: Acquire takes it when nobody holds it, when
// its holder released it part-way (it then says where to resume), or when
// its holder's lease ran out (an invocation that died); it refuses with
// ErrDone once the work is done and ErrHeld while another holder's lease
// lasts. Release and Done succeed only for the current holder, so that a
// holder whose claim was taken over learns it with ErrLost.
//
// Table is the store, a DynamoDB table written with conditional updates, as
// Powertools for AWS Lambda's idempotency utility does.
package claims

import (
	"context"
	"errors"
	"time"
)

// Errors of Acquire, Release and Done, for errors.Is.
var (
	// ErrDone reports that the work was done by an earlier holder.
	ErrDone = errors.New("claims: the work is already done")
	// ErrHeld reports that another holder's lease on the work lasts.
	ErrHeld = errors.New("claims: another runner holds the work")
	// ErrLost reports that the claim is no longer the caller's: its lease
	// ran out and another runner took it over.
	ErrLost = errors.New("claims: the claim was taken over")
)

// Claim is a runner's hold on one unit of work.
type Claim struct {
	// Key names the work.
	Key string
	// Owner tells this holder apart from the others.
	Owner string
	// ResumeAt is where an earlier holder stopped: the offset of the
	// first record it did not deliver (0 when none did any).
	ResumeAt int64
	// TakenOver reports that the claim was taken from a holder whose
	// lease ran out without a Release or Done.
	TakenOver bool
}

// Store keeps claims. Implementations are safe for concurrent use.
type Store interface {
	// Acquire takes the claim on key until the lease ends at until, or
	// fails with ErrDone or ErrHeld.
	Acquire(ctx context.Context, key string, until time.Time) (Claim, error)
	// Release gives the claim up before the work is done; the next
	// Acquire resumes at resumeAt.
	Release(ctx context.Context, c Claim, resumeAt int64) error
	// Done records that the work is done; later Acquires fail with
	// ErrDone.
	Done(ctx context.Context, c Claim) error
}
