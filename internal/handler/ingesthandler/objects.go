package ingesthandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Reasons an object was skipped or not delivered, as they appear in logs
// and the summary.
const (
	reasonNotFound   = "not-found"
	reasonSuperseded = "superseded"
	reasonDeadline   = "deadline"
	reasonBadRecord  = "bad-record"
	reasonReadError  = "read-error"
	// reasonDone: the claims store says another delivery of the same
	// notification delivered the object, or is delivering it.
	reasonDone = "already-delivered"
	// reasonInProgress: another delivery holds the object's claim.
	reasonInProgress = "in-progress"
)

// objectRun is one accepted object and what became of it.
type objectRun struct {
	msg     int // index of its message in the call
	obj     s3event.Object
	handoff bool
	tasks   []int // indexes in the call's tasks
	// skipped or failed say why the object needs nothing more, or why it
	// was not delivered.
	skipped string
	failed  string
	err     error
	records int64
	bytes   int64
}

func (o *objectRun) pinned() dataset.Object { return dataset.Notified(o.obj) }

// runID is the run of an object's tasks: derived from the object's pin and
// the event's sequencer, so that a retried or repeated notification plans
// the same tasks with the same ids (and claims), while a new PUT of the
// same bytes is a run of its own. It hashes the pin (the version id where
// there is one), not the ETag record ids hash: a new version of the same
// bytes has the same ETag, and without a sequencer only its version id
// tells the two PUTs apart.
func (o *objectRun) runID() string {
	p := o.pinned()
	sum := sha256.Sum256([]byte(p.Bucket + "\x00" + p.Key + "\x00" + p.Pin() + "\x00-1"))
	id := hex.EncodeToString(sum[:16])
	if o.obj.Sequencer != "" {
		id += "-" + o.obj.Sequencer
	}
	return "s3ingest-" + id
}

// messages is the partial-batch handler: it reads the objects of msgs
// (all of a standard queue's batch at once, so that their records share
// requests; one message at a time from a FIFO queue) and returns each
// message's outcome.
func (inv *invocation) messages(ctx context.Context, msgs []events.SQSMessage) []error {
	h := inv.h
	errs := make([]error, len(msgs))
	in := make([]s3event.Message, len(msgs))
	index := map[string]int{}
	for i, m := range msgs {
		in[i] = s3event.Message{ID: m.MessageId, Body: m.Body}
		if _, dup := index[m.MessageId]; !dup {
			index[m.MessageId] = i
		}
	}
	res := h.opts.Filter.Apply(in)
	for _, f := range res.Failed {
		i := index[f.MessageID]
		// Logged once here, where it is handled: the message goes back to
		// the queue and, after maxReceiveCount, to its DLQ.
		h.log.WarnContext(ctx, "message is not an S3 notification; reported as failed", "messageId", f.MessageID, "err", f.Err)
		if errs[i] == nil {
			errs[i] = &messageError{why: failParse, err: f.Err}
		}
	}
	inv.mu.Lock()
	inv.testEvents += len(res.TestEvents)
	for _, s := range res.Skipped {
		inv.skipped[s.Reason.String()]++
		if s.Reason == s3event.SkipTooOld {
			// Unlike the other filters, age drops an object the
			// notification asked for, such as one redriven from a DLQ
			// late: say which.
			h.log.WarnContext(ctx, "object skipped: its notification is older than the maximum file age (MAX_FILE_AGE)", "messageId", s.MessageID,
				"bucket", s.Object.Bucket, "key", s.Object.Key, "versionId", s.Object.VersionID, "eventTime", s.Object.EventTime, "detail", s.Detail)
			continue
		}
		h.log.DebugContext(ctx, "object skipped", "messageId", s.MessageID, "bucket", s.Object.Bucket, "key", s.Object.Key, "reason", s.Reason.String(), "detail", s.Detail)
	}
	inv.mu.Unlock()

	var objs []*objectRun
	for _, it := range res.Accepted {
		i := index[it.MessageID]
		if errs[i] != nil {
			continue // its retry reads its objects
		}
		objs = append(objs, &objectRun{msg: i, obj: it.Object})
	}
	// A FIFO source's message is read one object at a time, in order.
	concurrency := h.opts.ReadConcurrency
	if len(msgs) == 1 && (msgs[0].Attributes["MessageGroupId"] != "" || strings.HasSuffix(msgs[0].EventSourceARN, ".fifo")) {
		concurrency = 1
	}
	inv.deliver(ctx, objs, concurrency)
	inv.markIngested(ctx, objs)
	for _, o := range objs {
		if o.failed != "" && errs[o.msg] == nil {
			why := failObject
			switch o.failed {
			case reasonDeadline:
				why = string(partialbatch.ReasonDeadline)
			case reasonInProgress:
				why = reasonInProgress
			}
			errs[o.msg] = &messageError{why: why, err: fmt.Errorf("%s: %s: %w", o.pinned().URI(), o.failed, o.err)}
		}
	}
	inv.mu.Lock()
	inv.objects = append(inv.objects, objs...)
	inv.mu.Unlock()
	return errs
}

