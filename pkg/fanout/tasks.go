package fanout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// tracer makes the engine's spans; without a tracer provider (tracing
// off) they are no-ops.
var tracer = otel.Tracer("github.com/s3sqs/s3sqs/pkg/fanout")

// TaskResult is what a task did.
type TaskResult struct {
	Stats
	// BadRecords counts the records that could not be read or mapped; they
	// are on the failure output, and counted in RecordsFailed too.
	BadRecords int64
	// Continuation is the rest of the task, when it stopped before the
	// end of its chunk, or, for a chained task that sent its chunk, the
	// next chunk of its object (see worktask.Chain); whoever runs the task
	// must see that it is run.
	Continuation *worktask.Task
	// Stopped is why a task with a Continuation stopped: a read that
	// failed after it had read some records (their entries were sent). It
	// is nil when the task ran out of time.
	Stopped error
	// Err, when set, means the task must be run again: some of its records
	// were neither sent nor put on the failure output.
	Err error
}

// RunTask runs one task; see RunTasks.
func (r *Runner) RunTask(ctx context.Context, t worktask.Task) TaskResult {
	return r.RunTasks(ctx, []worktask.Task{t}, 0)[0]
}

// RunTasks reads tasks, up to concurrency at once (zero means the runner's
// ChunkConcurrency), and sends their records with one sender per target
// queue, so that the records of small tasks share full requests. Records SQS
// refuses for good, and records that cannot be read or mapped, go to the
// failure output. Results are in the order of tasks.
//
// Work stops at ctx's end: a task not finished then returns the rest of its
// chunk as a continuation. What was read is sent until
// partialbatch.SendContext(ctx) ends, which the Lambda handlers set a little
// later than ctx.
func (r *Runner) RunTasks(ctx context.Context, tasks []worktask.Task, concurrency int) []TaskResult {
	results := make([]TaskResult, len(tasks))
	var groups [][]*taskRun
	bySender := map[*sqsbatch.Sender]int{}
	for i, t := range tasks {
		tr, err := r.prepare(ctx, i, t)
		if err == nil {
			err = r.claim(ctx, tr)
		}
		if errors.Is(err, claims.ErrDone) {
			r.log.InfoContext(ctx, "task skipped: another delivery of it has run", "chunk", t.Chunk.URI(), "task", t.ID())
			results[i].TasksSkipped = 1
			// The delivery that ran it may have ended before its chain's
			// next link was queued.
			if next, ok := t.Next(); ok {
				results[i].Continuation = &next
			}
			continue
		}
		if errors.Is(err, claims.ErrHeld) {
			// Not a success: this may be the holder's own message, seen
			// again after its visibility timeout, and the holder may still
			// fail. It comes back, and then finds the task done or
			// released (as Powertools' idempotency does with a record in
			// progress).
			err = fmt.Errorf("fanout: task %s is being run by another delivery; this one comes back later: %w", t.ID(), err)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		g, ok := bySender[tr.sender]
		if !ok {
			g = len(groups)
			bySender[tr.sender] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], tr)
	}
	for _, runs := range groups {
		r.runGroup(ctx, runs, cmp.Or(concurrency, r.opts.ChunkConcurrency))
		for _, tr := range runs {
			results[tr.index] = r.finish(ctx, tr)
		}
	}
	return results
}

// taskRun is one task of RunTasks and what became of it. The reader
// goroutine writes it until it is done; the send loop then only counts
// consumed, and the send's failures are charged after both end.
type taskRun struct {
	index      int // in RunTasks' tasks
	groupIndex int // in its group, which its entries' ids carry
	task       worktask.Task
	sender     *sqsbatch.Sender
	encode     func(rec records.Record) (sqsbatch.Entry, error)
	packer     *chunkPacker // chunk mode
	offload    *sqsextended.Offloader

	// from is where the read starts: the task's ResumeAt, or later where
	// an earlier attempt's claim says it stopped.
	from     int64
	claim    *claims.Claim
	res      TaskResult
	fails    []Failure
	started  bool
	resumeAt int64 // -1: the task finished its chunk
	readErr  error
	stopped  error // why the read stopped at resumeAt, if not for the deadline
	produced int
	consumed int
	// ingest is set for s3ingest's objects (see IngestEncoding).
	ingest bool
	// unaccepted is the offset of the first record that the send did not
	// accept because it stopped (unread, unsent, or unanswered), or -1.
	// The task's claim is released there, so that a task whose records
	// were all accepted is done and the others resume where they must.
	unaccepted int64
	// only, when set, is the offsets of the only records to send
	// (RunRecords), and last the highest of them; found collects those
	// that start a record of the chunk.
	only  map[int64]bool
	last  int64
	found map[int64]bool
}

