package sqsbatch

import "time"

// The controller's constants. See [aimd] for how they are used.
const (
	// initialLimit is where a Sender starts: today's fixed default, which
	// is right on loopback and a quarter of what 20 ms needs, so that the
	// ramp from it is short either way.
	initialLimit = 16
	// throttleFactor halves the limit on a throttle or a server error, as
	// TCP and the AIMD strategies of Flink and concurrency-limits do: the
	// service said it has too much.
	throttleFactor = 0.5
	// latencyFactor lowers the limit gently when latency rises past the
	// tolerance: a slower answer is a hint, not a refusal.
	latencyFactor = 0.9
	// latencyTolerance is how much the short-term latency may exceed the
	// baseline, as a fraction of it, before it counts as risen: 200 %, as
	// the baseline is the fastest answer seen, and the jitter of a
	// Region's 10-30 ms, or of a busy client's own scheduling, puts the
	// typical answer well above it without any queueing at the service.
	// At 100 % the limit settled where the stand-in could still take more
	// (make bench-latency, medians of three: s3ingest at 20 ms reached
	// 0.82x of a fixed 128 requests in flight, 0.97x at 200 %; 300 % was
	// no faster and held more memory).
	latencyTolerance = 2.0
	// latencyFloor is the least the tolerance allows, whatever the
	// baseline: on loopback the baseline is a fraction of a millisecond,
	// and three times that is less than a garbage collection or a scheduling
	// delay on a busy two-core machine (5-8 ms seen under -race).
	latencyFloor = 10 * time.Millisecond
	// shortWeight is the weight of a new sample in the short-term latency,
	// an exponentially weighted mean of about the last sixteen answers:
	// one round trip at the starting limit, so that one slow answer (a
	// garbage collection, a lost packet) does not move it much.
	shortWeight = 1.0 / 16
	// baselineWindow is the number of answers after which the baseline may
	// move up to the lowest latency seen among them.
	baselineWindow = 256
)

// sample is one finished request, as the controller sees it.
type sample struct {
	// latency is how long the request took, retries' backoff excluded.
	latency time.Duration
	// throttled reports a throttle or server error, of the request or of
	// one of its entries.
	throttled bool
	// inUse reports that the limit was binding when the request ended:
	// another request was waiting for a slot, or every slot was taken.
	inUse bool
	// epoch is the controller's epoch when the request started.
	epoch uint64
}

// aimd is the arithmetic of the Sender's limit on requests in flight, fed
// with finished requests; it does no I/O and reads no clock, so that it is
// tested on its own. It is not safe for concurrent use.
//
// It grows the limit additively, by one per clean answer while the limit
// is below ssthresh (doubling it every round trip, as TCP's slow start)
// and by one per round trip (1/limit per answer) above it, and only when
// the limit was in use and the short-term latency holds: an idle limit, or
// one that the bytes in flight bound instead, is not a proven one.
//
// It shrinks it multiplicatively: by throttleFactor on a throttle, by
// latencyFactor when the short-term latency rises past the baseline plus
// the tolerance while the limit is in use (an idle limit did not cause
// the rise, and lowering it would not help). Either sets ssthresh to the new limit, so that growth
// from there probes slowly. It shrinks at most once per epoch: only a
// request that started after the last decrease can cause the next, so
// that one burst of throttles, which are the answers of requests sent
// before the first of them arrived, halves the limit once, not once per
// answer.
//
// The baseline is the lowest latency seen. Every baselineWindow answers,
// if even the lowest of them was past the tolerance, it moves up to that
// lowest, but only if the limit is no higher than when the baseline was
// set (when an answer as fast as the baseline last came): latency that rose while the
// limit did not is the network's, and the baseline follows it; latency
// that rose because the limit grew is the controller's own doing, and the
// baseline holds, so that the limit settles instead of chasing its own
// queueing delay up to the ceiling.
type aimd struct {
	limit    float64
	ceiling  float64
	ssthresh float64
	epoch    uint64

	short     float64 // short-term latency, in nanoseconds; 0 before any
	baseline  float64 // in nanoseconds; 0 before any sample
	baseLimit float64 // the limit when the baseline was set
	winMin    float64 // lowest latency of the current window
	winCount  int
}

func newAIMD(ceiling int) *aimd {
	c := float64(max(ceiling, 1))
	return &aimd{limit: min(initialLimit, c), ceiling: c, ssthresh: c}
}

// current returns the limit as a number of requests, at least 1.
func (a *aimd) current() int { return max(int(a.limit), 1) }

// add takes one finished request into account.
func (a *aimd) add(s sample) {
	if !s.throttled {
		// An error answer comes without the service's work: its
		// latency says nothing of the service's.
		a.observe(float64(max(s.latency, 0)))
	}
	switch {
	case s.throttled:
		a.decrease(s.epoch, throttleFactor)
	case s.inUse && a.short > a.threshold():
		a.decrease(s.epoch, latencyFactor)
	case s.inUse:
		if a.limit < a.ssthresh {
			a.limit++
		} else {
			a.limit += 1 / a.limit
		}
		a.limit = min(a.limit, a.ceiling)
	}
}

// observe updates the short-term latency and the baseline with lat.
func (a *aimd) observe(lat float64) {
	if a.short == 0 {
		a.short = lat
	} else {
		a.short += shortWeight * (lat - a.short)
	}
	if a.baseline == 0 || lat <= a.baseline {
		a.baseline, a.baseLimit = lat, a.limit
	}
	if a.winCount == 0 || lat < a.winMin {
		a.winMin = lat
	}
	a.winCount++
	if a.winCount < baselineWindow {
		return
	}
	if a.winMin > a.threshold() && a.limit <= a.baseLimit {
		a.baseline, a.baseLimit = a.winMin, a.limit
	}
	a.winCount = 0
}

// threshold is the short-term latency above which latency has risen.
func (a *aimd) threshold() float64 {
	return a.baseline + max(a.baseline*latencyTolerance, float64(latencyFloor))
}

func (a *aimd) decrease(epoch uint64, factor float64) {
	if epoch != a.epoch {
		return
	}
	a.epoch++
	a.limit = max(a.limit*factor, 1)
	a.ssthresh = a.limit
}
