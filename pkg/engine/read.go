package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// reader reads one task's chunk on its own goroutine: it owns its taskRun
// until read returns it. Its contexts: work ends the reading of new
// records (the rest becomes a continuation); readCtx ends when the send
// stops (the task fails); ioCtx, derived from readCtx, ends with work too,
// so that a read still waiting on S3 when work ends stops then.
type reader struct {
	r *Runner
	// client is what the chunk is read with: the runner's, or the GET
	// opened ahead for the task in front of it (see aheadSet).
	client        dataset.GetAPI
	tr            *taskRun
	work, readCtx context.Context
	// ioCtx ends with readCtx or work: what the gate waits with.
	ioCtx  context.Context
	pipe   *entryPipe
	packer *chunkPacker // chunk mode
	// reserved is the room in pipe of the chunk-mode message being packed;
	// a message not handed on gives it back.
	reserved int64
	// next is the offset just after the last record read: where the task
	// resumes after a failed read.
	next int64
}

// step says how the read goes on after a record or an error.
type step int

const (
	more step = iota // read on
	stop             // end the read, sending what the packer holds
	halt             // end the read at once: the task fails or was cut
)

// read reads s's chunk, the group-th task of its group, and hands its
// entries to pipe, until the chunk ends, work ends (the rest becomes a
// continuation), the read fails (after dataset.Reader's resumes; the rest
// becomes a continuation if a record was read, otherwise the task fails)
// or readCtx ends (the send stopped, and the task fails).
func (r *Runner) read(work, readCtx context.Context, s *taskSpec, group int, pipe *entryPipe) *taskRun {
	tr := newTaskRun(s, group)
	tr.started = true
	rd := &reader{r: r, tr: tr, work: work, readCtx: readCtx, pipe: pipe, next: s.from, client: r.s3}
	defer s.ahead.done(group)
	if s.chunkMax > 0 {
		rd.packer = &chunkPacker{obj: s.task.Chunk.Object, max: s.chunkMax, fifo: s.sender.FIFO(), group: s.group}
	}
	defer func() { pipe.release(rd.reserved) }()
	// A read still waiting on S3 when work ends stops then too, not when
	// readCtx ends: otherwise it holds back, until the send's end, the
	// entries other tasks read (the send waits for it to fill its last
	// request), and they fail with it. The rest of its chunk is its
	// continuation, from next.
	ioCtx, stopIO := context.WithCancelCause(readCtx)
	defer stopIO(nil)
	ioCtx, end := rd.span(ioCtx)
	defer end()
	// The GETs this read opens ahead for the next tasks end with readCtx,
	// and their spans are under this task's: theirs have not begun.
	if c := s.ahead.start(work, trace.ContextWithSpan(readCtx, trace.SpanFromContext(ioCtx)), group); c != nil {
		rd.client = c
	}
	rd.ioCtx = ioCtx
	defer context.AfterFunc(work, func() { stopIO(context.Cause(work)) })()
	if rd.records(ioCtx) == stop && rd.packer != nil && rd.packer.n > 0 {
		// What was gathered before a deadline is sent too: the
		// continuation starts after it.
		rd.hand(rd.packer.flush())
	}
	return tr
}

// span starts the task's span (a no-op unless the function traces), whose
// children are its reads of S3, and returns ioCtx carrying it and the
// function that ends it.
func (rd *reader) span(ioCtx context.Context) (context.Context, func()) {
	tr, c := rd.tr, rd.tr.task.Chunk
	_, taskSpan := tracer.Start(rd.work, "fanout.task", trace.WithAttributes(
		attribute.String("s3sqs.object", c.URI()), attribute.String("s3sqs.task", tr.task.ID()),
		attribute.Int64("s3sqs.chunk.start", c.Start), attribute.Int64("s3sqs.chunk.end", c.End), attribute.Int64("s3sqs.resume_at", tr.from)))
	return trace.ContextWithSpan(ioCtx, taskSpan), func() {
		taskSpan.SetAttributes(attribute.Int64("s3sqs.records_read", tr.res.RecordsRead), attribute.Int("s3sqs.messages", tr.produced))
		if tr.readErr != nil {
			taskSpan.RecordError(tr.readErr)
			taskSpan.SetStatus(codes.Error, tr.readErr.Error())
		}
		taskSpan.End()
	}
}

// records reads the chunk's records and hands on their entries. It
// returns how the read ended: stop or halt.
func (rd *reader) records(ioCtx context.Context) step {
	tr := rd.tr
	if tr.notify {
		if tr.task.Versions {
			return rd.versions(ioCtx)
		}
		// The object's notification is its one record; the object is not
		// read.
		if tr.from > tr.task.Chunk.Start {
			return stop
		}
		return rd.record(records.Record{Offset: tr.task.Chunk.Start})
	}
	for rec, err := range records.Read(ioCtx, rd.client, tr.task.Chunk, records.Options{}) {
		var next step
		var re *records.RecordError
		switch {
		case errors.As(err, &re):
			if re.Offset >= tr.from && tr.wants(re.Offset) {
				tr.res.RecordsRead++
				rd.fail(re.Offset, "UnreadableRecord", re.Error(), "")
				rd.next = re.Offset + 1
			}
			continue
		case err != nil:
			next = rd.readFailed(err)
		default:
			next = rd.record(rec)
		}
		if next != more {
			return next
		}
	}
	return stop
}

