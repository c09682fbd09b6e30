package runstate

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultCheckEvery is how often a Pacer reads the run's control record
// again when PacerOptions.CheckEvery is zero.
const DefaultCheckEvery = 2 * time.Second

// PacerOptions configures a Pacer. The zero value paces nothing and reads
// the control record every DefaultCheckEvery.
type PacerOptions struct {
	// MaxRate is the run-wide rate in messages per second the run started
	// with; 0 means none (a rate set with SetMaxRate still applies).
	MaxRate int64
	// CheckEvery is how often the run's control record is read again;
	// zero means DefaultCheckEvery.
	CheckEvery time.Duration
	// Now returns the time, which also says the second whose budget Wait
	// takes from; nil means time.Now.
	Now func() time.Time
}

// Pacer is one invocation's view of a run's control record and budget.
// It is safe for concurrent use.
//
// With a Table, the budget is the run's: each second's window in the
// table holds at most the rate, whatever the number of Pacers taking from
// it. A Pacer takes from the window in blocks of a tenth of the rate (at
// least 1, or what a Wait asks for if more) and hands them out from
// memory, so that the run makes some ten UpdateItems a second to pace
// itself, plus one or two for each Pacer that finds a window spent and one
// GetItem per Pacer every CheckEvery; tokens of a block left when the
// second ends are dropped with their window. The windows are whole
// seconds: invocations that can send faster than the rate send each
// second's budget early in the second, then wait for the next. A Pacer without a Table (NewPacer(nil, ...))
// paces its own process alone, with a window of the rate in memory each
// second, and its run is always running: the CLI's runs in one process,
// without a claims table, use it.
type Pacer struct {
	t          *Table
	runID      string
	rate       int64
	checkEvery time.Duration
	now        func() time.Time

	mu      sync.Mutex
	state   State
	maxRate int64     // the control record's
	readAt  time.Time // of the control record; zero before the first read
	sec     int64     // the second reserve belongs to
	reserve int64     // tokens taken from sec's window and not yet handed out
	spent   bool      // sec's window has nothing left for this Pacer
}

// NewPacer returns the Pacer of run runID in t, or, when t is nil, one
// that paces this process alone.
func NewPacer(t *Table, runID string, opts PacerOptions) *Pacer {
	p := &Pacer{t: t, runID: runID, rate: opts.MaxRate, checkEvery: opts.CheckEvery, now: opts.Now, state: StateRunning}
	if p.checkEvery <= 0 {
		p.checkEvery = DefaultCheckEvery
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// State returns the run's state as last read, reading it again when it is
// older than CheckEvery. A run with no record is running. An error reading
// the record is returned, and the next call reads again.
func (p *Pacer) State(ctx context.Context) (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.control(ctx)
}

// control is State with p.mu held.
func (p *Pacer) control(ctx context.Context) (State, error) {
	if p.t == nil {
		return StateRunning, nil
	}
	now := p.now()
	if !p.readAt.IsZero() && now.Sub(p.readAt) < p.checkEvery {
		return p.state, nil
	}
	run, err := p.t.Get(ctx, p.runID)
	switch {
	case errors.Is(err, ErrNoRun):
		run = Run{State: StateRunning}
	case err != nil:
		return "", err
	}
	p.state, p.maxRate, p.readAt = run.State, run.MaxRate, now
	return p.state, nil
}

// Wait blocks until n messages of the run may be sent, taking them from
// the run-wide budget, or returns the state that stops the run (paused or
// cancelled) as a *StopError, or ctx's error, or an error of the table.
// Wait(ctx, 0) only checks the state; so does a Wait of a run with no
// rate. A Wait for more than a second's rate waits over several seconds;
// it checks the state again each second.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	left := int64(n)
	for {
		next, err := p.take(ctx, &left)
		if err != nil || next.IsZero() {
			return err
		}
		t := time.NewTimer(next.Sub(p.now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Stale makes the next Wait read the control record again, however
// recently it was read: this process has just changed it.
func (p *Pacer) Stale() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readAt = time.Time{}
}

// take checks the state, then takes what it can of *left from this
// second's budget; when some is left, it returns the time to wait for,
// else the zero time.
func (p *Pacer) take(ctx context.Context, left *int64) (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, err := p.control(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if s != StateRunning {
		return time.Time{}, &StopError{State: s}
	}
	rate := p.rate
	if p.maxRate > 0 {
		rate = p.maxRate
	}
	if rate <= 0 {
		return time.Time{}, nil
	}
	for *left > 0 {
		now := p.now()
		if sec := now.Unix(); sec != p.sec {
			p.sec, p.reserve, p.spent = sec, 0, false
		}
		if p.reserve == 0 && !p.spent {
			if err := p.refill(ctx, now, *left, rate); err != nil {
				return time.Time{}, err
			}
		}
		if p.reserve == 0 {
			return time.Unix(p.sec+1, 0), nil
		}
		got := min(*left, p.reserve)
		p.reserve -= got
		*left -= got
	}
	return time.Time{}, nil
}

// refill takes a block of tokens from the window of now's second into the
// reserve, or marks the window spent.
func (p *Pacer) refill(ctx context.Context, now time.Time, want, rate int64) error {
	if p.t == nil {
		// A Pacer without a Table has the window to itself: it takes all
		// of it at once.
		p.reserve, p.spent = rate, true
		return nil
	}
	block := min(max(rate/10, 1, want), rate)
	got, err := p.t.Take(ctx, p.runID, now, block, rate)
	if err != nil {
		return err
	}
	// Less than asked is what the window had left.
	p.reserve, p.spent = got, got < block
	return nil
}

// StopError is a run paused or cancelled while a task ran.
type StopError struct{ State State }

func (e *StopError) Error() string { return "runstate: the run is " + string(e.State) }
