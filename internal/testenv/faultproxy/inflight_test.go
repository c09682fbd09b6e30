package faultproxy_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

func TestInFlight(t *testing.T) {
	target := localaws.Endpoint(t, localaws.EnvSQS)
	direct := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, direct, "", nil)
	const n, per = 8, 100 * time.Millisecond
	p := faultproxy.Start(t, target, faultproxy.Options{Rates: faultproxy.Rates{DelayPerInFlight: per}})
	c := sqsVia(p)
	body := strings.Repeat("b", 10_000)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		slowest time.Duration
	)
	for range n {
		wg.Go(func() {
			start := time.Now()
			if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String(body)}); err != nil {
				t.Errorf("SendMessage: %v", err)
			}
			mu.Lock()
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	s := p.Stats()
	// The first answer waits at least 100 ms, so all eight overlap.
	if s.PeakInFlight != n || s.PeakBytesInFlight < n*int64(len(body)) {
		t.Errorf("peaks %d requests, %d bytes; want %d and at least %d", s.PeakInFlight, s.PeakBytesInFlight, n, n*len(body))
	}
	// The last to arrive found all eight in flight.
	if slowest < n*per {
		t.Errorf("slowest answer after %v, want at least %v", slowest, n*per)
	}
	if reqs, bytes := p.InFlight(); reqs != 0 || bytes != 0 {
		t.Errorf("in flight after the answers: %d requests, %d bytes; want none", reqs, bytes)
	}
	p.ResetPeaks()
	if s := p.Stats(); s.PeakInFlight != 0 || s.PeakBytesInFlight != 0 {
		t.Errorf("peaks after ResetPeaks: %d, %d; want 0", s.PeakInFlight, s.PeakBytesInFlight)
	}
	if err := p.SetRates(faultproxy.Rates{DelayPerInFlight: -1}); err == nil {
		t.Error("SetRates accepted a negative DelayPerInFlight")
	}
}
