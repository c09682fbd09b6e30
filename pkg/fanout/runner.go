package fanout

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultInlineMaxBytes   = 64 << 20
	DefaultDeadlineMargin   = 10 * time.Second
	DefaultChunkConcurrency = 4
)

// S3API is the part of the S3 client fanout uses. *s3.Client satisfies it.
type S3API interface {
	dataset.ListAPI
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

// Options configures a [Runner].
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
	// ReportS3URI (s3://bucket/prefix), when set, receives the run report:
	// a manifest per run and the failed ranges of each task (see
	// Manifest and FailedTask).
	ReportS3URI string
	// Plan configures chunking and formats.
	Plan dataset.PlanOptions
	// Mode is how records become messages; "" means ModeRecord.
	Mode Mode
	// Mapping names the record fields that become message parts.
	Mapping Mapping
	// Send configures the senders (MaxInFlight, MaxAttempts, ...).
	Send sqsbatch.Options
	// InlineMaxBytes is the largest dataset sent in the invocation that
	// planned it; larger ones go to the work queue. Zero means
	// DefaultInlineMaxBytes.
	InlineMaxBytes int64
	// DeadlineMargin is how long before the context's deadline a task
	// stops reading; zero means DefaultDeadlineMargin.
	DeadlineMargin time.Duration
	// ChunkConcurrency is how many chunks are read at once in one
	// invocation; zero means DefaultChunkConcurrency.
	ChunkConcurrency int
	// FailureWriter, when set, receives the failures as JSON Lines instead
	// of the failure queue or S3 (the CLI's local file).
	FailureWriter io.Writer
	// Progress, when set, is updated as records are read and sent, for a
	// progress display.
	Progress *Progress
	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger
}

// Progress counts a run's work as it happens. Its fields may be read at
// any time from another goroutine.
type Progress struct {
	BytesPlanned  atomic.Int64
	BytesRead     atomic.Int64
	RecordsRead   atomic.Int64
	RecordsFailed atomic.Int64
	Messages      atomic.Int64
}

// Stats counts what a run or task did.
type Stats struct {
	Objects       int   `json:"objects"`
	Chunks        int   `json:"chunks"`
	BytesPlanned  int64 `json:"bytesPlanned"`
	TasksQueued   int   `json:"tasksQueued"`
	RecordsRead   int64 `json:"recordsRead"`
	RecordsSent   int64 `json:"recordsSent"`
	RecordsFailed int64 `json:"recordsFailed"`
	Messages      int64 `json:"messages"`
	Requests      int64 `json:"requests"`
	Retries       int64 `json:"retries"`
	BytesSent     int64 `json:"bytesSent"`
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Objects += o.Objects
	s.Chunks += o.Chunks
	s.BytesPlanned += o.BytesPlanned
	s.TasksQueued += o.TasksQueued
	s.RecordsRead += o.RecordsRead
	s.RecordsSent += o.RecordsSent
	s.RecordsFailed += o.RecordsFailed
	s.Messages += o.Messages
	s.Requests += o.Requests
	s.Retries += o.Retries
	s.BytesSent += o.BytesSent
}

// Report is the answer to a request.
type Report struct {
	RunID string `json:"runId"`
	// Queued reports that the dataset went to the work queue as tasks.
	Queued bool `json:"queued"`
	Stats
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

	mu      sync.Mutex
	targets map[string]*sqsbatch.Sender
}