// prepare reads a task's overrides and builds how its records become
// entries.
func (r *Runner) prepare(ctx context.Context, index int, t worktask.Task) (*taskRun, error) {
	ov := overridesOf(t.Overrides)
	sender, mode, err := r.sender(ctx, &ov)
	if err != nil {
		return nil, err
	}
	tr := &taskRun{index: index, task: t, sender: sender, resumeAt: -1, unaccepted: -1, from: t.ResumeAt, offload: r.offloader(sender)}
	c, fifo := t.Chunk, sender.FIFO()
	switch {
	case ov.Ingest != nil:
		tr.ingest = true
		tr.encode = ingestEntries(r.ingestEncoder(ctx, c, *ov.Ingest), c.Object, fifo)
	case mode == ModeChunk:
		tr.packer = &chunkPacker{obj: c.Object, max: sender.MaxMessageSize()}
	default:
		mapping := r.opts.Mapping
		if ov.Mapping != (Mapping{}) {
			mapping = ov.Mapping
		}
		tr.encode = mappedEntries(mapping, c, fifo)
	}
	return tr, nil
}

// sender returns the sender of a run's records and the mode they are sent
// in, by its overrides.
func (r *Runner) sender(ctx context.Context, ov *Overrides) (*sqsbatch.Sender, Mode, error) {
	mode := cmp.Or(ov.Mode, r.opts.Mode)
	if ov.Ingest != nil {
		mode = ModeRecord
	}
	s, err := r.target(ctx, ov, mode)
	return s, mode, err
}

// mappedEntries returns the record-mode encoder of a chunk's records: the
// mapping's body, attributes, group and deduplication id; on a FIFO queue a
// record without a group goes in its object's (see GroupID).
func mappedEntries(mapping Mapping, c dataset.Chunk, fifo bool) func(records.Record) (sqsbatch.Entry, error) {
	rm := newRecordMapper(mapping, c.Object, c.Format != dataset.FormatText)
	group := GroupID(c.Object)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		e, err := rm.entry(rec)
		if err != nil {
			return e, err
		}
		switch {
		case !fifo:
			e.GroupID, e.DeduplicationID = "", ""
		case e.GroupID == "":
			e.GroupID = group
		}
		return e, nil
	}
}

// ingestEntries returns the encoder of an object's records as s3ingest
// sends them (see IngestEncoding).
func ingestEntries(enc *recordjson.Encoder, obj dataset.Object, fifo bool) func(records.Record) (sqsbatch.Entry, error) {
	ids := NewRecordIDs(obj)
	group := GroupID(obj)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		body, err := enc.Encode(obj, rec)
		if err != nil {
			return sqsbatch.Entry{}, err
		}
		id := ids.ID(rec.Offset)
		e := sqsbatch.Entry{Body: body, Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)}}
		if fifo {
			e.GroupID, e.DeduplicationID = group, id
		}
		return e, nil
	}
}

// ingestEncoder returns the encoder of a chunk's records as s3ingest sends
// them (see IngestEncoding).
func (r *Runner) ingestEncoder(ctx context.Context, c dataset.Chunk, ie IngestEncoding) *recordjson.Encoder {
	src := s3event.Object{Bucket: c.Bucket, Key: c.Key, ETag: c.ETag, VersionID: c.VersionID, EventTime: ie.EventTime}
	return recordjson.NewEncoder(c.Format, src, ie.Partitions, ie.FileMetadata, func(field string) {
		r.log.WarnContext(ctx, "records already have a field that s3ingest adds; the record's value is kept",
			"object", c.URI(), "field", field)
	})
}

// pending is an entry on its way to the sender, with its task.
type pending struct {
	entry  sqsbatch.Entry
	run    *taskRun
	offset int64 // of its first record
	weight int64 // of the pipe's bytes it holds
}

// errSendStopped ends the reads when the send they feed has stopped.
var errSendStopped = errors.New("the send stopped")