// bytesOf is what rec counts toward the bytes read: the record and its
// line end; in notification mode the bytes its notification announces
// (the object's, or the version's), as planning counted them, so that a
// replay's progress goes from 0 to the bytes planned as it goes.
func (rd *reader) bytesOf(rec records.Record) int64 {
	tr := rd.tr
	switch {
	case !tr.notify:
		return int64(len(rec.Value)) + 1
	case tr.task.Versions:
		return tr.versions[rec.Offset].Size
	}
	return tr.task.Chunk.End - tr.task.Chunk.Start
}

// versions lists the versions a Versions task announces and hands on their
// notifications, oldest first, from the one the task resumes at. Offsets
// count back from the task's own version, the newest when it was planned,
// as the chunk's last (End-1): an older version deleted since leaves its
// offset empty instead of moving the others, so that an attempt resumes at
// the version it stopped at. When the task's own version was deleted, the
// oldest End versions stand for the planned ones.
func (rd *reader) versions(ioCtx context.Context) step {
	tr, c := rd.tr, rd.tr.task.Chunk
	vs, err := dataset.Versions(ioCtx, rd.r.s3, c.Bucket, c.Key)
	if err != nil {
		return rd.readFailed(err)
	}
	base := int64(0)
	if i := slices.IndexFunc(vs, func(v dataset.Object) bool { return v.Pin() == c.Pin() }); i >= 0 {
		base = int64(i) - (c.End - 1)
	}
	tr.versions = make([]dataset.Object, c.End)
	for k := range c.End {
		if j := base + k; j >= 0 && j < int64(len(vs)) {
			tr.versions[k] = vs[j]
		}
	}
	for k, v := range tr.versions {
		if v.Key == "" {
			continue
		}
		if next := rd.record(records.Record{Offset: int64(k)}); next != more {
			return next
		}
	}
	return stop
}

// readFailed decides what becomes of the task when its read failed with
// err, which is not a single record's.
func (rd *reader) readFailed(err error) step {
	tr, c := rd.tr, rd.tr.task.Chunk
	code, permanent := unreadable(err, tr.ingest)
	switch {
	case rd.readCtx.Err() != nil:
		rd.cut(rd.next)
		return halt
	case rd.work.Err() != nil:
		tr.resumeAt = rd.next
	case permanent:
		// Reading the same bytes again gives the same error: the rest of
		// the chunk is not continued but put on the failure output, as one
		// failed record at the offset the task would have resumed from
		// (just after the last record read), and the task ends.
		at := max(rd.next, c.Start)
		tr.res.RecordsRead++
		rd.fail(at, code, fmt.Sprintf("the records of %s from offset %d to the end of the chunk cannot be read: %v", c.Object, at, err), "")
		tr.res.ObjectsFailed = 1
	case rd.next > tr.from && !errors.Is(err, dataset.ErrChanged) && !errors.Is(err, dataset.ErrNotFound):
		// What was read is sent; the rest is a continuation that starts
		// at the first record not read, instead of this task running
		// again from its start.
		tr.resumeAt, tr.stopped = rd.next, err
	default:
		tr.readErr = err
		return halt
	}
	return stop
}

// record encodes rec, when it is one to send, and hands on its entry, or
// adds it to the chunk-mode message being packed.
func (rd *reader) record(rec records.Record) step {
	tr := rd.tr
	if rec.Offset < tr.from {
		return more
	}
	if tr.only != nil {
		if rec.Offset > tr.last {
			return stop // the records asked for are behind
		}
		if !tr.wants(rec.Offset) {
			return more
		}
	}
	if rd.work.Err() != nil {
		tr.resumeAt = rec.Offset
		return stop
	}
	if rd.packer != nil {
		return rd.pack(rec)
	}
	if next := rd.paced(rec.Offset); next != more {
		return next
	}
	rd.count(rec)
	e, err := tr.encode(rec)
	if err != nil {
		rd.fail(rec.Offset, "UnmappableRecord", err.Error(), string(rec.Value))
		return more
	}
	if !rd.hand(e, span{offset: rec.Offset, count: 1}) {
		return halt
	}
	return more
}

// paced waits for the run's gate before the message that starts with the
// record at offset is handed on. It returns stop when the gate stopped
// the task (its run paused or cancelled, its target's backlog high) or
// work ended, the task then continuing from offset, and halt when the
// send stopped or the gate could not be read (the task fails).
func (rd *reader) paced(offset int64) step {
	g := rd.tr.gate
	if g == nil {
		return more
	}
	err := g.take(rd.ioCtx)
	switch {
	case err == nil:
		return more
	case rd.readCtx.Err() != nil:
		rd.cut(offset)
		return halt
	case holds(err):
		rd.tr.resumeAt, rd.tr.held = offset, err
		return stop
	case rd.work.Err() != nil:
		rd.tr.resumeAt = offset
		return stop
	}
	rd.tr.readErr = err
	rd.tr.notAccepted(offset)
	return halt
}

