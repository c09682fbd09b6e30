package sqsbatch_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// viaProxy starts a fault proxy in front of the SQS stand-in and returns
// it with a client that goes through it, its own retries off so that the
// Sender sees every fault, and a direct client.
func viaProxy(t *testing.T, rates faultproxy.Rates) (*faultproxy.Proxy, *sqs.Client, *sqs.Client) {
	t.Helper()
	p := faultproxy.Start(t, localaws.Endpoint(t, localaws.EnvSQS), faultproxy.Options{Rates: rates, Ops: []string{"SendMessageBatch"}})
	via := sqs.NewFromConfig(localaws.Config(p.URL()), func(o *sqs.Options) { o.Retryer = aws.NopRetryer{} })
	return p, via, newClient(t)
}

// sendAll sends entries and fails the test unless every one was accepted.
func sendAll(t *testing.T, s *sqsbatch.Sender, in []sqsbatch.Entry) sqsbatch.Result {
	t.Helper()
	res, err := s.SendEntries(t.Context(), in)
	if err != nil || res.Sent != len(in) || res.Failed != 0 {
		t.Fatalf("send: %v; sent %d, failed %d of %d", err, res.Sent, res.Failed, len(in))
	}
	return res
}

// depth checks that the queue holds exactly n messages: each entry once.
func depth(t *testing.T, c *sqs.Client, url string, n int) {
	t.Helper()
	visible, hidden, err := localaws.Depth(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	if visible+hidden != n {
		t.Errorf("queue holds %d messages, want %d", visible+hidden, n)
	}
}

func TestControllerThrottling(t *testing.T) {
	p, via, c := viaProxy(t, faultproxy.Rates{SQSThrottled: 0.15, SQS500: 0.05, EntryFailed: 0.02})
	url := createQueue(t, c, false, nil)
	s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxAttempts: 50, Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	res := sendAll(t, s, entries("throttled", 3000))
	low := s.InFlightLimit()
	st := p.Stats()
	if low >= 16 {
		t.Errorf("limit %d after throttling, want below the 16 it started at", low)
	}
	if want := st.SQSThrottled + st.SQS500 + st.EntriesFailed; res.Throttled != want || want == 0 {
		t.Errorf("Result.Throttled = %d, want the %d throttles and 5xx the proxy injected (%v)", res.Throttled, want, st)
	}
	depth(t, c, url, 3000)

	// Without faults the limit grows back.
	if err := p.SetRates(faultproxy.Rates{}); err != nil {
		t.Fatal(err)
	}
	res = sendAll(t, s, entries("clean", 6000))
	if got := s.InFlightLimit(); got <= low || res.Throttled != 0 {
		t.Errorf("limit %d after 600 clean requests (throttled %d), want it grown back from %d", got, res.Throttled, low)
	}
	depth(t, c, url, 9000)
}

func TestControllerLatency(t *testing.T) {
	t.Run("fixed delay grows it to the ceiling", func(t *testing.T) {
		p, via, c := viaProxy(t, faultproxy.Rates{Delay: 1, DelayFor: 50 * time.Millisecond})
		url := createQueue(t, c, false, nil)
		const ceiling = 64
		s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: ceiling})
		if err != nil {
			t.Fatal(err)
		}
		res := sendAll(t, s, entries("far", 6000))
		peak := p.Stats().PeakInFlight
		if peak < 32 || peak > ceiling || res.PeakInFlight > ceiling || s.InFlightLimit() > ceiling {
			t.Errorf("peak in flight %d at the proxy, %d in the result, limit %d: want well above 16, at most %d",
				peak, res.PeakInFlight, s.InFlightLimit(), ceiling)
		}
		depth(t, c, url, 6000)
	})
	t.Run("latency that rises with load stops it below the ceiling", func(t *testing.T) {
		// 2 ms per request in flight: 32 ms at 16, 512 ms at the ceiling.
		p, via, c := viaProxy(t, faultproxy.Rates{DelayPerInFlight: 2 * time.Millisecond})
		url := createQueue(t, c, false, nil)
		s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sendAll(t, s, entries("queued", 10_000))
		// Past the first ramp, which may overshoot for a round trip.
		p.ResetPeaks()
		sendAll(t, s, entries("settled", 10_000))
		peak, limit := p.Stats().PeakInFlight, s.InFlightLimit()
		if peak > 64 || limit > 64 {
			t.Errorf("peak in flight %d, limit %d: want it settled far below the ceiling %d", peak, limit, sqsbatch.DefaultMaxInFlight)
		}
		depth(t, c, url, 20_000)
	})
}