// runGroup reads runs (tasks with one sender), up to concurrency at once,
// and streams their entries through one Send.
func (r *Runner) runGroup(ctx context.Context, runs []*taskRun, concurrency int) {
	work := ctx
	readCtx, stopReading := context.WithCancelCause(partialbatch.SendContext(ctx))
	defer stopReading(nil)
	sender := runs[0].sender
	for i, tr := range runs {
		tr.groupIndex = i
	}
	pipe := newEntryPipe()
	go func() {
		var g errgroup.Group
		g.SetLimit(concurrency)
		for _, lane := range lanes(runs, sender.FIFO()) {
			if work.Err() != nil || readCtx.Err() != nil {
				break // not started: their whole chunk is their continuation
			}
			g.Go(func() error {
				for i, tr := range lane {
					if work.Err() != nil || readCtx.Err() != nil {
						return nil
					}
					tr.started = true
					r.read(work, readCtx, tr, pipe)
					switch {
					case tr.readErr != nil:
						// The object's later chunks must not overtake
						// this one's retry: they fail with it.
						for _, later := range lane[i+1:] {
							later.readErr = fmt.Errorf("an earlier chunk of the object failed: %w", tr.readErr)
						}
						return nil
					case tr.resumeAt >= 0:
						return nil // the lane's later tasks keep their place after its continuation
					}
				}
				return nil
			})
		}
		g.Wait()
		pipe.close()
	}()
	entries := func(yield func(sqsbatch.Entry) bool) {
		for p := range pipe.all() {
			p.run.consumed++
			if !yield(p.entry) {
				return
			}
		}
	}
	res, err := sender.Send(partialbatch.SendContext(ctx), entries)
	stopReading(errSendStopped)
	// What is left in the pipe was read and never sent. It is noted once
	// the pipe is closed, when the readers, which note where they were
	// cut, have all returned.
	var unsent []pending
	for p := range pipe.all() {
		p.entry = sqsbatch.Entry{}
		unsent = append(unsent, p)
	}
	for _, p := range unsent {
		p.run.notAccepted(p.offset)
	}
	// The send's totals go to the first task; what failed, to its own.
	runs[0].res.Requests += int64(res.Requests)
	runs[0].res.Retries += int64(res.Retries)
	runs[0].res.BytesSent += res.Bytes
	for _, f := range res.Failures {
		ref, ok := parseRef(f.Entry.ID)
		if !ok || ref.task < 0 || ref.task >= len(runs) {
			continue
		}
		tr := runs[ref.task]
		tr.res.RecordsFailed += int64(ref.count)
		tr.res.Messages--
		if p := r.opts.Progress; p != nil {
			p.Messages.Add(-1)
		}
		if err != nil && (f.Stopped() || f.Code == sqsbatch.CodeGroupFailed) {
			// Not the record's fault (its send stopped, or an entry of
			// its FIFO group failed with it): it is sent again by the
			// task's next attempt, not put on the failure output.
			tr.notAccepted(ref.offset)
			continue
		}
		tr.fails = append(tr.fails, failureFrom(tr.task.RunID, tr.task.Chunk.Object, f, ref.offset))
	}
	if err != nil {
		// Each task is settled on its own: one whose records were all
		// accepted is done (or continues, as it would have); the others
		// fail, those not started too (a continuation would only meet the
		// same stop, and a failed task comes back until its queue's DLQ
		// takes it), and resume at their first record not accepted.
		for _, tr := range runs {
			if !tr.started || tr.unaccepted >= 0 || tr.readErr != nil {
				tr.readErr = cmp.Or(tr.readErr, fmt.Errorf("send to %s: %w", sender.QueueURL(), err))
			}
		}
	}
}

// notAccepted notes that the record at offset, and so the task from there
// on, was not accepted by a send that stopped.
func (tr *taskRun) notAccepted(offset int64) {
	if tr.unaccepted < 0 || offset < tr.unaccepted {
		tr.unaccepted = offset
	}
}

// cut ends tr's read because readCtx ended (the send stopped): the record
// at offset, and any the packer holds, were not handed to the send.
func (tr *taskRun) cut(readCtx context.Context, offset int64) {
	tr.readErr = context.Cause(readCtx)
	if p := tr.packer; p != nil && p.n > 0 {
		offset = min(offset, p.first)
	}
	tr.notAccepted(offset)
}

// unwritten notes that tr's failures could not be written: the next
// attempt must start at the first of them, to fail it again.
func (tr *taskRun) unwritten() {
	for _, f := range tr.fails {
		tr.notAccepted(f.Offset)
	}
}