// pack adds rec to the chunk-mode message being packed, handing on the
// message before when rec does not fit in it.
func (rd *reader) pack(rec records.Record) step {
	p := rd.packer
	if at := sqsbatch.InvalidCharAt(rec.Value); at >= 0 && !rd.r.opts.Send.ReplaceInvalidCharacters {
		// SQS would refuse the whole message for this record: it goes to
		// the failure output alone.
		rd.count(rec)
		rd.refuse(rec.Offset, string(sqsbatch.RuleInvalidCharacters),
			fmt.Sprintf("the record has a character SQS rejects at byte %d", at), string(rec.Value))
		return more
	}
	if p.n > 0 && !p.fits(rec) && !rd.hand(p.flush()) {
		return halt
	}
	if p.n == 0 {
		if next := rd.paced(rec.Offset); next != more {
			return next
		}
		// The message this record starts takes its room in the pipe now,
		// before it is packed.
		var err error
		if rd.reserved, err = rd.pipe.reserve(rd.readCtx, p.max); err != nil {
			rd.cut(rec.Offset)
			return halt
		}
	}
	rd.count(rec)
	p.add(rec)
	return more
}

// count counts rec read, once the gate has let its message go on.
func (rd *reader) count(rec records.Record) {
	n := rd.bytesOf(rec)
	rd.tr.res.RecordsRead++
	rd.tr.bytesRead += n
	rd.next = rec.Offset + 1
	if p := rd.r.opts.Progress; p != nil {
		p.RecordsRead.Add(1)
		p.BytesRead.Add(n)
	}
}

// hand hands the entry e, which carries the records held, to the send. It
// reports whether the read goes on: false when the send stopped, or the
// entry could not be offloaded because readCtx ended.
func (rd *reader) hand(e sqsbatch.Entry, held span) bool {
	tr := rd.tr
	weight := rd.reserved
	rd.reserved = 0
	if tr.offload != nil {
		var ok bool
		if e, ok = rd.offloaded(e, held); !ok {
			rd.pipe.release(weight)
			return tr.readErr == nil
		}
	}
	e.Ref = refOf(tr.group, held)
	if rd.pipe.put(rd.readCtx, pending{entry: e, weight: weight}) != nil {
		rd.cut(held.offset)
		return false
	}
	tr.produced++
	tr.res.Messages++
	// Counted as the message goes to the send, not when the task ends, so
	// that the progress line's rate is live.
	if p := rd.r.opts.Progress; p != nil {
		p.Messages.Add(1)
	}
	return true
}

// offloaded returns the entry to send for e: e itself, or its pointer once
// its body is in S3 (see Options.Offload.S3URI). When the body cannot be
// written, its records go to the failure output (code OffloadFailed), or,
// when readCtx ended, the task fails; ok is then false.
func (rd *reader) offloaded(e sqsbatch.Entry, held span) (out sqsbatch.Entry, ok bool) {
	tr := rd.tr
	id := aws.ToString(e.Attributes[AttrRecordID].StringValue)
	out, offloaded, err := tr.offload.Entry(rd.readCtx, id, e)
	switch {
	case err != nil && rd.readCtx.Err() != nil:
		rd.cut(held.offset)
		return e, false
	case err != nil:
		var invalid *sqsextended.InvalidEntryError
		f := tr.failure(held.offset)
		f.RecordID, f.Code, f.Message, f.SenderFault = id, "OffloadFailed", err.Error(), errors.As(err, &invalid)
		f.records = int64(held.count)
		tr.fails = append(tr.fails, f)
		tr.res.RecordsFailed += int64(held.count)
		return e, false
	case offloaded:
		tr.res.RecordsOffloaded += int64(held.count)
	}
	return out, true
}

// refuse puts a record that cannot be sent on the failure output.
func (rd *reader) refuse(at int64, code, msg, body string) {
	tr := rd.tr
	f := tr.failure(at)
	f.RecordID, f.Code, f.Message, f.SenderFault, f.Body = tr.recordID(at), code, msg, true, body
	tr.fails = append(tr.fails, f)
	tr.res.RecordsFailed++
}

// fail refuses a record that cannot be read or mapped, a bad record.
func (rd *reader) fail(off int64, code, msg, body string) {
	rd.refuse(off, code, msg, body)
	rd.tr.res.BadRecords++
}

// cut ends the read because readCtx ended (the send stopped): the record
// at offset, and any the packer holds, were not handed to the send.
func (rd *reader) cut(offset int64) {
	rd.tr.readErr = context.Cause(rd.readCtx)
	if p := rd.packer; p != nil && p.n > 0 {
		offset = min(offset, p.first)
	}
	rd.tr.notAccepted(offset)
}

// aheadPerLane is how many tasks' first GETs are opened ahead for each task
// read at once, in tasks not yet started. An open response waiting costs a
// connection and the transport's small buffer, not its bytes: only the
// headers are read before the task starts.
const aheadPerLane = 2
