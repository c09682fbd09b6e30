package engine

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Defaults of a dry run, used when the matching DryRunOptions field is
// zero, and the rates its estimate is made from.
const (
	DefaultSampleChunks = 16
	DefaultInvocations  = 100
	// DefaultMemoryMB is the fanout function's memory in the stacks.
	DefaultMemoryMB = 1024
	// RecordRate and ChunkRate are the records a second one invocation
	// with one vCPU (1,769 MB) sends in record and in chunk mode: fanout's
	// measured rates for JSON Lines records of 1 KiB at the 20 ms a
	// Region's SendMessageBatch takes (docs/performance-and-cost.md, "A
	// model: 1 TB with 1,000 concurrent invocations").
	RecordRate = 34_100
	ChunkRate  = 105_689
	// PlanRate is the chunk tasks a second that planning queues, one
	// planning invocation at a time (make planbench).
	PlanRate = 12_262
	// oneVCPUMemoryMB is the memory at which Lambda gives a function one
	// vCPU; below it, a function gets that share of one.
	oneVCPUMemoryMB = 1769
)

// DryRunOptions configures a dry run's sample and estimate. The zero value
// is ready to use.
type DryRunOptions struct {
	// SampleChunks is how many chunks are read. A dataset of at most that
	// many chunks is counted exactly, every chunk read; a larger one is
	// estimated from that many chunks chosen at random (the same ones for
	// the same run id and listing). Zero means DefaultSampleChunks.
	SampleChunks int `json:"sampleChunks,omitempty"`
	// Invocations is the concurrency of the function's invocations that
	// would send a run queued on the work queue; a run sent inline takes
	// one. Zero means DefaultInvocations.
	Invocations int `json:"invocations,omitempty"`
	// MemoryMB is the function's memory, which gives it its share of a
	// vCPU and its GB-seconds. Zero means DefaultMemoryMB.
	MemoryMB int `json:"memoryMB,omitempty"`
	// RecordsPerSecond is what one invocation of one vCPU sends; zero
	// means RecordRate or ChunkRate, by the run's mode.
	RecordsPerSecond float64 `json:"recordsPerSecond,omitempty"`
	// SQSPrice is the price of a million SQS requests and LambdaPrice of
	// a Lambda GB-second, as your price sheet gives them; zero leaves the
	// cost out.
	SQSPrice    float64 `json:"sqsPrice,omitempty"`
	LambdaPrice float64 `json:"lambdaPrice,omitempty"`
	// Queue plans the run as Runner.Run does a Request with Queue set,
	// every task to the work queue, however small (the CLI's
	// -work-queue-url).
	Queue bool `json:"-"`
}

// Validate reports the first option out of its range, naming its field.
func (o *DryRunOptions) Validate() error {
	for _, c := range []struct {
		name string
		bad  bool
		want string
	}{
		{"sampleChunks", o.SampleChunks < 0 || o.SampleChunks > 100_000, "from 1 to 100000"},
		{"invocations", o.Invocations < 0 || o.Invocations > 100_000, "from 1 to 100000"},
		{"memoryMB", o.MemoryMB != 0 && (o.MemoryMB < 128 || o.MemoryMB > 10_240), "from 128 to 10240, as Lambda allows"},
		{"recordsPerSecond", o.RecordsPerSecond < 0 || math.IsInf(o.RecordsPerSecond, 0) || math.IsNaN(o.RecordsPerSecond), "a positive number"},
		{"sqsPrice", o.SQSPrice < 0 || math.IsInf(o.SQSPrice, 0) || math.IsNaN(o.SQSPrice), "a price of at least 0"},
		{"lambdaPrice", o.LambdaPrice < 0 || math.IsInf(o.LambdaPrice, 0) || math.IsNaN(o.LambdaPrice), "a price of at least 0"},
	} {
		if c.bad {
			return fmt.Errorf("dryRunOptions.%s: want %s", c.name, c.want)
		}
	}
	return nil
}

// withDefaults returns o with the defaults of its zero fields, for a run
// in mode.
func (o DryRunOptions) withDefaults(mode worktask.Mode) DryRunOptions {
	o.SampleChunks = cmp.Or(o.SampleChunks, DefaultSampleChunks)
	o.Invocations = cmp.Or(o.Invocations, DefaultInvocations)
	o.MemoryMB = cmp.Or(o.MemoryMB, DefaultMemoryMB)
	if o.RecordsPerSecond == 0 {
		o.RecordsPerSecond = RecordRate
		if mode == worktask.ModeChunk {
			o.RecordsPerSecond = ChunkRate
		}
	}
	return o
}

