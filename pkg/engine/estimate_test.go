package engine

import (
	"fmt"
	"math"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// chunkTask is the task of chunk i of an object of its own.
func chunkTask(i int) worktask.Task {
	return worktask.Task{RunID: "r", Chunk: dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: fmt.Sprint(i)}, Count: 1, End: 100}}
}

func keysOf(ts []worktask.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Chunk.Key)
	}
	return out
}

// TestSamplerKeepsAllWhenFew: with no more chunks than the sample, every
// chunk is kept, in order.
func TestSamplerKeepsAllWhenFew(t *testing.T) {
	s := newSampler(8, "run")
	for i := range 8 {
		s.offer(chunkTask(i))
	}
	if got := fmt.Sprint(keysOf(s.sample())); got != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("sample %s; want every chunk in order", got)
	}
}

// TestSamplerUniform: over many seeds, each of 50 chunks is in a sample of
// 5 about a tenth of the time, and a seed always picks the same chunks.
func TestSamplerUniform(t *testing.T) {
	const m, n, runs = 50, 5, 4000
	hits := make([]int, m)
	for r := range runs {
		s := newSampler(n, fmt.Sprint("seed-", r))
		for i := range m {
			s.offer(chunkTask(i))
		}
		for _, task := range s.sample() {
			var i int
			fmt.Sscan(task.Chunk.Key, &i)
			hits[i]++
		}
	}
	want := float64(runs) * n / m // 400, with a standard deviation near 19
	for i, h := range hits {
		if math.Abs(float64(h)-want) > 80 {
			t.Errorf("chunk %d was sampled %d times in %d runs; want about %.0f", i, h, runs, want)
		}
	}
	pick := func() string {
		s := newSampler(n, "same")
		for i := range m {
			s.offer(chunkTask(i))
		}
		return fmt.Sprint(keysOf(s.sample()))
	}
	if a, b := pick(), pick(); a != b {
		t.Errorf("one seed picked %s and %s", a, b)
	}
}

// FuzzSampler: a sample holds min(n, offered) distinct chunks, in the
// order they were offered.
func FuzzSampler(f *testing.F) {
	f.Add(uint8(3), uint16(10), "a")
	f.Add(uint8(16), uint16(4), "b")
	f.Add(uint8(1), uint16(1000), "")
	f.Fuzz(func(t *testing.T, n uint8, m uint16, seed string) {
		size := max(int(n), 1)
		s := newSampler(size, seed)
		for i := range int(m) {
			s.offer(chunkTask(i))
		}
		got := s.sample()
		if len(got) != min(size, int(m)) {
			t.Fatalf("sample of %d from %d holds %d", size, m, len(got))
		}
		last := -1
		for _, task := range got {
			var i int
			fmt.Sscan(task.Chunk.Key, &i)
			if i <= last || i >= int(m) {
				t.Fatalf("sample %v is not distinct chunks in order", keysOf(got))
			}
			last = i
		}
	})
}

// TestScale: counts read from every chunk are the counts; from a sample
// they are scaled by bytes, and say so.
func TestScale(t *testing.T) {
	d := DryRun{Chunks: 4, Bytes: 400}
	d.scale(tally{chunks: 4, bytes: 400, records: 10, messages: 9, requests: 1, billed: 1, failed: 1})
	if d.Counted != CountedExact || d.Records != 10 || d.Messages != 9 || d.Failed != 1 {
		t.Errorf("exact: %+v", d)
	}
	d = DryRun{Chunks: 100, Bytes: 10_000}
	d.scale(tally{chunks: 3, bytes: 250, records: 10, messages: 10, requests: 1, billed: 2, offloaded: 1})
	if d.Counted != "estimated from 3 of 100 chunks" || d.Records != 400 || d.Requests != 40 || d.BilledRequests != 80 || d.Offloaded != 40 {
		t.Errorf("estimated: %+v", d)
	}
	// The sample's last request, half full, counts as half a request.
	d = DryRun{Chunks: 100, Bytes: 10_000}
	d.scale(tally{chunks: 3, bytes: 250, records: 15, messages: 15, requests: 2, billed: 2, unfilled: 0.5})
	if d.Requests != 60 || d.BilledRequests != 60 || d.Messages != 600 {
		t.Errorf("estimated with a last request half full: %+v", d)
	}
	d = DryRun{Chunks: 10}
	d.scale(tally{chunks: 2, records: 0})
	if d.Counted != "estimated from 2 of 10 chunks" || d.Records != 0 {
		t.Errorf("empty chunks: %+v", d)
	}
}