// releaseAt is where the next attempt of a failed task starts: its first
// record that a stopped send did not accept, else where this one started.
func (tr *taskRun) releaseAt() int64 {
	return max(tr.from, tr.unaccepted)
}

// lanes are the runs that are read one after another. On a FIFO queue the
// tasks of one object share a lane, in order, so that its records keep
// their order in its group; elsewhere each task is a lane of its own.
func lanes(runs []*taskRun, fifo bool) [][]*taskRun {
	var out [][]*taskRun
	byObject := map[dataset.Object]int{}
	for _, tr := range runs {
		obj := tr.task.Chunk.Object
		if i, ok := byObject[obj]; ok && fifo {
			out[i] = append(out[i], tr)
			continue
		}
		byObject[obj] = len(out)
		out = append(out, []*taskRun{tr})
	}
	return out
}

// read reads tr's chunk and hands its entries to pipe, until the chunk ends,
// work ends (the rest becomes a continuation), the read fails (after
// dataset.Reader's resumes; the rest becomes a continuation if a record
// was read, otherwise the task fails) or readCtx ends (the send stopped,
// and the task fails).
func (r *Runner) read(work, readCtx context.Context, tr *taskRun, pipe *entryPipe) {
	t, c := tr.task, tr.task.Chunk
	// reserved is the room in pipe of the chunk-mode message being packed;
	// a message not handed on gives it back.
	var reserved int64
	defer func() { pipe.release(reserved) }()
	hand := func(e sqsbatch.Entry, held span) bool {
		weight := reserved
		reserved = 0
		if tr.offload != nil {
			var ok bool
			if e, ok = r.offloadEntry(readCtx, tr, e, held); !ok {
				pipe.release(weight)
				return tr.readErr == nil
			}
		}
		e.ID = entryRef{task: tr.groupIndex, offset: held.offset, count: held.count}.id()
		if pipe.put(readCtx, pending{entry: e, run: tr, offset: held.offset, weight: weight}) != nil {
			tr.cut(readCtx, held.offset)
			return false
		}
		tr.produced++
		tr.res.Messages++
		// Counted as the message goes to the send, not when the task
		// ends, so that the progress line's rate is live.
		if p := r.opts.Progress; p != nil {
			p.Messages.Add(1)
		}
		return true
	}
	// refuse puts a record that cannot be sent on the failure output; fail
	// one that cannot be read or mapped, a bad record.
	refuse := func(off int64, code, msg, body string) {
		tr.fails = append(tr.fails, Failure{RunID: t.RunID, Source: c.URI(), Version: c.Pin(), Offset: off, RecordID: RecordID(c.Object, off),
			Code: code, Message: msg, SenderFault: true, Body: body})
		tr.res.RecordsFailed++
	}
	fail := func(off int64, code, msg, body string) {
		refuse(off, code, msg, body)
		tr.res.BadRecords++
	}
	// A read still waiting on S3 when work ends stops then too, not when
	// readCtx ends: otherwise it holds back, until the send's end, the
	// entries other tasks read (the send waits for it to fill its last
	// request), and they fail with it. The rest of its chunk is its
	// continuation, from next.
	ioCtx, stopIO := context.WithCancelCause(readCtx)
	defer stopIO(nil)
	// A span per task (a no-op unless the function traces): its reads of S3
	// are its children.
	_, taskSpan := tracer.Start(work, "fanout.task", trace.WithAttributes(
		attribute.String("s3sqs.object", c.URI()), attribute.String("s3sqs.task", t.ID()),
		attribute.Int64("s3sqs.chunk.start", c.Start), attribute.Int64("s3sqs.chunk.end", c.End), attribute.Int64("s3sqs.resume_at", tr.from)))
	ioCtx = trace.ContextWithSpan(ioCtx, taskSpan)
	defer func() {
		taskSpan.SetAttributes(attribute.Int64("s3sqs.records_read", tr.res.RecordsRead), attribute.Int("s3sqs.messages", tr.produced))
		if tr.readErr != nil {
			taskSpan.RecordError(tr.readErr)
			taskSpan.SetStatus(codes.Error, tr.readErr.Error())
		}
		taskSpan.End()
	}()
	defer context.AfterFunc(work, func() { stopIO(context.Cause(work)) })()
	next := tr.from
	for rec, err := range records.Read(ioCtx, r.s3, c, records.Options{}) {
		if err != nil {
			var re *records.RecordError
			if errors.As(err, &re) {
				if re.Offset >= tr.from && tr.wants(re.Offset) {
					tr.res.RecordsRead++
					fail(re.Offset, "UnreadableRecord", re.Error(), "")
					next = re.Offset + 1
				}
				continue
			}
			code, permanent := unreadable(err, tr.ingest)
			switch {
			case readCtx.Err() != nil:
				tr.cut(readCtx, next)
				return
			case work.Err() != nil:
				tr.resumeAt = next
			case permanent:
				// Reading the same bytes again gives the same error: the
				// rest of the chunk is not continued but put on the
				// failure output, as one failed record at the offset the
				// task would have resumed from (just after the last record
				// read), and the task ends.
				at := max(next, c.Start)
				tr.res.RecordsRead++
				fail(at, code, fmt.Sprintf("the records of %s from offset %d to the end of the chunk cannot be read: %v", c.Object, at, err), "")
				tr.res.ObjectsFailed = 1
			case next > tr.from && !errors.Is(err, dataset.ErrChanged) && !errors.Is(err, dataset.ErrNotFound):
				// What was read is sent; the rest is a continuation
				// that starts at the first record not read, instead of
				// this task running again from its start.
				tr.resumeAt, tr.stopped = next, err
			default:
				tr.readErr = err
				return
			}
			break
		}
		if rec.Offset < tr.from {
			continue
		}
		if tr.only != nil {
			if rec.Offset > tr.last {
				break // the records asked for are behind
			}
			if !tr.wants(rec.Offset) {
				continue
			}
		}
		if work.Err() != nil {
			tr.resumeAt = rec.Offset
			break
		}
		tr.res.RecordsRead++
		next = rec.Offset + 1
		if p := r.opts.Progress; p != nil {
			p.RecordsRead.Add(1)
			p.BytesRead.Add(int64(len(rec.Value)) + 1)
		}
		if p := tr.packer; p != nil {
			if at := sqsbatch.InvalidCharAt(rec.Value); at >= 0 && !r.opts.Send.ReplaceInvalidCharacters {
				// SQS would refuse the whole message for this record:
				// it goes to the failure output alone.
				refuse(rec.Offset, string(sqsbatch.RuleInvalidCharacters),
					fmt.Sprintf("the record has a character SQS rejects at byte %d", at), string(rec.Value))
				continue
			}
			if p.n > 0 && !p.fits(rec) && !hand(p.flush()) {
				return
			}
			if p.n == 0 {
				// The message this record starts takes its room in the
				// pipe now, before it is packed.
				var err error
				if reserved, err = pipe.reserve(readCtx, p.max); err != nil {
					tr.cut(readCtx, rec.Offset)
					return
				}
			}
			p.add(rec)
			continue
		}
		e, err := tr.encode(rec)
		if err != nil {
			fail(rec.Offset, "UnmappableRecord", err.Error(), string(rec.Value))
			continue
		}
		if !hand(e, span{offset: rec.Offset, count: 1}) {
			return
		}
	}
	if tr.packer != nil && tr.packer.n > 0 {
		// What was gathered before a deadline is sent too: the
		// continuation starts after it.
		hand(tr.packer.flush())
	}
}

