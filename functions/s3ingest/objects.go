package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// AttrRecordID is the message attribute that carries a record's
// deterministic id, the same attribute fanout sets.
const AttrRecordID = "s3sqs-record-id"

// maxBadRecordLogs bounds the log lines about bad records per object; the
// rest are only counted.
const maxBadRecordLogs = 5

// outcome is where an object's processing ended.
type outcome uint8

const (
	// outcomePending: not started, or stopped before it finished.
	outcomePending outcome = iota
	// outcomeRead: every record was read and handed to the sender (or, for
	// a handed-off object, every chunk task).
	outcomeRead
	// outcomeSkipped: deleted or overwritten since the notification; not
	// a failure.
	outcomeSkipped
	// outcomeFailed: it cannot be fully delivered now.
	outcomeFailed
)

// Reasons an object was skipped or failed, as they appear in logs and the
// summary.
const (
	reasonNotFound      = "not-found"
	reasonSuperseded    = "superseded"
	reasonDeadline      = "deadline"
	reasonStopped       = "stopped"
	reasonBadRecord     = "bad-record"
	reasonUnknownFormat = "unknown-format"
	reasonReadError     = "read-error"
)

// objectRun is one accepted object and what became of it. Its fields are
// written by the goroutine that reads the object, except consumed, which
// the sender's goroutine writes, and sendFailed, written after the send;
// they are read once both are done.
type objectRun struct {
	msg *message
	obj s3event.Object
	// seq is the object's index in the invocation, the first part of its
	// entries' ids.
	seq int

	outcome outcome
	reason  string
	err     error
	handoff bool

	records    int64 // records read (or chunk tasks planned)
	badRecords int
	bytes      int64 // object bytes read in full
	produced   int   // entries handed to the sender
	consumed   int   // entries the sender took
	sendFailed int
	sendErr    *sqsbatch.EntryError // the first entry that failed
}

// delivered reports whether the object needs nothing more: skipped, or
// read in full with every entry accepted by SQS.
func (o *objectRun) delivered() bool {
	switch o.outcome {
	case outcomeSkipped:
		return true
	case outcomeRead:
		return o.sendFailed == 0 && o.consumed == o.produced
	}
	return false
}

// failure describes why the object was not delivered.
func (o *objectRun) failure() error {
	name := "s3://" + o.obj.Bucket + "/" + o.obj.Key
	switch {
	case o.outcome == outcomeFailed:
		return fmt.Errorf("%s: %s: %w", name, o.reason, o.err)
	case o.outcome == outcomePending && o.err != nil:
		return fmt.Errorf("%s: %s: %w", name, o.reason, o.err)
	case o.outcome == outcomePending:
		return fmt.Errorf("%s: not processed", name)
	case o.sendFailed > 0:
		return fmt.Errorf("%s: %d of %d records not sent: %w", name, o.sendFailed, o.produced, o.sendErr)
	default:
		return fmt.Errorf("%s: %d of %d records not sent: the send stopped", name, o.produced-o.consumed, o.produced)
	}
}

func (o *objectRun) fail(reason string, err error) {
	o.outcome, o.reason, o.err = outcomeFailed, reason, err
}

// pinned is the object as package dataset reads it: exactly the notified
// version (VersionId, else If-Match on the ETag).
func (o *objectRun) pinned() dataset.Object {
	return dataset.Object{Bucket: o.obj.Bucket, Key: o.obj.Key, Size: o.obj.Size, ETag: o.obj.ETag, VersionID: o.obj.VersionID}
}

// entryID is the sqsbatch entry id of an object's record or chunk task:
// the object's seq and the position, so that a failure leads back to its
// object and message.
func entryID(seq int, pos int64) string {
	return strconv.Itoa(seq) + ":" + strconv.FormatInt(pos, 10)
}