// errDryRunOptions is a request that gives dryRunOptions without dryRun.
var errDryRunOptions = errors.New("dryRunOptions: only with \"dryRun\": true")

// Counted values of DryRun.Counted, and the start of an estimate's.
const (
	CountedExact     = "exact"
	countedEstimated = "estimated from %d of %d chunks"
)

// DryRun is what a run would do, as a dry run found by planning the whole
// dataset and reading every chunk (Counted "exact") or a sample of them
// ("estimated from N of M chunks"), without sending or writing anything.
type DryRun struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	Chunks  int   `json:"chunks"`
	// Tasks are the chunk tasks; a FIFO target's object of several chunks
	// is one chained task.
	Tasks int `json:"tasks"`
	// Queued says that the run would go to the work queue as tasks;
	// WorkRequests and WorkBilledRequests are its SendMessageBatch
	// requests there, counted exactly.
	Queued             bool  `json:"queued"`
	WorkRequests       int64 `json:"workRequests,omitempty"`
	WorkBilledRequests int64 `json:"workBilledRequests,omitempty"`
	// Records, Messages, Requests and BilledRequests are the target's:
	// records read, messages sent, SendMessageBatch requests made (none
	// retried) and the requests SQS bills for them, 64 KiB of payload
	// each. Requests are counted as the run's sender packs the messages
	// in the order the chunks are read.
	Records        int64 `json:"records"`
	Messages       int64 `json:"messages"`
	Requests       int64 `json:"requests"`
	BilledRequests int64 `json:"billedRequests"`
	// Offloaded are the records that would go to S3 as pointers (over the
	// target's MaximumMessageSize); Failed those that would go to the
	// failure output (unreadable, unmappable, refused by SQS's rules).
	Offloaded int64 `json:"offloaded"`
	Failed    int64 `json:"failed"`
	// FailureCodes counts the records of the chunks read that would fail,
	// by the code their failure would carry (UnreadableRecord,
	// InvalidCharacters, ...): why Failed would go to the failure output,
	// as the sample says it, not scaled.
	FailureCodes map[string]int64 `json:"failureCodes,omitempty"`
	// WouldStop says why the run's failure budget (see
	// Options.Control.MaxFailures) would stop it, judged on the records read
	// here; empty when it would not.
	WouldStop string `json:"wouldStop,omitempty"`
	// Counted says how the counts were made: "exact", or "estimated from
	// N of M chunks", scaled from the chunks read by bytes.
	Counted       string   `json:"counted"`
	SampledChunks int      `json:"sampledChunks"`
	SampledBytes  int64    `json:"sampledBytes"`
	Estimate      Estimate `json:"estimate"`
}

// Estimate is the time and cost of a run at a steady concurrency, from
// measured per-invocation rates (see DryRunOptions).
type Estimate struct {
	// Invocations are the concurrent invocations that would send the run:
	// one inline, at most one per task when queued.
	Invocations int `json:"invocations"`
	MemoryMB    int `json:"memoryMB"`
	// RecordsPerSecond is one invocation's rate at MemoryMB.
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// InvocationSeconds is the sending time summed over invocations;
	// Seconds the time at Invocations, not counting the event source's
	// ramp; PlanSeconds, for a queued run, the time to plan its tasks.
	InvocationSeconds float64 `json:"invocationSeconds"`
	Seconds           float64 `json:"seconds"`
	PlanSeconds       float64 `json:"planSeconds,omitempty"`
	// MaxRate is the run's run-wide rate (maxRate, MAX_RATE), when it has
	// one: Seconds is then at least Messages / MaxRate, and an invocation
	// that waits for the budget is billed for the wait, so that
	// InvocationSeconds is at least Seconds times Invocations.
	MaxRate int64 `json:"maxRate,omitempty"`
	// GBSeconds is InvocationSeconds at MemoryMB (MB / 1,024 GB).
	GBSeconds float64 `json:"gbSeconds"`
	// SQSCost (target and work queue requests) and LambdaCost (GB-seconds)
	// are given when their prices are.
	SQSCost    float64 `json:"sqsCost,omitempty"`
	LambdaCost float64 `json:"lambdaCost,omitempty"`
}

