package engine_test

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
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestKeptHeapDoesNotGrow sends objects of the same size in record mode:
// one of 1,000 records and one of 1,000,000, and the first again in 512
// chunk tasks of 64 KiB instead of 4 of 8 MiB. It compares the most heap
// each run kept after a collection while it sent: what a send keeps per
// entry (a reference per message, say, read only when it fails) is tens
// of MiB at a million entries, and what it keeps per task (an answer
// opened ahead, say) is MiBs at 512 tasks; both are nothing at a thousand
// entries in 4 tasks. Objects of one size keep the reads' buffers out of
// the difference.
//
// A million entries take a while under the race detector, which changes no
// allocation of ours: make test runs this test a second time without it.
func TestKeptHeapDoesNotGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the stand-ins: run make test")
	}
	if raceEnabled {
		t.Skip("a million entries under -race: make test runs it without -race (go test -run TestKeptHeap ./pkg/engine)")
	}
	const size = 32 << 20
	s3c := localaws.S3Client(localaws.StartS3Child(t))
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	ctx := t.Context()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		n     int
		chunk int64
	}{
		{"thousand", 1_000, 0},
		{"million", 1_000_000, 0},
		{"thousand in 512 tasks", 1_000, 64 << 10},
	}
	kept := map[string]uint64{}
	for _, c := range cases {
		key := fmt.Sprintf("records-%d.jsonl", c.n)
		if c.chunk == 0 {
			if err := localaws.UploadLines(ctx, s3c, "kept", key, sameSizeRecords(c.n, size)); err != nil {
				t.Fatal(err)
			}
		}
		target := localaws.CreateQueue(t, sqsc, fmt.Sprintf("-kept-%d-%d", c.n, c.chunk), nil)
		r, err := engine.New(ctx, s3c, sqsc, engine.Options{
			Target: sqsbatch.Queue{URL: target}, Mode: worktask.ModeRecord, Planning: engine.Planning{InlineMaxBytes: 1 << 40},
			Plan: dataset.PlanOptions{ChunkSize: c.chunk},
			// As in a function of 128 MB: the requests in flight hold
			// little, whatever the reads' pace.
			Send: sqsbatch.Options{MaxBytesInFlight: 4 << 20},
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := localaws.PurgeEvery(ctx, sqsc, target, time.Second)
		sample := keptHeap()
		rep, err := r.Run(ctx, engine.Request{Source: dataset.Source{Bucket: "kept", Key: key}})
		kept[c.name] = sample()
		stop()
		if err != nil || rep.RecordsSent != int64(c.n) {
			t.Fatalf("%s: %v, %+v", c.name, err, rep)
		}
		t.Logf("%-21s %9d records of %5d B in %3d tasks: %.1f MiB kept at most after a collection",
			c.name+":", c.n, size/c.n, rep.Chunks, float64(kept[c.name])/(1<<20))
	}
	if grown := int64(kept["million"]) - int64(kept["thousand"]); grown > 4<<20 {
		t.Errorf("a million entries kept %.1f MiB more heap than a thousand of the same bytes: something is kept per entry", float64(grown)/(1<<20))
	}
	if grown := int64(kept["thousand in 512 tasks"]) - int64(kept["thousand"]); grown > 4<<20 {
		t.Errorf("512 tasks kept %.1f MiB more heap than 4 of the same records: something is kept per task", float64(grown)/(1<<20))
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
