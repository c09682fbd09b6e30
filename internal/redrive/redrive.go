package redrive

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// S3API is the part of the S3 client a Redriver uses. *s3.Client
// satisfies it.
type S3API interface {
	engine.S3API
	DeleteObject(ctx context.Context, params *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	// Options gives the region a notification sent again names.
	Options() s3.Options
}

// SQSAPI is the part of the SQS client a Redriver uses. *sqs.Client
// satisfies it.
type SQSAPI interface {
	sqsbatch.API
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	ListQueues(ctx context.Context, params *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, params *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	StartMessageMoveTask(ctx context.Context, params *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, params *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
}

var (
	_ S3API  = (*s3.Client)(nil)
	_ SQSAPI = (*sqs.Client)(nil)
)

// Defaults used when the matching Options field is zero.
const (
	// DefaultVisibility is how long a received message stays hidden while
	// a run holds it.
	DefaultVisibility = 30 * time.Second
	// DefaultRate is the default of Options.Rate in the CLI: what SQS's
	// own redrive moves at most, per second, when asked for a rate.
	DefaultRate = 100
)

// Options configures a Redriver. The zero value sends nothing anywhere:
// set the queues of the sources used.
type Options struct {
	// TargetQueueURL receives the records of the failure output, and of a
	// run report redriven in this process.
	TargetQueueURL string
	// WorkQueueURL receives a run report's failed tasks, for the deployed
	// fanout function to run.
	WorkQueueURL string
	// RunID names the run of the tasks a report redrive sends; "" means
	// the report's run id with "-redrive" added (see RedriveRunID).
	RunID string
	// Mapping and Ingest say how records read again from their object
	// become messages: fanout's record mode with Mapping (the default),
	// or, with Ingest set, as s3ingest sends them. Records of a run report
	// are encoded by their task's own overrides.
	Mapping worktask.Mapping
	Ingest  *worktask.IngestEncoding
	// Plan says how records are read again: the format (zero: from the
	// key), the CSV dialect and header, and how Parquet bytes are written,
	// as the run that failed them read them. Its chunk sizes are not
	// used.
	Plan dataset.PlanOptions
	// Reread reads every failure output record again from its object,
	// not only those whose body is cut or absent, so that the message
	// attributes and FIFO group the mapping takes from the record come
	// back too.
	Reread bool
	// Codes selects failure output and run report records by code.
	Codes CodeFilter
	// DryRun sends, deletes and writes nothing, and lists what would be
	// sent.
	DryRun bool
	// Delete removes a failure output S3 file once all its records are
	// sent; without it a marker records what was sent.
	Delete bool
	// Rate bounds the messages sent per second from the failure output
	// and a DLQ; zero means no bound.
	Rate int
	// Visibility is how long a received message stays hidden while the
	// run holds it; zero means DefaultVisibility.
	Visibility time.Duration
	// Offload sends records too large for the target as SQS Extended
	// Client pointers to their bodies in S3, as the engine does; without
	// its S3URI such a record fails (MessageTooLarge).
	Offload engine.Offload
	// Send configures the senders (MaxAttempts, ...).
	Send sqsbatch.Options
	// Progress, when set, counts the work as it happens.
	Progress *Progress
	// Logger receives the engine's warnings; nil discards them.
	Logger *slog.Logger
}

// Redriver sends failed work again. Its methods are not safe for
// concurrent use; run one source at a time.
type Redriver struct {
	s3   S3API
	sqs  SQSAPI
	opts Options
	log  *slog.Logger

	// target sends the failure output's bodies; runner reads records
	// again and sends them as the engine does, its failures collected.
	target  *sqsbatch.Sender
	offload *sqsextended.Offloader
	runner  *engine.Runner
	failed  *collector
}

// New resolves the queues that opts names (so that a queue that cannot be
// used fails here, before anything is received or read) and returns a
// Redriver.
func New(ctx context.Context, s3c S3API, sqsc SQSAPI, opts Options) (*Redriver, error) {
	if opts.Visibility <= 0 {
		opts.Visibility = DefaultVisibility
	}
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	r := &Redriver{s3: s3c, sqs: sqsc, opts: opts, log: log, failed: &collector{}}
	if opts.TargetQueueURL != "" {
		s, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: opts.TargetQueueURL}, opts.Send)
		if err != nil {
			return nil, &engine.QueueError{Role: engine.RoleTarget, Queue: opts.TargetQueueURL, Err: err}
		}
		r.target = s
		if r.offload, err = newOffloader(s3c, s, opts); err != nil {
			return nil, err
		}
	}
	if opts.TargetQueueURL != "" || opts.WorkQueueURL != "" {
		fo := engine.Options{
			Target:        sqsbatch.Queue{URL: opts.TargetQueueURL},
			WorkQueueURL:  opts.WorkQueueURL,
			Mapping:       opts.Mapping,
			Send:          opts.Send,
			FailureWriter: r.failed,
			Logger:        log,
			// Records read again are offloaded as the engine does.
			Offload: opts.Offload,
			// A notification-mode run's report sends its notifications
			// again naming the region of the buckets.
			Notification: engine.Notification{Region: s3c.Options().Region},
		}
		fo.Plan = opts.Plan
		fo.Plan.ChunkSize, fo.Plan.RowGroupsPerChunk = 0, 0
		run, err := engine.New(ctx, s3c, sqsc, fo)
		if err != nil {
			return nil, err
		}
		r.runner = run
	}
	return r, nil
}

// Outcome is what became of an item.
type Outcome string

// Outcomes.
const (
	// Sent: SQS accepted it (a record, or a task carrying it, or a moved
	// message).
	Sent Outcome = "sent"
	// WouldSend: a dry run would send it.
	WouldSend Outcome = "would-send"
	// Skipped: not sent, by choice or because it cannot be (the reason
	// says which); not an error.
	Skipped Outcome = "skipped"
	// Failed: it should have been sent and was not; it stays where it was.
	Failed Outcome = "failed"
)

// Item is one record, or DLQ message, that a redrive found.
type Item struct {
	// ID is the record id (engine.RecordID), or a DLQ message's id.
	ID string `json:"id"`
	// From is where it was found: a failure output file and its line, a
	// queue, a run report's failed task.
	From string `json:"from"`
	// Source and Offset name the record in its object, for records.
	Source string `json:"source,omitempty"`
	Offset *int64 `json:"offset,omitempty"`
	// Code is the code the record failed with.
	Code string `json:"code,omitempty"`
	// Outcome is what became of it; To is where it went, or would go.
	Outcome Outcome `json:"outcome"`
	To      string  `json:"to,omitempty"`
	// Reason says why it was skipped or failed, or how it was sent.
	Reason string `json:"reason,omitempty"`
}

// Summary accounts for every item of one redrive: Total = Sent + Skipped +
// Failed (+ WouldSend in a dry run).
type Summary struct {
	From      string `json:"from"`
	To        string `json:"to,omitempty"`
	DryRun    bool   `json:"dryRun,omitempty"`
	Total     int    `json:"total"`
	Sent      int    `json:"sent"`
	WouldSend int    `json:"wouldSend,omitempty"`
	Skipped   int    `json:"skipped"`
	Failed    int    `json:"failed"`
	// TasksQueued counts the tasks a report redrive sent to the work queue.
	TasksQueued int `json:"tasksQueued,omitempty"`
	// Left is, for a queue source, how many messages it held when the run
	// ended, by its approximate counts.
	Left *int64 `json:"left,omitempty"`
	// Items lists the items not sent (skipped and failed) and, in a dry
	// run, every item; sent items are counted only.
	Items []Item `json:"items"`
}

// Progress counts a redrive's items as they are accounted for. Its fields
// may be read at any time from another goroutine. Total is an estimate
// while items are still found.
type Progress struct {
	Total   atomic.Int64
	Done    atomic.Int64
	Sent    atomic.Int64
	Skipped atomic.Int64
	Failed  atomic.Int64
}

// tally fills a Summary and the Progress.
type tally struct {
	sum  Summary
	prog *Progress
}

func newTally(o Options, from, to string) *tally {
	return &tally{sum: Summary{From: from, To: to, DryRun: o.DryRun, Items: []Item{}}, prog: cmp.Or(o.Progress, &Progress{})}
}

// expect adds n items to the progress's total.
func (t *tally) expect(n int) { t.prog.Total.Add(int64(n)) }

func (t *tally) add(it Item) {
	t.sum.Total++
	t.prog.Done.Add(1)
	switch it.Outcome {
	case Sent:
		t.sum.Sent++
		t.prog.Sent.Add(1)
		return
	case WouldSend:
		t.sum.WouldSend++
	case Skipped:
		t.sum.Skipped++
		t.prog.Skipped.Add(1)
	case Failed:
		t.sum.Failed++
		t.prog.Failed.Add(1)
	}
	t.sum.Items = append(t.sum.Items, it)
}

func (t *tally) summary() *Summary {
	if t.prog.Total.Load() < int64(t.sum.Total) {
		t.prog.Total.Store(int64(t.sum.Total))
	}
	return &t.sum
}

// CodeFilter selects records by their failure code: with Only, only those
// codes; with Skip, all but those. The zero value selects every record.
type CodeFilter struct {
	Only []string
	Skip []string
}

// ParseCodes reads a comma-separated list of error codes.
func ParseCodes(s string) ([]string, error) {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" || strings.ContainsAny(c, " \t\n\"'") {
			return nil, fmt.Errorf("%q is not a comma-separated list of error codes such as InvalidCharacters,UnreadableRecord", s)
		}
		out = append(out, c)
	}
	return out, nil
}