// unreadable returns the failure code of a read error that no retry
// fixes, the same bytes giving the same error: a corrupt or truncated
// object, one changed since it was planned, or a compressed one planned as
// byte ranges. ok is false for any other error, and, for s3ingest's
// objects (ingest), for a changed one: the notified version is then
// superseded, and a later notification names the new one.
func unreadable(err error, ingest bool) (code string, ok bool) {
	var enc *dataset.EncodingError
	switch {
	case errors.Is(err, dataset.ErrCorrupt):
		return "CorruptObject", true
	case errors.Is(err, dataset.ErrChanged):
		return "ObjectChanged", !ingest
	case errors.As(err, &enc):
		return "ObjectEncoded", true
	}
	return "", false
}

// wants reports whether the record at offset is to be sent, and notes it
// as found when only some records are.
func (tr *taskRun) wants(offset int64) bool {
	if tr.only == nil {
		return true
	}
	if !tr.only[offset] {
		return false
	}
	tr.found[offset] = true
	return true
}

// RunRecords runs t for the records at offsets only, as RunTasks runs a
// task: they are encoded by t's overrides, carry the record ids and FIFO
// group and deduplication ids the engine gives them, and go to t's target;
// those SQS refuses, or that cannot be read or mapped, go to the failure
// output. It is how a redrive sends again only the failed records that a
// run report or the failure output lists. The claims store is not asked:
// these records are not the task.
//
// In chunk mode an offset is the first record of a message, whose other
// records a run report does not list: the chunk is then read from the first
// of offsets to its end, and messages packed from there again hold the same
// records, and the same record ids, as the ones that failed when the
// target's size limit is the same.
//
// missing lists, in record mode, the offsets at which no record of the
// chunk starts (or only before t.ResumeAt): the offset is not a record's,
// or the object is not what the caller took it for. It is nil when the
// task failed (res.Err) or stopped at ctx's end (res.Continuation).
func (r *Runner) RunRecords(ctx context.Context, t worktask.Task, offsets []int64) (res TaskResult, missing []int64) {
	if len(offsets) == 0 {
		return TaskResult{}, nil
	}
	tr, err := r.prepare(ctx, 0, t)
	if err != nil {
		return TaskResult{Err: err}, nil
	}
	first := slices.Min(offsets)
	tr.from = max(tr.from, first)
	if tr.packer == nil {
		tr.only, tr.found = make(map[int64]bool, len(offsets)), make(map[int64]bool, len(offsets))
		for _, o := range offsets {
			tr.only[o] = true
		}
		tr.last = slices.Max(offsets)
	}
	r.runGroup(ctx, []*taskRun{tr}, 1)
	res = r.result(ctx, tr)
	if tr.only != nil && res.Err == nil && res.Continuation == nil {
		for _, o := range offsets {
			if !tr.found[o] {
				missing = append(missing, o)
			}
		}
		slices.Sort(missing)
		missing = slices.Compact(missing)
	}
	return res, missing
}