// seqOf returns the object seq of an entry id.
func seqOf(id string) (int, bool) {
	s, _, ok := strings.Cut(id, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// process delivers objs: large ones to the fanout work queue as chunk
// tasks, the rest read here and sent to the output queue.
func (inv *invocation) process(ctx, workCtx, sendCtx context.Context, objs []*objectRun) {
	h := inv.h
	var inline, large []*objectRun
	for _, o := range objs {
		if h.handoff != nil && h.cfg.handoffBytes > 0 && o.obj.Size > h.cfg.handoffBytes && !o.obj.Deletion {
			large = append(large, o)
			continue
		}
		inline = append(inline, o)
	}
	if len(large) > 0 {
		inv.handOff(ctx, workCtx, sendCtx, large)
	}
	if len(inline) > 0 {
		inv.readAndSend(ctx, workCtx, sendCtx, inline)
	}
	for _, o := range objs {
		if o.outcome == outcomePending && o.reason == "" {
			o.reason, o.err = reasonStopped, errors.New("not started")
			if workCtx.Err() != nil {
				o.reason, o.err = reasonDeadline, context.Cause(workCtx)
			}
		}
	}
}

// pending is an entry on its way to the sender, with its object.
type pending struct {
	entry sqsbatch.Entry
	obj   *objectRun
}

// readAndSend reads objs, up to READ_CONCURRENCY at once on a standard
// queue (one at a time, in order, on a FIFO queue), and streams their
// records through one sqsbatch.Send, so that requests stay full and in
// flight while objects are read.
func (inv *invocation) readAndSend(ctx, workCtx, sendCtx context.Context, objs []*objectRun) {
	h := inv.h
	readCtx, stopReading := context.WithCancelCause(workCtx)
	defer stopReading(nil)

	workers := h.cfg.readConcurrency
	if inv.fifo {
		workers = 1
	}
	workers = max(1, min(workers, len(objs)))
	ch := make(chan pending, 64)
	jobs := make(chan *objectRun)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range jobs {
				inv.readObject(ctx, readCtx, o, ch)
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, o := range objs {
			select {
			case jobs <- o:
			case <-readCtx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(ch)
	}()

	entries := func(yield func(sqsbatch.Entry) bool) {
		for p := range ch {
			p.obj.consumed++
			if !yield(p.entry) {
				return
			}
		}
	}
	res, err := h.output.Send(sendCtx, entries)
	// The send may have stopped early; the readers stop too, and the
	// entries left in ch are not sent (their objects are not delivered).
	stopReading(errSendStopped)
	for range ch {
	}
	inv.stats.addSend(res)
	if err != nil {
		h.log.ErrorContext(ctx, "send to the output queue stopped", "queue", h.output.QueueURL(), "err", err)
	}
	inv.absorbFailures(ctx, res.Failures)
}

var errSendStopped = errors.New("the send to the output queue stopped")

// absorbFailures charges each failed entry to its object.
func (inv *invocation) absorbFailures(ctx context.Context, fs []*sqsbatch.EntryError) {
	for _, f := range fs {
		seq, ok := seqOf(f.Entry.ID)
		if !ok || seq < 0 || seq >= len(inv.objects) {
			continue
		}
		o := inv.objects[seq]
		o.sendFailed++
		if o.sendErr == nil {
			o.sendErr = f
			inv.h.log.WarnContext(ctx, "record not sent", "bucket", o.obj.Bucket, "key", o.obj.Key,
				"entry", f.Entry.ID, "code", f.Code, "message", f.Message, "senderFault", f.SenderFault, "attempts", f.Attempts)
		}
	}
}

// readObject reads o's records and hands them to ch. It sets o's outcome.
func (inv *invocation) readObject(ctx, readCtx context.Context, o *objectRun, ch chan<- pending) {
	h := inv.h
	if err := readCtx.Err(); err != nil {
		inv.stopped(readCtx, o)
		return
	}
	send := func(e sqsbatch.Entry) bool {
		select {
		case ch <- pending{entry: e, obj: o}:
			o.produced++
			return true
		case <-readCtx.Done():
			inv.stopped(readCtx, o)
			return false
		}
	}
	if o.obj.Deletion {
		id := deletionID(o.obj)
		if send(h.entry(o, -1, recordjson.DeletionBody(o.obj, h.cfg.partitions), id)) {
			o.records, o.outcome = 1, outcomeRead
		}
		return
	}

	obj := o.pinned()
	chunks, err := h.planner.Plan(readCtx, obj)
	if err != nil {
		inv.readFailed(ctx, readCtx, o, err)
		return
	}
	if len(chunks) == 0 {
		o.outcome = outcomeRead
		return
	}
	enc := recordjson.NewEncoder(chunks[0].Format, o.obj, h.cfg.partitions, h.cfg.fileMetadata, func(field string) {
		h.log.WarnContext(ctx, "records already have a field that s3ingest adds; the record's value is kept",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "field", field)
	})
	ids := fanout.NewRecordIDs(obj)
	opts := records.Options{MaxRecordSize: h.output.MaxMessageSize()}
	for _, c := range chunks {
		for rec, err := range records.Read(readCtx, h.s3, c, opts) {
			var body string
			if err == nil {
				body, err = enc.Encode(obj, rec)
			}
			var bad *records.RecordError
			switch {
			case err == nil:
			case errors.As(err, &bad) && readCtx.Err() == nil:
				o.badRecords++
				if o.badRecords <= maxBadRecordLogs {
					h.log.WarnContext(ctx, "record cannot be read", "bucket", o.obj.Bucket, "key", o.obj.Key,
						"offset", bad.Offset, "line", bad.Line, "err", bad.Err, "skipped", h.cfg.skipBadRecords)
				}
				if h.cfg.skipBadRecords {
					continue
				}
				// The message will fail: reading on would only send
				// records that its retry sends again.
				o.fail(reasonBadRecord, err)
				return
			default:
				inv.readFailed(ctx, readCtx, o, err)
				return
			}
			if !send(h.entry(o, rec.Offset, body, ids.ID(rec.Offset))) {
				return
			}
			o.records++
		}
	}
	o.outcome, o.bytes = outcomeRead, o.obj.Size
}

// entry builds the message of one record.
func (h *Handler) entry(o *objectRun, offset int64, body, id string) sqsbatch.Entry {
	e := sqsbatch.Entry{
		ID:   entryID(o.seq, offset),
		Body: body,
		Attributes: map[string]types.MessageAttributeValue{
			AttrRecordID: {DataType: aws.String("String"), StringValue: aws.String(id)},
		},
	}
	if h.output.FIFO() {
		e.GroupID = groupID(o.obj.Bucket, o.obj.Key)
		e.DeduplicationID = id
	}
	return e
}

// stopped records that o was stopped by the end of readCtx.
func (inv *invocation) stopped(readCtx context.Context, o *objectRun) {
	cause := context.Cause(readCtx)
	reason := reasonStopped
	if errors.Is(cause, errDeadline) || errors.Is(cause, context.DeadlineExceeded) {
		reason = reasonDeadline
	}
	o.outcome, o.reason, o.err = outcomePending, reason, cause
}

// readFailed sorts a failure to plan or read o: an object deleted or
// overwritten since its notification is skipped (its newer notification
// comes, or there is nothing left to read); anything else fails it.
func (inv *invocation) readFailed(ctx, readCtx context.Context, o *objectRun, err error) {
	h := inv.h
	switch {
	case readCtx.Err() != nil:
		inv.stopped(readCtx, o)
	case errors.Is(err, dataset.ErrChanged) || (errors.Is(err, dataset.ErrNotFound) && apiCode(err) == "NoSuchVersion"):
		o.outcome, o.reason, o.err = outcomeSkipped, reasonSuperseded, err
		h.log.WarnContext(ctx, "object skipped: overwritten since the notification; its newer notification will follow",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "versionId", o.obj.VersionID, "eTag", o.obj.ETag, "recordsSent", o.produced, "err", err)
	case errors.Is(err, dataset.ErrNotFound):
		o.outcome, o.reason, o.err = outcomeSkipped, reasonNotFound, err
		h.log.WarnContext(ctx, "object skipped: deleted before it was read",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "versionId", o.obj.VersionID, "recordsSent", o.produced, "err", err)
	case errors.Is(err, dataset.ErrUnknownFormat):
		o.fail(reasonUnknownFormat, err)
	default:
		o.fail(reasonReadError, err)
	}
	if o.outcome == outcomeFailed {
		h.log.WarnContext(ctx, "object not delivered", "bucket", o.obj.Bucket, "key", o.obj.Key, "reason", o.reason, "err", err)
	}
}

// apiCode returns the AWS error code in err, or "".
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// handOff plans each of objs into chunks and sends them as chunk tasks to
// the fanout work queue, where fanout's workers read them in parallel, so
// that a very large object does not have to fit in this invocation's time.
func (inv *invocation) handOff(ctx, workCtx, sendCtx context.Context, objs []*objectRun) {
	h := inv.h
	var entries []sqsbatch.Entry
	for _, o := range objs {
		o.handoff = true
		if workCtx.Err() != nil {
			inv.stopped(workCtx, o)
			continue
		}
		obj := o.pinned()
		chunks, err := h.planner.Plan(workCtx, obj)
		if err != nil {
			inv.readFailed(ctx, workCtx, o, err)
			continue
		}
		// The run id is the object's pin: a retried message plans the
		// same tasks with the same ids.
		runID := "s3ingest-" + fanout.RecordID(obj, -1)
		ov, err := h.handoffOverrides(o.obj)
		if err != nil {
			o.fail(reasonReadError, err)
			continue
		}
		for _, c := range chunks {
			t := worktask.Task{RunID: runID, Chunk: c, Overrides: ov}
			body, err := t.Marshal()
			if err != nil {
				o.fail(reasonReadError, err)
				break
			}
			e := sqsbatch.Entry{ID: entryID(o.seq, int64(c.Index)), Body: body}
			if h.handoff.FIFO() {
				e.GroupID, e.DeduplicationID = t.ID(), t.ID()
			}
			entries = append(entries, e)
			o.produced++
			o.consumed++ // SendEntries reports every entry it does not send
		}
		if o.outcome == outcomePending {
			o.outcome, o.records = outcomeRead, int64(len(chunks))
		}
	}
	if len(entries) == 0 {
		return
	}
	res, err := h.handoff.SendEntries(sendCtx, entries)
	inv.stats.tasks += res.Sent
	if err != nil {
		h.log.ErrorContext(ctx, "send to the fanout work queue stopped", "queue", h.handoff.QueueURL(), "err", err)
	}
	inv.absorbFailures(ctx, res.Failures)
	h.log.InfoContext(ctx, "objects handed off to fanout", "objects", len(objs), "tasks", res.Sent, "failed", res.Failed)
}

// handoffOverrides are the overrides of obj's chunk tasks: fanout sends
// their records to the output queue, encoded as s3ingest encodes them here
// (partition fields, _file with obj's event time, FIFO group and
// deduplication id).
func (h *Handler) handoffOverrides(obj s3event.Object) (json.RawMessage, error) {
	return json.Marshal(fanout.Overrides{
		TargetQueueURL: h.output.QueueURL(),
		Ingest: &fanout.IngestEncoding{
			Partitions:   h.cfg.partitions,
			FileMetadata: h.cfg.fileMetadata,
			EventTime:    obj.EventTime,
		},
	})
}