// deliver sends objs: deletions as one record each, large objects to the
// work queue as tasks, the rest read here, together.
func (inv *invocation) deliver(ctx context.Context, objs []*objectRun, concurrency int) {
	h := inv.h
	var (
		deletions []*objectRun
		tasks     []worktask.Task
		owners    []*objectRun
	)
	for _, o := range objs {
		switch {
		case o.obj.Deletion:
			deletions = append(deletions, o)
		case h.opts.HandoffBytes > 0 && o.obj.Size > h.opts.HandoffBytes:
			inv.handOff(ctx, o)
		default:
			ts, err := h.runner.Tasks(ctx, o.runID(), o.pinned(), inv.overrides(o))
			if err != nil {
				inv.readFailed(ctx, o, err)
				continue
			}
			for _, t := range ts {
				o.tasks = append(o.tasks, len(tasks))
				tasks = append(tasks, t)
				owners = append(owners, o)
			}
		}
	}
	if len(deletions) > 0 {
		inv.sendDeletions(ctx, deletions)
	}
	results := h.runner.RunTasks(ctx, tasks, concurrency)
	done := map[*objectRun]int{}
	for i, res := range results {
		o := owners[i]
		inv.add(res.Stats, res.BadRecords)
		o.records += res.RecordsRead
		done[o] += res.TasksSkipped
		switch {
		case res.Err != nil:
			if o.failed == "" && o.skipped == "" {
				inv.readFailed(ctx, o, res.Err)
			}
		case res.Continuation != nil && res.Stopped != nil:
			if o.failed == "" && o.skipped == "" {
				inv.readFailed(ctx, o, res.Stopped)
			}
		case res.Continuation != nil:
			// Out of time: the object comes back with its message.
			if o.failed == "" {
				o.failed, o.err = reasonDeadline, partialbatch.ErrDeadline
			}
		case res.BadRecords > 0 && h.opts.FailBadRecords:
			if o.failed == "" {
				o.failed, o.err = reasonBadRecord, fmt.Errorf("%d records cannot be read (ON_BAD_RECORD=fail; they are on the failure output)", res.BadRecords)
			}
		}
	}
	for _, o := range objs {
		if o.failed == "" && o.skipped == "" && len(o.tasks) > 0 && done[o] == len(o.tasks) {
			o.skipped = reasonDone
		}
		if o.failed == "" && o.skipped == "" && !o.handoff {
			o.bytes = o.obj.Size
		}
	}
}

// marker is the part of a claims store that keeps the markers of the
// object versions s3ingest ingested (*claims.Table).
type marker interface {
	MarkDone(ctx context.Context, key string) error
}

// markIngested records each object of objs that needs nothing more (its
// records sent, or handed to fanout's workers, which run them once with
// the failure output) under claims.ObjectKey, so that s3sqs reconcile can
// tell it from an object whose notification never came. A marker not
// written is logged: the object then looks missing to a reconcile, which
// sends its notification again, and its records arrive twice.
func (inv *invocation) markIngested(ctx context.Context, objs []*objectRun) {
	m, ok := inv.h.runner.Claims().(marker)
	if !ok {
		return
	}
	ctx = partialbatch.SendContext(ctx)
	// The markers are written as the objects were read, ReadConcurrency at
	// once, so that a batch's markers cost the invocation one round trip
	// to DynamoDB per ReadConcurrency objects, not one per object.
	var g errgroup.Group
	g.SetLimit(inv.h.opts.ReadConcurrency)
	for _, o := range objs {
		if o.obj.Deletion || o.failed != "" || (o.skipped != "" && o.skipped != reasonDone) {
			continue
		}
		p := o.pinned()
		g.Go(func() error {
			if err := m.MarkDone(ctx, claims.ObjectKey(p.Bucket, p.Key, p.Pin())); err != nil {
				inv.h.log.WarnContext(ctx, "object's ingested marker not written; a reconcile will send it again", "object", p.String(), "err", err)
			}
			return nil
		})
	}
	g.Wait()
}

// overrides are how an object's records are sent: encoded as s3ingest
// does, to the runner's target.
func (inv *invocation) overrides(o *objectRun) worktask.Overrides {
	return worktask.Overrides{Ingest: &worktask.IngestEncoding{
		Partitions:       inv.h.opts.Partitions,
		FileMetadata:     inv.h.opts.FileMetadata,
		EventTime:        o.obj.EventTime,
		GroupIDPartition: inv.h.opts.GroupIDPartition,
	}}
}