// offloadEntry returns the entry to send for e: e itself, or its pointer
// once its body is in S3 (see Options.OffloadS3URI). When the body cannot
// be written, its records go to the failure output (code OffloadFailed),
// or, when ctx ended, the task fails; ok is then false.
func (r *Runner) offloadEntry(ctx context.Context, tr *taskRun, e sqsbatch.Entry, held span) (out sqsbatch.Entry, ok bool) {
	id := aws.ToString(e.Attributes[AttrRecordID].StringValue)
	out, offloaded, err := tr.offload.Entry(ctx, id, e)
	switch {
	case err != nil && ctx.Err() != nil:
		tr.cut(ctx, held.offset)
		return e, false
	case err != nil:
		var invalid *sqsextended.InvalidEntryError
		c := tr.task.Chunk
		tr.fails = append(tr.fails, Failure{RunID: tr.task.RunID, Source: c.URI(), Version: c.Pin(), Offset: held.offset, RecordID: id,
			Code: "OffloadFailed", Message: err.Error(), SenderFault: errors.As(err, &invalid)})
		tr.res.RecordsFailed += int64(held.count)
		return e, false
	case offloaded:
		tr.res.RecordsOffloaded += int64(held.count)
	}
	return out, true
}

// finish writes a task's failures to the failure output and the run report,
// and returns its result.
func (r *Runner) finish(ctx context.Context, tr *taskRun) TaskResult {
	res := r.result(ctx, tr)
	if res.Err == nil && res.Continuation == nil {
		if next, ok := tr.task.Next(); ok {
			res.Continuation = &next
		}
	}
	r.settle(ctx, tr, res)
	return res
}

// runChains runs tasks as RunTasks does, and then, while ctx lasts, the
// next links of the chained ones that sent their chunk (see
// worktask.Chain), here rather than through the work queue. Each result is
// its task's chain's: the stats of its links summed, and as Continuation
// what is left of the chain. A link after the first that fails is handed
// back as that Continuation, to be queued and retried on its own, so that
// the chunks before it are not sent again.
func (r *Runner) runChains(ctx context.Context, tasks []worktask.Task) []TaskResult {
	results := r.RunTasks(ctx, tasks, 0)
	ran := slices.Clone(tasks)
	for ctx.Err() == nil {
		var links []worktask.Task
		var of []int
		for i, res := range results {
			if c := res.Continuation; res.Err == nil && c != nil && c.Chunk.ID() != ran[i].Chunk.ID() {
				links = append(links, *c)
				of = append(of, i)
			}
		}
		if len(links) == 0 {
			break
		}
		for j, lr := range r.RunTasks(ctx, links, 0) {
			i := of[j]
			res := &results[i]
			res.Stats.Add(lr.Stats)
			res.BadRecords += lr.BadRecords
			res.Continuation, res.Stopped = lr.Continuation, lr.Stopped
			if lr.Err != nil {
				r.log.WarnContext(ctx, "a chained chunk failed; it is queued to run again on its own", "chunk", links[j].Chunk.URI(), "task", links[j].ID(), "error", lr.Err)
				res.Continuation = &links[j]
			}
			ran[i] = links[j]
		}
	}
	return results
}

