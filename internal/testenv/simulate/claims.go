package simulate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/s3sqs/s3sqs/pkg/claims"
)

// ClaimsModel is an in-process claims.Store with the semantics of
// claims.Table, except that leases end when the simulation says so (an
// invocation that died, a lease run out) instead of by the clock. It is
// safe for concurrent use.
type ClaimsModel struct {
	F  *Faults
	mu sync.Mutex
	m  map[string]*claimState
	n  int
}

type claimState struct {
	owner    string
	inv      *invocation // the holder's invocation, nil when released
	done     bool
	resumeAt int64
	expired  bool
}

// NewClaimsModel returns an empty store whose calls fail at f's rate
// (never when f is nil).
func NewClaimsModel(f *Faults) *ClaimsModel { return &ClaimsModel{F: f, m: map[string]*claimState{}} }

var _ claims.Store = (*ClaimsModel)(nil)

func (s *ClaimsModel) fault(ctx context.Context, op, key string) error {
	if s.F == nil {
		return nil
	}
	if err := s.F.tick(ctx); err != nil {
		return err
	}
	if !s.F.healed.Load() && s.F.rng("claims."+op, key).Float64() < s.F.rates.ClaimsErr {
		s.F.count(&s.F.Stats.ClaimsErr)
		disrupt(ctx)
		return fmt.Errorf("claims model: %s %s: %w", op, key, errReset(op))
	}
	return nil
}

// Acquire implements claims.Store.
func (s *ClaimsModel) Acquire(ctx context.Context, key string, _ time.Time) (claims.Claim, error) {
	if err := s.fault(ctx, "Acquire", key); err != nil {
		return claims.Claim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(key)
	switch {
	case st.done:
		return claims.Claim{}, claims.ErrDone
	case st.owner != "" && !st.expired:
		return claims.Claim{}, claims.ErrHeld
	}
	s.n++
	taken := st.owner != ""
	st.owner, st.expired, st.inv = fmt.Sprintf("owner-%d", s.n), false, invocationOf(ctx)
	return claims.Claim{Key: key, Owner: st.owner, ResumeAt: st.resumeAt, TakenOver: taken}, nil
}

// Release implements claims.Store.
func (s *ClaimsModel) Release(ctx context.Context, c claims.Claim, resumeAt int64) error {
	if err := s.fault(ctx, "Release", c.Key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.owned(c)
	if err != nil {
		return err
	}
	st.owner, st.inv, st.resumeAt = "", nil, resumeAt
	return nil
}

// Done implements claims.Store.
func (s *ClaimsModel) Done(ctx context.Context, c claims.Claim) error {
	if err := s.fault(ctx, "Done", c.Key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.owned(c)
	if err != nil {
		return err
	}
	st.done, st.inv = true, nil
	return nil
}

// MarkDone records key as done, whoever holds it, as claims.Table's
// MarkDone does: s3ingest marks the objects it ingested so.
func (s *ClaimsModel) MarkDone(ctx context.Context, key string) error {
	if err := s.fault(ctx, "MarkDone", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state(key).done = true
	return nil
}

// state returns key's state, a new one when it has none. The caller holds
// s.mu.
func (s *ClaimsModel) state(key string) *claimState {
	st := s.m[key]
	if st == nil {
		st = &claimState{}
		s.m[key] = st
	}
	return st
}

// IsDone reports whether the claim key is done, for the oracle: it fails
// never and takes nothing.
func (s *ClaimsModel) IsDone(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[key]
	return st != nil && st.done
}

// owned returns c's state while c still holds it, else claims.ErrLost, as
// the table's conditional update fails when another owner took the claim
// over or the work was marked done meanwhile. The caller holds s.mu.
func (s *ClaimsModel) owned(c claims.Claim) (*claimState, error) {
	st := s.m[c.Key]
	if st == nil || st.owner != c.Owner || st.done {
		return nil, claims.ErrLost
	}
	return st, nil
}

// Expire ends the leases of the claims held by inv's invocation (it died)
// or, with inv nil, of every claim still held: their leases ran out.
func (s *ClaimsModel) Expire(inv *invocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.m {
		if st.owner != "" && (inv == nil || st.inv == inv) {
			st.expired = true
		}
	}
}