// allows reports whether code is selected, and if not, why.
func (f CodeFilter) allows(code string) (bool, string) {
	if slices.Contains(f.Skip, code) {
		return false, fmt.Sprintf("code %s is skipped (-skip-code)", code)
	}
	if len(f.Only) == 0 || slices.Contains(f.Only, code) {
		return true, ""
	}
	return false, fmt.Sprintf("code %s is not selected (-code %s)", code, strings.Join(f.Only, ","))
}

// pace spaces sends at rate messages per second: the first goes at once.
type pace struct {
	every time.Duration
	next  time.Time
}

func newPace(rate int) *pace {
	if rate <= 0 {
		return &pace{}
	}
	return &pace{every: time.Second / time.Duration(rate)}
}

// wait returns when n more messages may be sent, or when ctx ends.
func (p *pace) wait(ctx context.Context, n int) error {
	if p.every == 0 {
		return ctx.Err()
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	d := p.next.Sub(now)
	p.next = p.next.Add(time.Duration(n) * p.every)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// collector is the runner's failure output: it keeps the failures of a
// RunRecords call, for the caller to account for.
type collector struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	list []engine.Failure
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	for {
		line, err := c.buf.ReadBytes('\n')
		if err != nil {
			// A part line: keep it for the next write.
			rest := append([]byte(nil), line...)
			c.buf.Reset()
			c.buf.Write(rest)
			return len(p), nil
		}
		var f engine.Failure
		if err := json.Unmarshal(line, &f); err != nil {
			return 0, fmt.Errorf("redrive: a failure the engine wrote cannot be read: %w", err)
		}
		c.list = append(c.list, f)
	}
}

// take returns the failures collected so far, by offset, and forgets them.
func (c *collector) take() map[int64]engine.Failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]engine.Failure, len(c.list))
	for _, f := range c.list {
		out[f.Offset] = f
	}
	c.list = nil
	return out
}

// readError says whether a record the engine could not read or map is
// beyond a redrive's reach (it is then skipped, not failed).
func readError(code string) bool {
	return code == "UnreadableRecord" || code == "UnmappableRecord"
}
