package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// entryBytes is the size of every entry's body.
const entryBytes = 1024

// warmUps is the number of unmeasured sends each way makes first.
const warmUps = 3

// settings says what to measure.
type settings struct {
	// Entries is the number of entries sent in each run without added
	// latency.
	Entries int
	// LatencyEntries is the number of entries sent in each run with added
	// latency, where each request takes at least that long.
	LatencyEntries int
	// Latencies are the latencies added to every SendMessageBatch request;
	// each gives one sender and one hand-made series.
	Latencies []time.Duration
	// InFlight are the numbers of requests in flight measured.
	InFlight []int
	// Repeat is the number of runs at each point; the median is kept.
	Repeat int
}

// entriesAt is the number of entries sent in each run at latency.
func (s settings) entriesAt(latency time.Duration) int {
	if latency > 0 {
		return s.LatencyEntries
	}
	return s.Entries
}

// sendFunc sends entries to the queue at url with at most inFlight
// requests in flight and returns the number of requests made.
type sendFunc func(ctx context.Context, c sqsbatch.API, url string, inFlight int, entries []sqsbatch.Entry) (int, error)

// measure creates a queue, warms the stand-in up, sends to the queue with
// the Sender and by hand at every latency and number of requests in flight
// of set, purging the queue after every run, deletes the queue and returns
// the series measured. Progress goes to progress, one line per run.
func measure(ctx context.Context, c *sqs.Client, set settings, progress io.Writer) ([]series, error) {
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("throughput-%d", time.Now().UnixNano()))})
	if err != nil {
		return nil, fmt.Errorf("create queue: %w", err)
	}
	url := aws.ToString(q.QueueUrl)
	defer c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})

	ways := []struct {
		name string
		send sendFunc
	}{
		{seriesSender, sendWithSender},
		{seriesHandMade, sendByHand},
	}
	entries := makeEntries(max(set.Entries, set.LatencyEntries))
	// Warm the stand-in up (node's JIT, connections) so that the first
	// points are not the slowest for that reason alone.
	for range warmUps {
		for _, w := range ways {
			if _, err := w.send(ctx, c, url, 4, entries[:set.Entries]); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
			if err := purge(ctx, c, url); err != nil {
				return nil, err
			}
		}
	}

	var out []series
	for _, latency := range set.Latencies {
		var api sqsbatch.API = c
		if latency > 0 {
			api = slowClient{API: c, latency: latency}
		}
		n := set.entriesAt(latency)
		first := len(out)
		for _, w := range ways {
			out = append(out, series{Name: w.name, LatencyMS: float64(latency) / float64(time.Millisecond), Entries: n})
		}
		// The two ways take turns at each point, run after run, so that a
		// drift of the stand-in over time favours neither.
		for _, inFlight := range set.InFlight {
			points := make([]point, len(ways))
			for range set.Repeat {
				for i, w := range ways {
					runtime.GC()
					start := time.Now()
					requests, err := w.send(ctx, api, url, inFlight, entries[:n])
					elapsed := time.Since(start)
					if err != nil {
						return nil, fmt.Errorf("%s, %v added, %d in flight: %w", w.name, latency, inFlight, err)
					}
					rate := math.Round(float64(n) / elapsed.Seconds())
					points[i].Runs = append(points[i].Runs, rate)
					points[i].Requests = max(points[i].Requests, requests)
					fmt.Fprintf(progress, "throughput: %-9s %4v added, %2d in flight: %7.0f records/s\n", w.name, latency, inFlight, rate)
					if err := purge(ctx, c, url); err != nil {
						return nil, err
					}
				}
			}
			for i := range ways {
				points[i].InFlight = inFlight
				points[i].RecordsPerSecond = math.Round(median(points[i].Runs))
				out[first+i].Points = append(out[first+i].Points, points[i])
			}
		}
	}
	return out, nil
}

// median returns the median of xs, which must not be empty.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// makeEntries returns n entries of entryBytes bytes each.
func makeEntries(n int) []sqsbatch.Entry {
	pad := strings.Repeat("x", entryBytes-8)
	entries := make([]sqsbatch.Entry, n)
	for i := range entries {
		entries[i] = sqsbatch.Entry{ID: strconv.Itoa(i), Body: fmt.Sprintf("%07d-%s", i, pad)}
	}
	return entries
}

// sendWithSender sends entries with a Sender.
func sendWithSender(ctx context.Context, c sqsbatch.API, url string, inFlight int, entries []sqsbatch.Entry) (int, error) {
	s, err := sqsbatch.New(ctx, c, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: inFlight, FixedInFlight: true})
	if err != nil {
		return 0, err
	}
	res, err := s.SendEntries(ctx, entries)
	if err == nil && res.Sent != len(entries) {
		err = fmt.Errorf("%d of %d entries sent, %d failed", res.Sent, len(entries), res.Failed)
	}
	return res.Requests, err
}

// batchIDs are the ids of the entries of a hand-made batch.
var batchIDs = [sqsbatch.MaxBatchEntries]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// sendByHand sends entries in SendMessageBatch requests of ten, in order,
// from inFlight goroutines, with no retry: the least work a sender of
// small bodies can do. A failed request or entry stops it.
func sendByHand(ctx context.Context, c sqsbatch.API, url string, inFlight int, entries []sqsbatch.Entry) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	batches := make(chan []types.SendMessageBatchRequestEntry, inFlight)
	var requests atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for batch := range batches {
				requests.Add(1)
				out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: batch})
				if err == nil && len(out.Failed) > 0 {
					f := out.Failed[0]
					err = fmt.Errorf("%d entries failed, the first with %s: %s", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
				}
				if err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < len(entries) && ctx.Err() == nil; i += sqsbatch.MaxBatchEntries {
		part := entries[i:min(i+sqsbatch.MaxBatchEntries, len(entries))]
		batch := make([]types.SendMessageBatchRequestEntry, len(part))
		for j := range part {
			batch[j] = types.SendMessageBatchRequestEntry{Id: &batchIDs[j], MessageBody: &part[j].Body}
		}
		select {
		case batches <- batch:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	return int(requests.Load()), context.Cause(ctx)
}

// purge empties the queue: the stand-in keeps what it holds in memory.
func purge(ctx context.Context, c *sqs.Client, url string) error {
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}

// slowClient adds latency to every SendMessageBatch request, as a distant
// SQS endpoint would, before it passes the request on. Its other methods
// are API's.
type slowClient struct {
	sqsbatch.API
	latency time.Duration
}

// SendMessageBatch waits for the latency, or until ctx is done, then
// sends.
func (c slowClient) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	t := time.NewTimer(c.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return c.API.SendMessageBatch(ctx, in, optFns...)
}