// New resolves the queues (once) and returns a Runner.
func New(ctx context.Context, s3c S3API, sqsc sqsbatch.API, opts Options) (*Runner, error) {
	if opts.InlineMaxBytes <= 0 {
		opts.InlineMaxBytes = DefaultInlineMaxBytes
	}
	if opts.DeadlineMargin <= 0 {
		opts.DeadlineMargin = DefaultDeadlineMargin
	}
	if opts.ChunkConcurrency <= 0 {
		opts.ChunkConcurrency = DefaultChunkConcurrency
	}
	if opts.Mode == "" {
		opts.Mode = ModeRecord
	}
	if opts.Mode != ModeRecord && opts.Mode != ModeChunk {
		return nil, fmt.Errorf("fanout: unknown mode %q (want record or chunk)", opts.Mode)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{s3: s3c, sqs: sqsc, opts: opts, log: log, targets: map[string]*sqsbatch.Sender{}}
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
	if opts.ReportS3URI != "" {
		r.report = &reporter{s3: s3c}
		if r.report.bucket, r.report.prefix, err = dataset.ParseS3URI(opts.ReportS3URI); err != nil {
			return nil, fmt.Errorf("fanout: run report: %w", err)
		}
	}
	if opts.Target.URL != "" || opts.Target.Name != "" {
		if _, err := r.target(ctx, &Overrides{}, opts.Mode); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Roles of the queues a Runner sends to, in a QueueError.
const (
	RoleTarget  = "target"
	RoleWork    = "work"
	RoleFailure = "failure"
)

// QueueError is a queue that cannot be used: it does not exist, or its
// attributes cannot be read. Role says which of the runner's queues it is.
type QueueError struct {
	Role  string
	Queue string
	Err   error
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("fanout: %s queue %s: %v", e.Role, e.Queue, e.Err)
}

// Unwrap returns the reason.
func (e *QueueError) Unwrap() error { return e.Err }

// chunkModeInFlight bounds the requests in flight per chunk in chunk mode,
// where each request may carry a whole MiB: memory stays bounded with
// several chunks read at once.
const chunkModeInFlight = 4

// target returns the sender for a run's target queue in mode: the
// overrides' queue, or the configured target, sending with the overrides'
// settings.
func (r *Runner) target(ctx context.Context, ov *Overrides, mode Mode) (*sqsbatch.Sender, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	url := ov.TargetQueueURL
	_, inFlight, attempts := ov.settings()
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d", url, mode, inFlight, attempts)
	if s, ok := r.targets[key]; ok {
		return s, nil
	}
	send := r.opts.Send
	send.MaxInFlight = cmp.Or(inFlight, send.MaxInFlight)
	send.MaxAttempts = cmp.Or(attempts, send.MaxAttempts)
	if mode == ModeChunk {
		send.MaxInFlight = min(cmp.Or(send.MaxInFlight, sqsbatch.DefaultMaxInFlight), chunkModeInFlight)
	}
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
	return s, nil
}

// NewRunID returns a new random run id.
func NewRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// Run lists and plans the dataset req names and sends it: inline when it
// is small enough, else as tasks on the work queue.
// A request that Validate refuses fails before anything is listed.
func (r *Runner) Run(ctx context.Context, req Request) (Report, error) {
	if err := req.Validate(); err != nil {
		return Report{RunID: req.RunID}, fmt.Errorf("fanout: bad request: %w", err)
	}
	return r.RunObjects(ctx, req.RunID, dataset.Objects(ctx, r.s3, req.Source), req.Overrides)
}

// RunObjects plans and sends objects as one run. S3 event notifications
// come in here, each object pinned to the notified version.
func (r *Runner) RunObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides) (Report, error) {
	at := time.Now().UTC()
	rep, err := r.runObjects(ctx, runID, objs, ov)
	if rerr := r.report.manifest(ctx, rep, at); err == nil {
		err = rerr
	}
	return rep, err
}

func (r *Runner) runObjects(ctx context.Context, runID string, objs iter.Seq2[dataset.Object, error], ov Overrides) (Report, error) {
	if runID == "" {
		runID = NewRunID()
	}
	rep := Report{RunID: runID}
	if err := ov.Validate(); err != nil {
		return rep, fmt.Errorf("fanout: bad request: %w", err)
	}
	raw, err := json.Marshal(ov)
	if err != nil {
		return rep, err
	}
	plan := r.opts.Plan
	if ov.Format != "" {
		plan.Format = ov.Format
	}
	if n, _, _ := ov.settings(); n > 0 {
		plan.ChunkSize = n
	}
	planner := dataset.NewPlanner(r.s3, plan)
	// Chunks are gathered while the dataset stays small enough to send
	// here; past that the rest of the listing streams to the work queue.
	var pending []worktask.Task
	var listErr error
	next, stop := iter.Pull2(objs)
	defer stop()
	for {
		obj, err, ok := next()
		if !ok {
			break
		}
		if err == nil {
			var chunks []dataset.Chunk
			chunks, err = planner.Plan(ctx, obj)
			for _, c := range chunks {
				pending = append(pending, worktask.Task{RunID: runID, Chunk: c, Overrides: raw})
			}
			rep.Objects++
			rep.Chunks += len(chunks)
			rep.BytesPlanned += obj.Size
			if p := r.opts.Progress; p != nil {
				p.BytesPlanned.Add(obj.Size)
			}
		}
		if err != nil {
			listErr = err
			break
		}
		if r.work != nil && rep.BytesPlanned > r.opts.InlineMaxBytes {
			rep.Queued = true
			break
		}
	}
	if !rep.Queued {
		if listErr != nil {
			return rep, listErr
		}
		st, rest, err := r.runInline(ctx, pending)
		rep.Stats.Add(st)
		if err == nil && len(rest) > 0 {
			// Out of time: what is left goes to the work queue.
			rep.Queued = true
			rep.TasksQueued, err = r.enqueue(ctx, slices.Values(rest))
		}
		return rep, err
	}
	tasks := func(yield func(worktask.Task) bool) {
		for _, t := range pending {
			if !yield(t) {
				return
			}
		}
		for {
			obj, err, ok := next()
			if !ok {
				return
			}
			var chunks []dataset.Chunk
			if err == nil {
				chunks, err = planner.Plan(ctx, obj)
			}
			if err != nil {
				listErr = err
				return
			}
			rep.Objects++
			rep.Chunks += len(chunks)
			rep.BytesPlanned += obj.Size
			for _, c := range chunks {
				if !yield(worktask.Task{RunID: runID, Chunk: c, Overrides: raw}) {
					return
				}
			}
		}
	}
	rep.TasksQueued, err = r.enqueue(ctx, tasks)
	if err == nil {
		err = listErr
	}
	return rep, err
}

// Enqueue sends tasks to the work queue, such as the continuation of a task
// that ran out of time.
func (r *Runner) Enqueue(ctx context.Context, tasks ...worktask.Task) error {
	_, err := r.enqueue(ctx, slices.Values(tasks))
	return err
}

// PastDeadline reports whether ctx's deadline is within the deadline margin,
// so that no new work should start.
func (r *Runner) PastDeadline(ctx context.Context) bool { return r.pastDeadline(ctx) }

// enqueue sends tasks to the work queue and returns how many it accepted.
func (r *Runner) enqueue(ctx context.Context, tasks iter.Seq[worktask.Task]) (int, error) {
	if r.work == nil {
		return 0, errors.New("fanout: the dataset needs the work queue, and none is configured")
	}
	var encErr error
	entries := func(yield func(sqsbatch.Entry) bool) {
		for t := range tasks {
			body, err := t.Marshal()
			if err != nil {
				encErr = err
				return
			}
			e := sqsbatch.Entry{ID: t.ID(), Body: body}
			if r.work.FIFO() {
				e.GroupID, e.DeduplicationID = t.ID(), t.ID()
			}
			if !yield(e) {
				return
			}
		}
	}
	res, err := r.work.Send(ctx, entries)
	if err == nil && encErr != nil {
		err = encErr
	}
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("fanout: %d tasks did not reach the work queue: %s", res.Failed, res.Failures[0])
	}
	return res.Sent, err
}

// runInline runs tasks here, a few at a time. Tasks it did not finish
// before the deadline come back as continuations.
func (r *Runner) runInline(ctx context.Context, tasks []worktask.Task) (Stats, []worktask.Task, error) {
	var (
		mu    sync.Mutex
		total Stats
		rest  []worktask.Task
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.ChunkConcurrency)
	for i, t := range tasks {
		if r.pastDeadline(ctx) {
			mu.Lock()
			rest = append(rest, tasks[i:]...)
			mu.Unlock()
			break
		}
		g.Go(func() error {
			res, err := r.RunTask(gctx, t)
			mu.Lock()
			defer mu.Unlock()
			total.Add(res.Stats)
			if res.Continuation != nil {
				rest = append(rest, *res.Continuation)
			}
			return err
		})
	}
	err := g.Wait()
	return total, rest, err
}

// pastDeadline reports whether ctx's deadline is within the margin.
func (r *Runner) pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < r.opts.DeadlineMargin
}