// estimate fills d.Estimate from d's counts, o (with its defaults) and
// the run's rate (0: none).
func (d *DryRun) estimate(o DryRunOptions, rate int64) {
	e := Estimate{Invocations: 1, MemoryMB: o.MemoryMB}
	if d.Queued {
		e.Invocations = max(1, min(o.Invocations, d.Tasks))
		e.PlanSeconds = float64(d.Tasks) / PlanRate
	}
	e.RecordsPerSecond = o.RecordsPerSecond * min(float64(o.MemoryMB), oneVCPUMemoryMB) / oneVCPUMemoryMB
	e.InvocationSeconds = float64(d.Records) / e.RecordsPerSecond
	e.Seconds = e.InvocationSeconds / float64(e.Invocations)
	if rate > 0 {
		e.MaxRate = rate
		e.Seconds = max(e.Seconds, float64(d.Messages)/float64(rate))
		e.InvocationSeconds = max(e.InvocationSeconds, e.Seconds*float64(e.Invocations))
	}
	e.GBSeconds = e.InvocationSeconds * float64(o.MemoryMB) / 1024
	e.SQSCost = float64(d.BilledRequests+d.WorkBilledRequests) / 1e6 * o.SQSPrice
	e.LambdaCost = e.GBSeconds * o.LambdaPrice
	d.Estimate = e
}

// tally is what the chunks read gave.
type tally struct {
	chunks                              int
	bytes                               int64
	records, messages, requests, billed int64
	offloaded, failed                   int64
	// codes counts the failed records by failure code.
	codes map[string]int64
	// objects counts, in notification mode, the object versions the
	// chunks announce: a notification's size is not its object's.
	objects int64
	// unfilled is the share of a request missing from the last request
	// of each sender, which the end of the reads cut short.
	unfilled float64
}

// fail counts n records failed with code.
func (t *tally) fail(code string, n int64) {
	if t.codes == nil {
		t.codes = map[string]int64{}
	}
	t.codes[code] += n
}

// scale sets d's target counts from t, the tally of the chunks read: as
// they are when every chunk was read, else scaled by object versions in
// notification mode, by bytes in the others (by chunks when the chunks
// read held no bytes).
func (d *DryRun) scale(t tally) {
	d.SampledChunks, d.SampledBytes = t.chunks, t.bytes
	f := 1.0
	switch {
	case t.chunks >= d.Chunks:
		d.Counted = CountedExact
	case t.objects > 0:
		f = float64(d.Objects) / float64(t.objects)
	case t.bytes > 0:
		f = float64(d.Bytes) / float64(t.bytes)
	case t.chunks > 0:
		f = float64(d.Chunks) / float64(t.chunks)
	}
	if d.Counted == "" {
		d.Counted = fmt.Sprintf(countedEstimated, t.chunks, d.Chunks)
	}
	s := func(n int64) int64 { return int64(math.Round(float64(n) * f)) }
	d.Records, d.Messages, d.Requests, d.BilledRequests = s(t.records), s(t.messages), s(t.requests), s(t.billed)
	if d.Counted != CountedExact && t.requests > 0 {
		// A sample's last request is short because the sample ends, not
		// the run: it counts for the share of a request it holds.
		d.Requests = int64(math.Round((float64(t.requests) - t.unfilled) * f))
		d.BilledRequests = int64(math.Round(float64(t.billed) * (float64(t.requests) - t.unfilled) / float64(t.requests) * f))
	}
	d.Offloaded, d.Failed = s(t.offloaded), s(t.failed)
	d.FailureCodes = t.codes
}

// chunkBytes is the size of chunk c in bytes: its range, or for Parquet,
// whose chunks are row groups, its share of the object.
func chunkBytes(c dataset.Chunk) int64 {
	if c.Format == dataset.FormatParquet {
		return c.Size / int64(max(c.Count, 1))
	}
	return c.End - c.Start
}

// sampler keeps a uniform random sample of n of the chunks offered
// (reservoir sampling, Vitter's algorithm R), in the order they were
// offered, however many there are.
type sampler struct {
	n    int
	rng  *rand.Rand
	seen int
	kept []sampled
}

// sampled is a chunk kept, as a task, with its place among those offered.
type sampled struct {
	at   int
	task worktask.Task
}

// newSampler returns a sampler of n chunks whose choice is seeded by seed.
func newSampler(n int, seed string) *sampler {
	h := fnv.New64a()
	h.Write([]byte(seed))
	s := h.Sum64()
	return &sampler{n: n, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// offer offers the task of one chunk.
func (s *sampler) offer(t worktask.Task) {
	at := s.seen
	s.seen++
	if len(s.kept) < s.n {
		s.kept = append(s.kept, sampled{at: at, task: t})
		return
	}
	if j := s.rng.IntN(s.seen); j < s.n {
		s.kept[j] = sampled{at: at, task: t}
	}
}

// sample returns the chunks kept, in the order they were offered.
func (s *sampler) sample() []worktask.Task {
	kept := slices.Clone(s.kept)
	slices.SortFunc(kept, func(a, b sampled) int { return cmp.Compare(a.at, b.at) })
	out := make([]worktask.Task, len(kept))
	for i, k := range kept {
		out[i] = k.task
	}
	return out
}
