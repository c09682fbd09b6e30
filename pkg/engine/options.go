package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Defaults used when the matching Options field is zero. The exported ones
// are the settings table's defaults too (pkg/settings), which the
// functions, the CLI and docs/configuration.md read; a test of
// internal/awssetup holds the two equal.
const (
	DefaultInlineMaxBytes   = 64 << 20
	DefaultChunkConcurrency = 4
	// DefaultReadConcurrency is how many notified objects RunNotified
	// reads at once. Eight was the best setting of make bench-latency at
	// 0, 20 and 50 ms, where four reached 0.83x of it: with fewer reads
	// the sender waits for records.
	DefaultReadConcurrency = 8
	defaultPlanConcurrency = 16
)

// S3API is the part of the S3 client the engine uses. *s3.Client satisfies it.
type S3API interface {
	dataset.ListAPI
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

// Options configures a [Runner]. Its groups are each for one kind of
// work: Notification for ModeNotification, Planning for the requests a
// runner lists and plans (fanout's, not s3ingest's objects), Control for
// runs steered and paced across invocations (fanout's runs).
type Options struct {
	// Target is the queue records go to. A run may name another.
	Target sqsbatch.Queue
	// WorkQueueURL is the queue of chunk tasks. Without it every dataset
	// is sent inline, and an invocation that runs out of time fails.
	WorkQueueURL string
	// FailureQueueURL, or else FailureS3URI (s3://bucket/prefix), receives
	// the records SQS refused for good. With neither they are logged at
	// error level.
	FailureQueueURL string
	FailureS3URI    string
	// FailureWriter, when set, receives the failures as JSON Lines instead
	// of the failure queue or S3 (the CLI's local file).
	FailureWriter io.Writer
	// ReportS3URI (s3://bucket/prefix), when set, receives the run report:
	// a manifest per run and the failed ranges of each task (see
	// Manifest and FailedTask).
	ReportS3URI string
	// Plan configures chunking and formats.
	Plan dataset.PlanOptions
	// Mode is how records become messages; "" means ModeRecord.
	// ModeNotification sends each object's S3 notification instead of its
	// records, without reading it.
	Mode worktask.Mode
	// Notification shapes ModeNotification's messages.
	Notification Notification
	// Mapping names the record fields that become message parts.
	Mapping worktask.Mapping
	// Send configures the senders (MaxInFlight, MaxAttempts, ...).
	Send sqsbatch.Options
	// ChunkConcurrency is how many chunks are read at once in one
	// invocation; zero means DefaultChunkConcurrency.
	ChunkConcurrency int
	// Offload, when its S3URI is set, offloads the records too large for
	// their queue to S3.
	Offload Offload
	// Claims, when set, runs each task once per run: a task another
	// delivery has done does nothing and succeeds; one another delivery
	// holds fails with claims.ErrHeld, to come back when the holder has
	// finished or released it; a task that stopped part-way resumes where
	// it stopped (see pkg/claims). Without it a task delivered twice runs
	// twice (at least once).
	Claims claims.Store
	// Planning is how a request's dataset is listed and planned.
	Planning Planning
	// Control is how runs are steered and paced.
	Control Control
	// Progress, when set, is updated as records are read and sent, for a
	// progress display.
	Progress *Progress
	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger
}

// Notification shapes the messages of ModeNotification.
type Notification struct {
	// Format is the messages' shape; "" means s3event.FormatS3.
	Format s3event.Format
	// Region is the awsRegion the messages name, the buckets' region; ""
	// writes an empty one.
	Region string
}

// Offload configures the records too large for their queue: when S3URI
// (s3://bucket/prefix) is set, each is written to S3 (its body and
// attributes, as SQS counts them) as an object whose key derives from the
// record id, and its message carries a pointer in the SQS Extended Client
// format (see pkg/sqsextended), which the Extended Client libraries read
// unchanged. The zero Offload offloads nothing: such records fail.
type Offload struct {
	S3URI string
	// Mode sqsextended.ModeAlways offloads every record; the zero Mode
	// only those too large.
	Mode sqsextended.Mode
	// KMSKeyID encrypts the objects with SSE-KMS under that key; without
	// it, SSE-S3.
	KMSKeyID string
}

// Planning configures how a request's dataset is listed and planned into
// tasks. The zero Planning keeps every object and plans 16 at once.
type Planning struct {
	// InlineMaxBytes is the largest dataset sent in the invocation that
	// planned it; larger ones go to the work queue. Zero means
	// DefaultInlineMaxBytes.
	InlineMaxBytes int64
	// Concurrency is how many objects are planned at once: their
	// HeadObject when the listing gives no size, a CSV object's header, a
	// Parquet object's footer. Zero means 16.
	Concurrency int
	// Filters are the object filters of a request whose source sets none
	// of its own: a request that sets any replaces them all, so that it
	// can keep what they would leave out. The zero Filters keeps every
	// object.
	Filters dataset.Filters
	// OnArchived, when set, is called with each object planning leaves
	// out as archived (see Stats.ObjectsArchived), in listing order, by
	// one goroutine at a time: the CLI lists them for a restore job.
	OnArchived func(dataset.Object)
}

// Control configures how runs are steered and paced across their
// invocations. The zero Control keeps no shared state, sets no rate or
// backlog limit, and gives a run the default failure budget.
type Control struct {
	// Runs, when set, keeps the runs' shared state (see pkg/runstate): the
	// control record that pauses, resumes and cancels a run or changes its
	// rate while it runs, which every task reads before it sends; the
	// run-wide rate's budget; the counters each task and planning step adds
	// to as it settles; and the tasks a cancel parked. Without it a run
	// cannot be steered, and MaxRate paces each invocation on its own.
	Runs *runstate.Table
	// MaxRate is the most messages per second a run sends to its target,
	// across all its invocations (with Runs; else in each invocation); a
	// request's maxRate wins. Zero means no limit.
	MaxRate int64
	// TargetMaxBacklog holds a run's sends while its target's
	// ApproximateNumberOfMessages is above it (read at most every
	// ReadEvery); a request's targetMaxBacklog wins. Zero means no limit.
	TargetMaxBacklog int64
	// MaxFailures and MaxFailedObjects are the failure budget of a run that
	// a request starts (Run, Queue) and whose request gives none: past
	// either, the run stops itself as a cancel stops it (see
	// DefaultMaxFailures); a queued run's needs Runs. The
	// zero Limit means DefaultMaxFailures; worktask.LimitOf("off"), none.
	// A run of notified objects has none unless its overrides give one.
	MaxFailures, MaxFailedObjects worktask.Limit
	// Hold is how long a task waits in its invocation for its target's
	// backlog to drain before it is put back on the work queue; zero means
	// 20 s. Without a work queue a task waits as long as its context
	// lasts, for a backlog and while its run is paused.
	Hold time.Duration
	// HoldDelay is how long a task put back on the work queue (its run
	// paused, or its target's backlog high) waits there before it comes
	// back, as the message's DelaySeconds (at most 15 minutes); zero means
	// 10 s, so that a resumed run's tasks are back within seconds, at the
	// cost, while it is paused, of a receive, an invocation and a send per
	// task every 10 s. A FIFO work queue takes no delay of a message's own: the task
	// comes back after the queue's delay.
	HoldDelay time.Duration
	// ReadEvery is how often a run's control record and its target's
	// backlog are read again; zero means 2 s.
	ReadEvery time.Duration
}

// Progress counts a run's work as it happens. Its fields may be read at
// any time from another goroutine.
type Progress struct {
	ObjectsPlanned atomic.Int64
	TasksPlanned   atomic.Int64
	BytesPlanned   atomic.Int64
	BytesRead      atomic.Int64
	RecordsRead    atomic.Int64
	RecordsFailed  atomic.Int64
	// Messages counts the messages handed to the send as they go, less
	// those SQS refused in the end, so that a rate from it is live.
	Messages atomic.Int64
}

// Report is the answer to a request.
type Report struct {
	RunID string `json:"runId"`
	// Queued reports that the dataset went to the work queue as tasks.
	Queued bool `json:"queued"`
	// PlanContinued reports that planning ran out of time: the rest of the
	// listing is a planning step on the work queue (see Runner.PlanStep).
	PlanContinued bool `json:"planContinued,omitempty"`
	// Cancelled reports that the run was cancelled while it was sent here
	// (see Options.Control.Runs): what was not sent is not.
	Cancelled bool `json:"cancelled,omitempty"`
	Stats
	// DryRun is what a dry run found the run would do (see Runner.DryRun).
	DryRun *DryRun `json:"dryRun,omitempty"`
}

// Runner sends datasets. It is safe for concurrent use.
type Runner struct {
	s3   S3API
	sqs  sqsbatch.API
	opts Options
	log  *slog.Logger

	work     *sqsbatch.Sender
	failures failureSink
	report   *reporter

	// offload is how records too large for their queue are offloaded;
	// MaxMessageSize is each target's, in offloaders.
	offload    *sqsextended.OffloaderOptions
	mu         sync.Mutex
	targets    map[string]*sqsbatch.Sender
	offloaders map[*sqsbatch.Sender]*sqsextended.Offloader
	// pacers are the runs' Pacers, by run id; backlogs the targets'
	// backlogs, by queue URL (see gate).
	pacers   map[string]*runstate.Pacer
	backlogs map[string]*backlog
	// ledger keeps the failure budget of runs without Runs.
	ledger ledger
}

// New resolves the queues (once) and returns a Runner.
func New(ctx context.Context, s3c S3API, sqsc sqsbatch.API, opts Options) (*Runner, error) {
	if opts.Planning.InlineMaxBytes <= 0 {
		opts.Planning.InlineMaxBytes = DefaultInlineMaxBytes
	}
	if opts.ChunkConcurrency <= 0 {
		opts.ChunkConcurrency = DefaultChunkConcurrency
	}
	if opts.Planning.Concurrency <= 0 {
		opts.Planning.Concurrency = defaultPlanConcurrency
	}
	opts.Mode = cmp.Or(opts.Mode, worktask.ModeRecord)
	if opts.Mode != worktask.ModeRecord && opts.Mode != worktask.ModeChunk && opts.Mode != worktask.ModeNotification {
		return nil, fmt.Errorf("fanout: unknown mode %q (want record, chunk or notification)", opts.Mode)
	}
	if _, err := s3event.ParseFormat(string(opts.Notification.Format)); err != nil {
		return nil, fmt.Errorf("fanout: %w", err)
	}
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	r := &Runner{s3: s3c, sqs: sqsc, opts: opts, log: log, targets: map[string]*sqsbatch.Sender{}, offloaders: map[*sqsbatch.Sender]*sqsextended.Offloader{},
		pacers: map[string]*runstate.Pacer{}, backlogs: map[string]*backlog{}}
	r.failures = failureSink{s3: s3c, log: log, w: opts.FailureWriter}
	var err error
	if opts.WorkQueueURL != "" {
		if r.work, err = sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: opts.WorkQueueURL}, opts.Send); err != nil {
			return nil, &QueueError{Role: RoleWork, Queue: opts.WorkQueueURL, Err: err}
		}
	}
	switch {
	case opts.FailureQueueURL != "":
		if r.failures.queue, err = sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: opts.FailureQueueURL}, opts.Send); err != nil {
			return nil, &QueueError{Role: RoleFailure, Queue: opts.FailureQueueURL, Err: err}
		}
	case opts.FailureS3URI != "":
		if r.failures.bucket, r.failures.prefix, err = dataset.ParseS3URI(opts.FailureS3URI); err != nil {
			return nil, fmt.Errorf("fanout: failure output: %w", err)
		}
	}
	if opts.Offload.S3URI != "" {
		o := sqsextended.OffloaderOptions{Mode: opts.Offload.Mode, KMSKeyID: opts.Offload.KMSKeyID, MaxMessageSize: sqsbatch.MaxBatchBytes}
		if o.Bucket, o.Prefix, err = dataset.ParseS3URI(opts.Offload.S3URI); err != nil {
			return nil, fmt.Errorf("fanout: offload: %w", err)
		}
		// Checked now, so that a bad prefix fails at init; each target
		// gets its own with its MaximumMessageSize.
		if _, err := sqsextended.NewOffloader(s3c, o); err != nil {
			return nil, fmt.Errorf("fanout: offload: %w", err)
		}
		r.offload = &o
	}
	if opts.ReportS3URI != "" {
		r.report = &reporter{s3: s3c, mapping: opts.Mapping, mode: opts.Mode, format: opts.Notification.Format}
		if r.report.bucket, r.report.prefix, err = dataset.ParseS3URI(opts.ReportS3URI); err != nil {
			return nil, fmt.Errorf("fanout: run report: %w", err)
		}
	}
	if opts.Target.URL != "" || opts.Target.Name != "" {
		s, err := r.target(ctx, &worktask.Overrides{}, opts.Mode)
		if err != nil {
			return nil, err
		}
		if opts.Control.TargetMaxBacklog > 0 {
			// Read once now, so that a missing permission fails at init.
			if _, err := r.backlogOf(s.QueueURL()).read(ctx, opts.Control.ReadEvery); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Roles of the queues a Runner sends to, in a QueueError.
const (
	RoleTarget  = "target"
	RoleWork    = "work"
	RoleFailure = "failure"
	// RoleDeadLetter is a dead-letter queue that a redrive reads.
	RoleDeadLetter = "dead-letter"
)

// QueueError is a queue that cannot be used: it does not exist, or its
// attributes cannot be read. Role says which of the runner's queues it is.
// Its message names no package: s3ingest and redrive use it too, and a
// command or function names the flag or variable of the queue instead.
type QueueError struct {
	Role  string
	Queue string
	Err   error
}

// Error names the queue, its role and the reason.
func (e *QueueError) Error() string {
	return fmt.Sprintf("%s queue %s: %v", e.Role, e.Queue, e.Err)
}

// Unwrap returns the reason.
func (e *QueueError) Unwrap() error { return e.Err }

// target returns the sender for a run's target queue in mode: the
// overrides' queue, or the configured target, sending with the overrides'
// settings.
func (r *Runner) target(ctx context.Context, ov *worktask.Overrides, mode worktask.Mode) (*sqsbatch.Sender, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	url := ov.TargetQueueURL
	inFlight, attempts := int(ov.MaxInFlight.Value()), int(ov.MaxAttempts.Value())
	// One sender per mode too: its requests in flight size themselves to
	// its requests, and chunk mode's are a hundred times record mode's.
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d", url, mode, inFlight, attempts)
	if s, ok := r.targets[key]; ok {
		return s, nil
	}
	send := r.opts.Send
	send.MaxInFlight = cmp.Or(inFlight, send.MaxInFlight)
	send.MaxAttempts = cmp.Or(attempts, send.MaxAttempts)
	q := r.opts.Target
	if url != "" {
		q = sqsbatch.Queue{URL: url, MaxMessageSize: r.opts.Target.MaxMessageSize}
	}
	if q.URL == "" && q.Name == "" {
		return nil, errors.New("fanout: no target queue: configure one or name it in the request")
	}
	s, err := sqsbatch.New(ctx, r.sqs, q, send)
	if err != nil {
		return nil, &QueueError{Role: RoleTarget, Queue: cmp.Or(q.URL, q.Name), Err: err}
	}
	r.targets[key] = s
	if r.offload != nil {
		o := *r.offload
		o.MaxMessageSize = s.MaxMessageSize()
		if r.offloaders[s], err = sqsextended.NewOffloader(r.s3, o); err != nil {
			return nil, fmt.Errorf("fanout: offload: %w", err)
		}
	}
	return s, nil
}

// offloader returns the offloader of s's records, or nil without offload.
func (r *Runner) offloader(s *sqsbatch.Sender) *sqsextended.Offloader {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.offloaders[s]
}

// NewRunID returns a new random run id.
func NewRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// sender returns the sender of a run's records and the mode they are sent
// in, by its overrides.
func (r *Runner) sender(ctx context.Context, ov *worktask.Overrides) (*sqsbatch.Sender, worktask.Mode, error) {
	mode := cmp.Or(ov.Mode, r.opts.Mode)
	if ov.Ingest != nil {
		mode = worktask.ModeRecord
	}
	s, err := r.target(ctx, ov, mode)
	return s, mode, err
}