func TestControllerBytes(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		p, via, c := viaProxy(t, faultproxy.Rates{Delay: 1, DelayFor: 20 * time.Millisecond})
		// One 200 KiB entry per request.
		url := createQueue(t, c, false, map[string]string{"MaximumMessageSize": "262144"})
		const bound = 1 << 20
		s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxBytesInFlight: bound})
		if err != nil {
			t.Fatal(err)
		}
		in := bigEntries("big", 40, 200<<10)
		sendAll(t, s, in)
		st := p.Stats()
		// A request's body is its entry plus a little JSON.
		request := int64(len(in[0].Body) + 1024)
		if st.PeakBytesInFlight > bound+request || st.PeakInFlight < 2 {
			t.Errorf("peak %d bytes in %d requests at the proxy, want at most %d + one request (%d) and more than one request",
				st.PeakBytesInFlight, st.PeakInFlight, bound, request)
		}
		depth(t, c, url, 40)
	})
	t.Run("a request over the bound goes alone", func(t *testing.T) {
		p, via, c := viaProxy(t, faultproxy.Rates{Delay: 1, DelayFor: 20 * time.Millisecond})
		url := createQueue(t, c, false, map[string]string{"MaximumMessageSize": "262144"})
		s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxBytesInFlight: 100 << 10})
		if err != nil {
			t.Fatal(err)
		}
		res := sendAll(t, s, bigEntries("alone", 10, 200<<10))
		if peak := p.Stats().PeakInFlight; peak != 1 || res.PeakInFlight != 1 {
			t.Errorf("peak in flight %d at the proxy, %d in the result: want 1", peak, res.PeakInFlight)
		}
		depth(t, c, url, 10)
	})
}

func TestFixedInFlight(t *testing.T) {
	p, via, c := viaProxy(t, faultproxy.Rates{Delay: 1, DelayFor: 20 * time.Millisecond, SQSThrottled: 0.1})
	url := createQueue(t, c, false, nil)
	const fixed = 8
	s, err := sqsbatch.New(t.Context(), via, sqsbatch.Queue{URL: url}, sqsbatch.Options{
		MaxInFlight: fixed, FixedInFlight: true, MaxAttempts: 50, Backoff: noWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two Sends at once share the Sender's eight slots.
	var (
		wg      sync.WaitGroup
		results [2]sqsbatch.Result
	)
	for i := range results {
		wg.Go(func() {
			var err error
			if results[i], err = s.SendEntries(t.Context(), entries(fmt.Sprint("fixed", i), 1000)); err != nil || results[i].Failed != 0 {
				t.Errorf("Send %d: %v, %d failed", i, err, results[i].Failed)
			}
		})
	}
	wg.Wait()
	if peak := p.Stats().PeakInFlight; peak != fixed {
		t.Errorf("peak in flight at the proxy %d, want exactly %d", peak, fixed)
	}
	for i, res := range results {
		if res.PeakInFlight != fixed {
			t.Errorf("Send %d: PeakInFlight %d, want %d", i, res.PeakInFlight, fixed)
		}
	}
	if got := s.InFlightLimit(); got != fixed {
		t.Errorf("limit %d after throttling, want the fixed %d", got, fixed)
	}
	depth(t, c, url, 2000)
}

func bigEntries(prefix string, n, size int) []sqsbatch.Entry {
	out := make([]sqsbatch.Entry, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = sqsbatch.Entry{ID: id, Body: id + strings.Repeat("x", size-len(id))}
	}
	return out
}
