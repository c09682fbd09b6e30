package runstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
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
	// Per Pacer: one read of the record and at most two calls that find
	// the window spent; for the run, one take per block of 4.
	if most := int64(pacers*(1+2) + rate/4); client.calls.Load() > most {
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

// BenchmarkPacerShared measures the rate a run keeps when its messages go
// through several invocations at once, each with a Pacer of its own (as
// separate Lambda invocations have), against moto_server's DynamoDB.
// Each invocation sends batches of 10 on 4 senders, a send taking 10 ms,
// so that one invocation could send 4,000 messages a second unpaced. The
// run lasts whole seconds from a second's start, so that it spans whole
// windows. It reports the rate achieved against the target (and fails
// beyond 15%) and the requests to the table per second, and prints them
// as a table.
func BenchmarkPacerShared(b *testing.B) {
	const (
		seconds = 4
		senders = 4
		batch   = 10
		send    = 10 * time.Millisecond
	)
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "rate\tinvocations\tachieved msgs/s\tratio\tddb req/s\t")
	for _, rate := range []int64{500, 2000} {
		for _, invocations := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("rate=%d/invocations=%d", rate, invocations), func(b *testing.B) {
				tab, client := newTable(b, runstate.TableOptions{})
				var sent, calls int64
				for i := range b.N {
					client.calls.Store(0)
					sent += runShared(b, tab, fmt.Sprint("run", i), rate, invocations, senders, batch, send, seconds*time.Second)
					calls += client.calls.Load()
				}
				d := float64(b.N * seconds)
				achieved, perSecond := float64(sent)/d, float64(calls)/d
				ratio := achieved / float64(rate)
				b.ReportMetric(achieved, "msgs/s")
				b.ReportMetric(ratio, "achieved/target")
				b.ReportMetric(perSecond, "ddb-req/s")
				fmt.Fprintf(w, "%d\t%d\t%.0f\t%.3f\t%.1f\t\n", rate, invocations, achieved, ratio, perSecond)
				if ratio < 0.85 || ratio > 1.15 {
					b.Errorf("achieved %.0f messages a second, %.3f of the rate %d", achieved, ratio, rate)
				}
			})
		}
	}
	w.Flush()
	fmt.Print(table.String())
}

// runShared sends for d from the start of the next second through
// invocations Pacers of run runID, each with senders senders, and returns
// how many messages the Pacers let go before d was over.
func runShared(b *testing.B, tab *runstate.Table, runID string, rate int64, invocations, senders, batch int, send, d time.Duration) int64 {
	b.Helper()
	start := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(start))
	ctx, cancel := context.WithDeadline(b.Context(), start.Add(d))
	defer cancel()
	var (
		sent atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for range invocations {
		p := runstate.NewPacer(tab, runID, runstate.PacerOptions{MaxRate: rate})
		for range senders {
			wg.Go(func() {
				for {
					err := p.Wait(ctx, batch)
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							mu.Lock()
							errs = errors.Join(errs, err)
							mu.Unlock()
						}
						return
					}
					sent.Add(int64(batch))
					select {
					case <-ctx.Done():
					case <-time.After(send):
					}
				}
			})
		}
	}
	wg.Wait()
	if errs != nil {
		b.Fatal(errs)
	}
	return sent.Load()
}
