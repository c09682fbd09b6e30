package fanout_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestKeptHeapDoesNotGrowWithEntries sends two objects of the same size in
// record mode, one of 1,000 records and one of 1,000,000, and compares the
// most heap each run kept after a collection while it sent: what a send
// keeps per entry (a reference per message, say, read only when it fails)
// is tens of MiB at a million entries, and nothing at a thousand. Objects of
// one size keep the reads' buffers out of the difference.
//
// A million entries take a while under the race detector, which changes no
// allocation of ours: make test runs this test a second time without it.
func TestKeptHeapDoesNotGrowWithEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the stand-ins: run make test")
	}
	if raceEnabled {
		t.Skip("a million entries under -race: make test runs it without -race (go test -run TestKeptHeap ./pkg/fanout)")
	}
	const size = 32 << 20
	s3c := localaws.S3Client(localaws.StartS3Child(t))
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	ctx := t.Context()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	kept := map[int]uint64{}
	for _, n := range []int{1_000, 1_000_000} {
		key := fmt.Sprintf("records-%d.jsonl", n)
		if err := localaws.UploadLines(ctx, s3c, "kept", key, sameSizeRecords(n, size)); err != nil {
			t.Fatal(err)
		}
		target := localaws.CreateQueue(t, sqsc, fmt.Sprintf("-kept-%d", n), nil)
		r, err := fanout.New(ctx, s3c, sqsc, fanout.Options{
			Target: sqsbatch.Queue{URL: target}, Mode: worktask.ModeRecord, InlineMaxBytes: 1 << 40,
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := localaws.PurgeEvery(ctx, sqsc, target, time.Second)
		sample := keptHeap()
		rep, err := r.Run(ctx, fanout.Request{Source: dataset.Source{Bucket: "kept", Key: key}})
		kept[n] = sample()
		stop()
		if err != nil || rep.RecordsSent != int64(n) {
			t.Fatalf("%d records: %v, %+v", n, err, rep)
		}
		t.Logf("%9d records of %5d B: %.1f MiB kept at most after a collection", n, size/n, float64(kept[n])/(1<<20))
	}
	if grown := int64(kept[1_000_000]) - int64(kept[1_000]); grown > 4<<20 {
		t.Errorf("a million entries kept %.1f MiB more heap than a thousand of the same bytes: something is kept per entry", float64(grown)/(1<<20))
	}
}

// sameSizeRecords yields n JSON Lines records that, with their newlines,
// are size bytes in all.
func sameSizeRecords(n, size int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for i := range n {
			line := fmt.Sprintf(`{"i":%d,"p":""}`, i)
			pad := strings.Repeat("x", size/n-1-len(line))
			if !yield(line[:len(line)-2] + pad + `"}`) {
				return
			}
		}
	}
}

// keptHeap collects every 100 ms until the returned function is called,
// which returns the most heap in use found after a collection.
func keptHeap() func() uint64 {
	done := make(chan struct{})
	most := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				most <- peak
				return
			case <-tick.C:
			}
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
		}
	}()
	return func() uint64 {
		close(done)
		return <-most
	}
}
