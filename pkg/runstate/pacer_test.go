package runstate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// waitBlocks reports whether p.Wait(n) is still waiting after a moment
// (the clock of these tests stands still, so a spent window stays spent).
func waitBlocks(t *testing.T, p *runstate.Pacer, n int) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	err := p.Wait(ctx, n)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(%d) = %v", n, err)
	}
	return err != nil
}

func TestPacerStops(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	p := runstate.NewPacer(tab, "r", runstate.PacerOptions{CheckEvery: time.Second, Now: clk.Now})

	if err := p.Wait(ctx, 100); err != nil {
		t.Fatalf("Wait of a run with no record and no rate = %v, want nil", err)
	}
	last := runstate.StateRunning
	for _, s := range []runstate.State{runstate.StatePaused, runstate.StateCancelled} {
		if _, err := tab.SetState(ctx, "r", s); err != nil {
			t.Fatal(err)
		}
		if got, err := p.State(ctx); got != last || err != nil {
			t.Errorf("State before CheckEvery went by = %s, %v; want %s, the state read last", got, err, last)
		}
		clk.Add(time.Second)
		var stop *runstate.StopError
		if err := p.Wait(ctx, 1); !errors.As(err, &stop) || stop.State != s {
			t.Errorf("Wait of a run %s = %v, want a *StopError of %s", s, err, s)
		}
		if got, err := p.State(ctx); got != s || err != nil {
			t.Errorf("State = %s, %v; want %s", got, err, s)
		}
		last = s
	}
	if _, err := tab.SetState(ctx, "r", runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if err := p.Wait(ctx, 0); err != nil {
		t.Errorf("Wait of a run running again = %v", err)
	}
}

// TestPacerRates checks that the budget holds the rate the run started
// with, that a rate set on the run replaces it once the Pacer reads the
// record again, and that each second has a window of its own.
func TestPacerRates(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	clk := &clock{t: time.Unix(1_700_000_000, 500_000_000)}
	p := runstate.NewPacer(tab, "r", runstate.PacerOptions{MaxRate: 3, CheckEvery: time.Second, Now: clk.Now})

	if err := p.Wait(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if !waitBlocks(t, p, 1) {
		t.Error("a 4th message in a second at rate 3 went")
	}

	if _, err := tab.SetMaxRate(ctx, "r", 25); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	// A Pacer takes blocks of a tenth of the rate (2) or of what a Wait
	// asks for if more: Wait(2) and Wait(23) take the window, and another
	// Pacer of the run finds it spent.
	if err := p.Wait(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx, 23); err != nil {
		t.Fatalf("Wait(23) at a rate set to 25 = %v", err)
	}
	other := runstate.NewPacer(tab, "r", runstate.PacerOptions{MaxRate: 3, Now: clk.Now})
	if !waitBlocks(t, other, 1) || !waitBlocks(t, p, 1) {
		t.Error("a 26th message in a second at rate 25 went")
	}

	if _, err := tab.SetMaxRate(ctx, "r", 0); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if err := p.Wait(ctx, 3); err != nil || !waitBlocks(t, p, 1) {
		t.Errorf("after SetMaxRate(0), Wait(3) = %v, and a 4th message went; want the start rate, 3", err)
	}
}

// TestPacerShared checks that Pacers of one run share its window, no
// more and no less, in a few requests per block.
func TestPacerShared(t *testing.T) {
	tab, client := newTable(t, runstate.TableOptions{})
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	const rate, pacers = 40, 4
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sent int
		errs error
	)
	for range pacers {
		p := runstate.NewPacer(tab, "r", runstate.PacerOptions{MaxRate: rate, Now: clk.Now})
		wg.Go(func() {
			for {
				err := p.Wait(ctx, 1)
				mu.Lock()
				if err == nil {
					sent++
				} else if !errors.Is(err, context.DeadlineExceeded) {
					errs = errors.Join(errs, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if errs != nil || sent != rate {
		t.Errorf("%d Pacers sent %d (%v) in a second at rate %d, want %d", pacers, sent, errs, rate, rate)
	}
	// Per Pacer: one read of the record and at most three calls that
	// find the window spent; for the run, one take per block of 4.
	if most := int64(pacers*(1+3) + rate/4); client.calls.Load() > most {
		t.Errorf("%d calls to the table, want at most %d", client.calls.Load(), most)
	}
}

func TestPacerLocal(t *testing.T) {
	ctx := t.Context()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	p := runstate.NewPacer(nil, "r", runstate.PacerOptions{MaxRate: 10, Now: clk.Now})
	if s, err := p.State(ctx); s != runstate.StateRunning || err != nil {
		t.Errorf("State = %s, %v; want running", s, err)
	}
	if err := p.Wait(ctx, 10); err != nil || !waitBlocks(t, p, 1) {
		t.Errorf("Wait(10) = %v, and an 11th message went at rate 10", err)
	}
	clk.Add(time.Second)
	if err := p.Wait(ctx, 10); err != nil {
		t.Errorf("Wait(10) in the next second = %v", err)
	}
	if err := runstate.NewPacer(nil, "r", runstate.PacerOptions{}).Wait(ctx, 1e6); err != nil {
		t.Errorf("Wait without a rate = %v", err)
	}

	// On the real clock, 45 messages at 20 a second need three windows.
	start := time.Now()
	if err := runstate.NewPacer(nil, "r", runstate.PacerOptions{MaxRate: 20}).Wait(ctx, 45); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("Wait(45) at rate 20 took %v, want over a second", d)
	}
}
