package sqsbatch_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// benchEntries is the number of 1 KiB entries each benchmark iteration sends.
const benchEntries = 100_000

// BenchmarkSend sends 100,000 entries of 1 KiB to the SQS stand-in three
// ways at each concurrency: with a Sender; with a plain loop of hand-made
// SendMessageBatch calls of ten (the ceiling); and with one SendMessage per
// entry (the naive way). Run it with `make bench-go BENCH=BenchmarkSend`.
func BenchmarkSend(b *testing.B) {
	c := newClient(b)
	body := strings.Repeat("x", 1024-8)
	in := make([]sqsbatch.Entry, benchEntries)
	for i := range in {
		in[i] = sqsbatch.Entry{Body: fmt.Sprintf("%07d-%s", i, body)}
	}
	// Warm the stand-in up (node's JIT, connections) so that the first
	// variant measured is not the slowest for that reason alone.
	warm := createQueue(b, c, false, nil)
	ws, err := sqsbatch.New(b.Context(), c, sqsbatch.Queue{URL: warm}, sqsbatch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ws.SendEntries(b.Context(), in); err != nil {
		b.Fatal(err)
	}
	purge(b, c, warm)
	for _, inFlight := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("sender/inflight=%d", inFlight), func(b *testing.B) {
			url := createQueue(b, c, false, nil)
			s, err := sqsbatch.New(b.Context(), c, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: inFlight})
			if err != nil {
				b.Fatal(err)
			}
			var requests int
			start := time.Now()
			for b.Loop() {
				res, err := s.SendEntries(b.Context(), in)
				if err != nil || res.Failed != 0 {
					b.Fatalf("send: %v, %d failed", err, res.Failed)
				}
				requests += res.Requests
				purge(b, c, url)
			}
			report(b, start, requests)
		})
		b.Run(fmt.Sprintf("ceiling/inflight=%d", inFlight), func(b *testing.B) {
			url := createQueue(b, c, false, nil)
			var requests atomic.Int64
			start := time.Now()
			for b.Loop() {
				batches := make(chan []types.SendMessageBatchRequestEntry, inFlight)
				var wg sync.WaitGroup
				for range inFlight {
					wg.Go(func() {
						for batch := range batches {
							requests.Add(1)
							out, err := c.SendMessageBatch(b.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: batch})
							if err != nil || len(out.Failed) > 0 {
								b.Errorf("batch: %v", err)
							}
						}
					})
				}
				for i := 0; i < len(in); i += 10 {
					batch := make([]types.SendMessageBatchRequestEntry, 10)
					for j := range batch {
						batch[j] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(in[i+j].Body)}
					}
					batches <- batch
				}
				close(batches)
				wg.Wait()
				purge(b, c, url)
			}
			report(b, start, int(requests.Load()))
		})
		b.Run(fmt.Sprintf("naive/inflight=%d", inFlight), func(b *testing.B) {
			url := createQueue(b, c, false, nil)
			start := time.Now()
			for b.Loop() {
				bodies := make(chan string, inFlight)
				var wg sync.WaitGroup
				for range inFlight {
					wg.Go(func() {
						for body := range bodies {
							if _, err := c.SendMessage(b.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
								b.Errorf("send: %v", err)
							}
						}
					})
				}
				for _, e := range in {
					bodies <- e.Body
				}
				close(bodies)
				wg.Wait()
				purge(b, c, url)
			}
			report(b, start, b.N*len(in))
		})
	}
}

func report(b *testing.B, start time.Time, requests int) {
	b.Helper()
	b.ReportAllocs()
	entries := float64(b.N * benchEntries)
	// Purging is inside the timed loop; it is quick next to sending.
	b.ReportMetric(entries/time.Since(start).Seconds(), "entries/s")
	b.ReportMetric(float64(requests)/entries, "requests/entry")
}

func purge(b *testing.B, c *sqs.Client, url string) {
	b.Helper()
	if _, err := c.PurgeQueue(b.Context(), &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		b.Fatalf("purge: %v", err)
	}
}
