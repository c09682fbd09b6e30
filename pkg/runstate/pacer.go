package runstate

import (
	"context"
	"time"
)

// PacerOptions configures a Pacer.
type PacerOptions struct {
	// MaxRate is the run-wide rate in messages per second the run started
	// with; 0 means none (a rate set with SetMaxRate still applies).
	MaxRate int64
	// CheckEvery is how often the run's control record is read again;
	// zero means 2 s.
	CheckEvery time.Duration
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Pacer is one invocation's view of a run's control record and budget.
// It is safe for concurrent use.
type Pacer struct {
	t     *Table
	runID string
	opts  PacerOptions
}

// NewPacer returns the Pacer of run runID.
func NewPacer(t *Table, runID string, opts PacerOptions) *Pacer { panic("todo") }

// State returns the run's state as last read, reading it again when it is
// older than CheckEvery.
func (p *Pacer) State(ctx context.Context) (State, error) { panic("todo") }

// Wait blocks until n messages of the run may be sent, taking them from
// the run-wide budget, or returns the state that stops the run (paused or
// cancelled) as a *StopError, or ctx's error. Wait(ctx, 0) only checks the
// state.
func (p *Pacer) Wait(ctx context.Context, n int) error { panic("todo") }

// StopError is a run paused or cancelled while a task ran.
type StopError struct{ State State }

func (e *StopError) Error() string { return "runstate: the run is " + string(e.State) }