// TaskResult is what a task did.
type TaskResult struct {
	Stats
	// Continuation is the rest of the task, when it stopped before its
	// deadline; whoever runs the task must see that it is run.
	Continuation *worktask.Task
}

// RunTask reads one chunk and sends its records, from t.ResumeAt on. Records
// SQS refuses for good go to the failure output. It stops reading before the
// context's deadline and returns the rest as a continuation. An error means
// the task must be run again: records were neither sent nor put on the
// failure output.
func (r *Runner) RunTask(ctx context.Context, t worktask.Task) (TaskResult, error) {
	var res TaskResult
	ov, err := taskOverrides(t)
	if err != nil {
		return res, err
	}
	mode := cmp.Or(ov.Mode, r.opts.Mode)
	if ov.Ingest != nil {
		mode = ModeRecord
	}
	sender, err := r.target(ctx, &ov, mode)
	if err != nil {
		return res, err
	}
	mapping := r.opts.Mapping
	if ov.Mapping != (Mapping{}) {
		mapping = ov.Mapping
	}
	mapping = mapping.withDefaults()
	c := t.Chunk
	isJSON := c.Format != dataset.FormatText
	fifo := sender.FIFO()

	var (
		fails    failureBatch
		readErr  error
		resumeAt int64 = -1
	)
	fail := func(off int64, code, msg, body string) {
		fails.add(Failure{RunID: t.RunID, Source: "s3://" + c.Bucket + "/" + c.Key, Version: pinOf(c.Object), Offset: off,
			Code: code, Message: msg, SenderFault: true, Body: body})
	}
	finish := func(e *sqsbatch.Entry) {
		if !fifo {
			e.GroupID, e.DeduplicationID = "", ""
		} else if e.GroupID == "" {
			// FIFO needs a group: one per object keeps each object's
			// records in order.
			e.GroupID = c.Key
		}
	}
	ids := NewRecordIDs(c.Object)
	var ingest *ingestEncoder
	readOpts := records.Options{}
	if ov.Ingest != nil {
		ingest = r.newIngestEncoder(ctx, c, *ov.Ingest)
		// s3ingest reads with this bound: a longer record is unreadable.
		readOpts.MaxRecordSize = sender.MaxMessageSize()
	}
	entries := func(yield func(sqsbatch.Entry) bool) {
		packer := &chunkPacker{obj: c.Object, max: sender.MaxMessageSize()}
		for rec, err := range records.Read(ctx, r.s3, c, readOpts) {
			if err != nil {
				var re *records.RecordError
				if errors.As(err, &re) {
					res.RecordsRead++
					fail(re.Offset, "UnreadableRecord", re.Error(), "")
					continue
				}
				readErr = err
				return
			}
			if rec.Offset < t.ResumeAt {
				continue
			}
			if r.pastDeadline(ctx) {
				resumeAt = rec.Offset
				break
			}
			res.RecordsRead++
			if p := r.opts.Progress; p != nil {
				p.RecordsRead.Add(1)
				p.BytesRead.Add(int64(len(rec.Value)) + 1)
			}
			var e sqsbatch.Entry
			if ingest != nil {
				var eerr error
				if e, eerr = ingest.entry(rec, fifo); eerr != nil {
					fail(rec.Offset, "UnreadableRecord", eerr.Error(), string(rec.Value))
					continue
				}
				if !yield(e) {
					return
				}
				continue
			}
			if mode == ModeChunk {
				var full bool
				if e, full = packer.add(rec); !full {
					continue
				}
			} else {
				var merr error
				if e, merr = mapping.recordEntry(ids, c.Object, rec, isJSON); merr != nil {
					fail(rec.Offset, "UnmappableRecord", merr.Error(), string(rec.Value))
					continue
				}
			}
			finish(&e)
			if !yield(e) {
				return
			}
		}
		if mode == ModeChunk && packer.n > 0 {
			e := packer.flush()
			finish(&e)
			yield(e)
		}
	}
	sent, err := sender.Send(ctx, entries)
	res.Messages = int64(sent.Sent)
	res.Requests = int64(sent.Requests)
	res.Retries = int64(sent.Retries)
	res.BytesSent = sent.Bytes
	res.RecordsSent = res.RecordsRead - int64(fails.len())
	// Each failed entry is one record, or in chunk mode the records it
	// gathered.
	for _, f := range sent.Failures {
		off := int64(f.Seq)
		fmt.Sscan(f.Entry.ID, &off)
		fails.add(failureFrom(t.RunID, c.Object, f, off))
		if mode == ModeChunk {
			res.RecordsSent -= countOf(f.Entry)
		} else {
			res.RecordsSent--
		}
	}
	res.RecordsFailed = res.RecordsRead - res.RecordsSent
	if p := r.opts.Progress; p != nil {
		p.RecordsFailed.Add(res.RecordsFailed)
		p.Messages.Add(res.Messages)
	}
	if err != nil {
		return res, fmt.Errorf("fanout: send %s [%d,%d): %w", c.Object, c.Start, c.End, err)
	}
	if readErr != nil {
		return res, fmt.Errorf("fanout: read %s [%d,%d): %w", c.Object, c.Start, c.End, readErr)
	}
	if err := r.failures.write(ctx, t.RunID, t.ID(), fails.list); err != nil {
		return res, err
	}
	if err := r.report.failed(ctx, t, fails.list); err != nil {
		return res, err
	}
	if resumeAt >= 0 {
		next := t
		next.ResumeAt = resumeAt
		res.Continuation = &next
	}
	return res, nil
}