// TestEstimate: the time and GB-seconds at a concurrency follow from the
// rate of one vCPU, shared below 1,769 MB, and the costs from the prices.
func TestEstimate(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	// Record mode at 1,769 MB, queued, 1,000 invocations.
	d := DryRun{Queued: true, Tasks: 5000, Records: 34_100_000, BilledRequests: 3_410_000, WorkBilledRequests: 500}
	d.estimate(DryRunOptions{Invocations: 1000, MemoryMB: 1769, SQSPrice: 0.4, LambdaPrice: 0.00001}.withDefaults(worktask.ModeRecord), 0)
	e := d.Estimate
	if e.Invocations != 1000 || !near(e.RecordsPerSecond, RecordRate) || !near(e.InvocationSeconds, 1000) || !near(e.Seconds, 1) ||
		!near(e.GBSeconds, 1000*1769.0/1024) || !near(e.SQSCost, 3_410_500/1e6*0.4) || !near(e.LambdaCost, e.GBSeconds*0.00001) || !near(e.PlanSeconds, 5000.0/PlanRate) {
		t.Errorf("record mode at 1,769 MB: %+v", e)
	}
	// Chunk mode at 512 MB gets 512/1769 of a vCPU: the GB-seconds are
	// the same as at 1,769 MB; inline, one invocation.
	d = DryRun{Tasks: 3, Records: 1_000_000}
	d.estimate(DryRunOptions{Invocations: 50, MemoryMB: 512}.withDefaults(worktask.ModeChunk), 0)
	e = d.Estimate
	if e.Invocations != 1 || !near(e.RecordsPerSecond, ChunkRate*512.0/1769) || !near(e.GBSeconds, 1_000_000/float64(ChunkRate)*1769/1024) || e.SQSCost != 0 || e.PlanSeconds != 0 {
		t.Errorf("chunk mode at 512 MB: %+v", e)
	}
	// Above one vCPU the rate is not raised; a queued run of 3 tasks takes
	// at most 3 invocations.
	d = DryRun{Queued: true, Tasks: 3, Records: 1000}
	d.estimate(DryRunOptions{MemoryMB: 4096, RecordsPerSecond: 1000}.withDefaults(worktask.ModeRecord), 0)
	if e := d.Estimate; e.Invocations != 3 || !near(e.RecordsPerSecond, 1000) || !near(e.Seconds, 1.0/3) || !near(e.GBSeconds, 4) {
		t.Errorf("4,096 MB, 3 tasks: %+v", e)
	}
	// Paced at 100 messages/s, 12,000 messages take 120 s whatever the
	// invocations can do, and each of the 2 invocations is billed for it.
	d = DryRun{Queued: true, Tasks: 24, Records: 12_000, Messages: 12_000}
	d.estimate(DryRunOptions{Invocations: 2, MemoryMB: 1024}.withDefaults(worktask.ModeRecord), 100)
	if e := d.Estimate; e.MaxRate != 100 || !near(e.Seconds, 120) || !near(e.InvocationSeconds, 240) || !near(e.GBSeconds, 240) {
		t.Errorf("paced at 100/s: %+v", e)
	}
	// A rate above what the invocations send changes nothing.
	d.estimate(DryRunOptions{Invocations: 2, MemoryMB: 1769}.withDefaults(worktask.ModeRecord), 10_000_000)
	if e := d.Estimate; !near(e.Seconds, 12_000/float64(RecordRate)/2) || !near(e.InvocationSeconds, 12_000/float64(RecordRate)) {
		t.Errorf("paced above the invocations' rate: %+v", e)
	}
}
