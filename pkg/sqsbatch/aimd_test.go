package sqsbatch

import (
	"testing"
	"time"
)

// feed gives a n samples of latency lat at its current epoch.
func feed(a *aimd, n int, lat time.Duration, throttled, inUse bool) {
	for range n {
		a.add(sample{latency: lat, throttled: throttled, inUse: inUse, epoch: a.epoch})
	}
}

func TestAIMDStart(t *testing.T) {
	for _, tc := range []struct{ ceiling, want int }{{256, 16}, {16, 16}, {4, 4}, {1, 1}, {0, 1}} {
		if got := newAIMD(tc.ceiling).current(); got != tc.want {
			t.Errorf("ceiling %d: starts at %d, want %d", tc.ceiling, got, tc.want)
		}
	}
}

func TestAIMDGrowsOnlyInUse(t *testing.T) {
	a := newAIMD(256)
	feed(a, 1000, 20*time.Millisecond, false, false)
	if got := a.current(); got != 16 {
		t.Errorf("idle limit grew to %d, want 16", got)
	}
	// Slow start: one per answer, so 16 answers double it.
	feed(a, 16, 20*time.Millisecond, false, true)
	if got := a.current(); got != 32 {
		t.Errorf("after 16 answers in use: %d, want 32", got)
	}
	feed(a, 10000, 20*time.Millisecond, false, true)
	if got := a.current(); got != 256 {
		t.Errorf("after 10,000 answers in use: %d, want the ceiling 256", got)
	}
}

func TestAIMDThrottleOncePerEpoch(t *testing.T) {
	a := newAIMD(256)
	feed(a, 48, 20*time.Millisecond, false, true) // 64
	epoch := a.epoch
	// A burst: every request in flight when the first throttle came
	// started in the same epoch.
	for range 30 {
		a.add(sample{latency: 20 * time.Millisecond, throttled: true, inUse: true, epoch: epoch})
	}
	if got := a.current(); got != 32 {
		t.Errorf("after a burst of throttles from one epoch: %d, want 64/2 = 32", got)
	}
	// Throttles of requests started after each decrease keep halving it,
	// down to the floor.
	feed(a, 20, 20*time.Millisecond, true, true)
	if got := a.current(); got != 1 {
		t.Errorf("after 20 throttles, one per epoch: %d, want 1", got)
	}
	// Above ssthresh it grows by 1/limit per answer: by about one per
	// limit's worth of answers.
	feed(a, 1+2+3+4, 20*time.Millisecond, false, true)
	if got := a.current(); got < 4 || got > 5 {
		t.Errorf("after 10 clean answers from 1: %d, want 4 or 5", got)
	}
}

func TestAIMDLatency(t *testing.T) {
	t.Run("rise lowers it gently", func(t *testing.T) {
		a := newAIMD(256)
		feed(a, 48, 20*time.Millisecond, false, true) // 64
		// The short-term mean passes 60 ms (20 + 200 %) after a few
		// answers at 200 ms (those before it still grow the limit), of
		// requests that all started in one epoch: one decrease by 10 %.
		epoch := a.epoch
		for range 16 {
			a.add(sample{latency: 200 * time.Millisecond, inUse: true, epoch: epoch})
		}
		if got := a.current(); got < 57 || got >= 64 {
			t.Errorf("after a latency rise: %d, want one decrease of 10 %% from 64 and a little", got)
		}
	})
	t.Run("floor on loopback", func(t *testing.T) {
		a := newAIMD(256)
		// Baseline 0.2 ms; 6 ms is 30 times that but under the 10 ms
		// floor.
		feed(a, 1, 200*time.Microsecond, false, true)
		feed(a, 100, 6*time.Millisecond, false, true)
		if got := a.current(); got != 117 {
			t.Errorf("with 6 ms over a 0.2 ms baseline: %d, want 16+101", got)
		}
		feed(a, 100, 20*time.Millisecond, false, true)
		if got := a.current(); got >= 117 {
			t.Errorf("with 20 ms over a 0.2 ms baseline: %d, want below 117", got)
		}
	})
	t.Run("baseline follows the network", func(t *testing.T) {
		a := newAIMD(256)
		feed(a, 2*baselineWindow, 20*time.Millisecond, false, true)
		if a.current() != 256 {
			t.Fatalf("limit %d, want 256", a.current())
		}
		// The network slows to 80 ms: the limit falls, and once the
		// baseline has moved to 80 ms it grows again.
		feed(a, baselineWindow, 80*time.Millisecond, false, true)
		low := a.current()
		if low >= 256 {
			t.Fatalf("limit %d after the network slowed, want lower", low)
		}
		feed(a, 4*baselineWindow, 80*time.Millisecond, false, true)
		if a.baseline != float64(80*time.Millisecond) {
			t.Errorf("baseline %v, want 80ms", time.Duration(a.baseline))
		}
		if got := a.current(); got <= low {
			t.Errorf("limit %d after the baseline moved, want above %d", got, low)
		}
	})
}

// TestAIMDSettlesUnderQueueing runs the controller in a closed loop with a
// server whose latency is 20 ms plus 1 ms per request in flight: latency
// the controller causes itself. Requests go in rounds of the limit, all
// of a round in the epoch it started in, as on the wire. The limit must
// settle below the ceiling instead of chasing its own queueing up.
func TestAIMDSettlesUnderQueueing(t *testing.T) {
	a := newAIMD(256)
	var low, high int
	for round := range 2000 {
		l, epoch := a.current(), a.epoch
		lat := 20*time.Millisecond + time.Duration(l)*time.Millisecond
		for range l {
			a.add(sample{latency: lat, inUse: true, epoch: epoch})
		}
		if round == 1500 {
			low, high = l, l
		}
		low, high = min(low, l), max(high, l)
	}
	// At 16 the latency is 36 ms, the threshold 108 ms: 88 requests.
	if low < 16 || high > 120 {
		t.Errorf("limit over the last 500 rounds in [%d, %d], want it settled within [16, 120]", low, high)
	}
}

func FuzzAIMD(f *testing.F) {
	f.Add(uint16(256), []byte{0, 1, 2, 3, 200, 255, 7})
	f.Add(uint16(1), []byte{255, 255, 0})
	f.Add(uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, ceiling uint16, data []byte) {
		a := newAIMD(int(ceiling))
		c := max(int(ceiling), 1)
		for i, b := range data {
			a.add(sample{
				latency:   time.Duration(b&0x3f) * time.Duration(1+i%7) * time.Millisecond,
				throttled: b&0x40 != 0,
				inUse:     b&0x80 != 0,
				epoch:     a.epoch - uint64(i%2),
			})
			if got := a.current(); got < 1 || got > c {
				t.Fatalf("limit %d outside [1, %d]", got, c)
			}
			if a.limit < 1 || a.limit > float64(c) {
				t.Fatalf("limit %v outside [1, %d]", a.limit, c)
			}
		}
	})
}