func (r *Runner) result(ctx context.Context, tr *taskRun) TaskResult {
	res := tr.res
	t, c := tr.task, tr.task.Chunk
	res.RecordsSent = res.RecordsRead - res.RecordsFailed
	if p := r.opts.Progress; p != nil {
		p.RecordsFailed.Add(res.RecordsFailed)
	}
	sendCtx := partialbatch.SendContext(ctx)
	switch {
	case tr.readErr != nil:
		res.Err = fmt.Errorf("fanout: %s [%d,%d): %w", c.Object, c.Start, c.End, tr.readErr)
		if tr.claim != nil && tr.releaseAt() > tr.from {
			// The next attempt resumes after the records this one
			// settled: those of them that failed are put on the failure
			// output now, or nobody would.
			if err := r.writeFailures(sendCtx, tr, tr.releaseAt()); err != nil {
				r.log.WarnContext(ctx, "failures of a task that fails not written; it is sent again from its first failed record", "task", t.ID(), "error", err)
				tr.unwritten()
			}
		}
		return res
	case !tr.started:
		res.Continuation = &tr.task
		return res
	case tr.consumed < tr.produced:
		res.Err = fmt.Errorf("fanout: %s [%d,%d): %d records were not sent: the send stopped", c.Object, c.Start, c.End, tr.produced-tr.consumed)
		return res
	}
	if err := r.writeFailures(sendCtx, tr, -1); err != nil {
		// The records before the first failed one are settled: the next
		// attempt starts there, to put it on the failure output.
		tr.unwritten()
		res.Err = err
		return res
	}
	if tr.resumeAt >= 0 {
		next := t
		next.ResumeAt = tr.resumeAt
		res.Continuation = &next
		res.Stopped = tr.stopped
		if tr.stopped != nil {
			r.log.WarnContext(ctx, "read failed part-way; the records read were sent, the rest of the chunk continues from the first record not read",
				"object", c.URI(), "chunk", t.ID(), "resumeAt", tr.resumeAt, "error", tr.stopped)
		}
	}
	return res
}

// writeFailures puts tr's failures before offset before (all of them when
// before is negative) on the failure output and in the run report, under
// the name of this attempt: the task and where it started, so that the
// failures of an attempt that resumed part-way do not replace those of
// the attempt before it.
func (r *Runner) writeFailures(ctx context.Context, tr *taskRun, before int64) error {
	fs := tr.fails
	if before >= 0 {
		fs = slices.DeleteFunc(slices.Clone(fs), func(f Failure) bool { return f.Offset >= before })
	}
	name := attemptName(tr.task, tr.from)
	if err := r.failures.write(ctx, tr.task.RunID, name, fs); err != nil {
		return err
	}
	return r.report.failed(ctx, tr.task, name, fs)
}

// attemptName names one attempt at task t that started reading at from:
// the id of t resumed there, which is t's own id unless the attempt
// resumed from its claim.
func attemptName(t worktask.Task, from int64) string {
	t.ResumeAt = from
	return t.ID()
}

// span is the records an entry carries: from offset, count of them.
type span struct {
	offset int64
	count  int
}

// entryRef leads a failed entry back to its task and records: the entry's
// id is the task's place in its group, the offset of its first record and
// the number of records it carries.
type entryRef struct {
	task   int
	offset int64
	count  int
}

func (e entryRef) id() string {
	return strconv.Itoa(e.task) + ":" + strconv.FormatInt(e.offset, 10) + ":" + strconv.Itoa(e.count)
}

func parseRef(id string) (entryRef, bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 {
		return entryRef{}, false
	}
	task, err1 := strconv.Atoi(parts[0])
	off, err2 := strconv.ParseInt(parts[1], 10, 64)
	n, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return entryRef{}, false
	}
	return entryRef{task: task, offset: off, count: n}, true
}