// handOff plans o into chunk tasks on fanout's work queue, where fanout's
// workers read them in parallel, so that a very large object does not
// have to fit in this invocation's time. The tasks name the output queue
// and carry s3ingest's encoding, so that their records arrive as if read
// here.
func (inv *invocation) handOff(ctx context.Context, o *objectRun) {
	h := inv.h
	o.handoff = true
	one := func(yield func(dataset.Object, error) bool) { yield(o.pinned(), nil) }
	rep, err := h.runner.RunObjects(partialbatch.SendContext(ctx), o.runID(), one, engine.ObjectsOptions{Overrides: inv.overrides(o), Queue: true})
	inv.mu.Lock()
	inv.tasks += rep.TasksQueued
	inv.mu.Unlock()
	if err != nil {
		inv.readFailed(ctx, o, err)
		return
	}
	o.records = int64(rep.TasksQueued)
	h.log.InfoContext(ctx, "object handed off to fanout", "object", o.pinned().URI(), "tasks", rep.TasksQueued)
}

// sendDeletions sends one record per deletion event.
func (inv *invocation) sendDeletions(ctx context.Context, objs []*objectRun) {
	h := inv.h
	target, err := h.runner.Target(ctx)
	if err != nil {
		for _, o := range objs {
			o.failed, o.err = reasonReadError, err
		}
		return
	}
	entries := make([]sqsbatch.Entry, len(objs))
	for i, o := range objs {
		id := deletionID(o.obj)
		entries[i] = sqsbatch.Entry{
			ID:         fmt.Sprint(i),
			Body:       recordjson.DeletionBody(o.obj, h.opts.Partitions),
			Attributes: map[string]types.MessageAttributeValue{engine.AttrRecordID: {DataType: aws.String("String"), StringValue: aws.String(id)}},
		}
		if target.FIFO() {
			entries[i].GroupID, entries[i].DeduplicationID = engine.GroupID(o.pinned()), id
		}
		o.records = 1
	}
	res, err := target.SendEntries(partialbatch.SendContext(ctx), entries)
	inv.add(engine.Stats{RecordsRead: int64(len(objs)), RecordsSent: int64(res.Sent), Messages: int64(res.Sent),
		Requests: int64(res.Requests), Retries: int64(res.Retries), BytesSent: res.Bytes}, 0)
	for _, f := range res.Failures {
		o := objs[f.Seq]
		o.failed, o.err = reasonReadError, f
	}
	if err != nil {
		for _, o := range objs {
			if o.failed == "" {
				o.failed, o.err = reasonReadError, err
			}
		}
	}
}

// deletionID is the record id of a deletion event: the object's pin with
// the event's sequencer, so that two deletions of one key differ.
func deletionID(obj s3event.Object) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00deleted\x00%s", obj.Bucket, obj.Key, obj.VersionID, obj.ETag, obj.Sequencer)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// readFailed sorts a failure to plan or read o: an object deleted or
// overwritten since its notification is skipped (its newer notification
// comes, or there is nothing left to read); anything else fails it.
func (inv *invocation) readFailed(ctx context.Context, o *objectRun, err error) {
	h := inv.h
	switch {
	case errors.Is(err, dataset.ErrChanged) || (errors.Is(err, dataset.ErrNotFound) && awserr.Missing(err) == awserr.Version):
		o.skipped, o.err = reasonSuperseded, err
		h.log.WarnContext(ctx, "object skipped: overwritten since the notification; its newer notification will follow",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "versionId", o.obj.VersionID, "eTag", o.obj.ETag, "err", err)
	case errors.Is(err, dataset.ErrNotFound):
		o.skipped, o.err = reasonNotFound, err
		h.log.WarnContext(ctx, "object skipped: deleted before it was read",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "versionId", o.obj.VersionID, "err", err)
	case errors.Is(err, partialbatch.ErrDeadline) || errors.Is(err, context.DeadlineExceeded):
		o.failed, o.err = reasonDeadline, err
	case errors.Is(err, claims.ErrHeld):
		o.failed, o.err = reasonInProgress, err
		h.log.InfoContext(ctx, "object not delivered now: another delivery of its notification is delivering it; this one comes back",
			"bucket", o.obj.Bucket, "key", o.obj.Key, "err", err)
	default:
		o.failed, o.err = reasonReadError, err
		h.log.WarnContext(ctx, "object not delivered", "bucket", o.obj.Bucket, "key", o.obj.Key, "reason", o.failed, "err", err)
	}
}

func (inv *invocation) add(st engine.Stats, bad int64) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.stats.Add(st)
	inv.badRecords += bad
}