// countOf returns the number of records in a chunk-mode entry.
func countOf(e sqsbatch.Entry) int64 {
	var n int64 = 1
	if a, ok := e.Attributes[AttrCount]; ok && a.StringValue != nil {
		fmt.Sscan(*a.StringValue, &n)
	}
	return n
}

// ingestEncoder builds the entries of a chunk's records as s3ingest does
// (see IngestEncoding).
type ingestEncoder struct {
	obj   dataset.Object
	ids   *RecordIDs
	enc   *recordjson.Encoder
	group string
}

func (r *Runner) newIngestEncoder(ctx context.Context, c dataset.Chunk, ie IngestEncoding) *ingestEncoder {
	src := s3event.Object{Bucket: c.Bucket, Key: c.Key, ETag: c.ETag, VersionID: c.VersionID, EventTime: ie.EventTime}
	enc := recordjson.NewEncoder(c.Format, src, ie.Partitions, ie.FileMetadata, func(field string) {
		r.log.WarnContext(ctx, "records already have a field that s3ingest adds; the record's value is kept",
			"bucket", c.Bucket, "key", c.Key, "field", field)
	})
	return &ingestEncoder{obj: c.Object, ids: NewRecordIDs(c.Object), enc: enc, group: recordjson.GroupID(c.Bucket, c.Key)}
}

// entry returns the entry of rec; the error says why rec cannot be encoded.
func (ie *ingestEncoder) entry(rec records.Record, fifo bool) (sqsbatch.Entry, error) {
	body, err := ie.enc.Encode(ie.obj, rec)
	if err != nil {
		return sqsbatch.Entry{}, err
	}
	id := ie.ids.ID(rec.Offset)
	e := sqsbatch.Entry{
		ID:         entryID(rec.Offset),
		Body:       body,
		Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)},
	}
	if fifo {
		e.GroupID, e.DeduplicationID = ie.group, id
	}
	return e, nil
}
