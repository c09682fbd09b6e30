package ingesthandler

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// objectRun is one accepted object and what became of it.
type objectRun struct {
	msg int // index of its message in the call
	obj s3event.Object
	engine.ObjectResult
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

	var items []s3event.Item
	for _, it := range res.Accepted {
		if errs[index[it.MessageID]] == nil { // else its retry reads its objects
			items = append(items, it)
		}
	}
	// A FIFO source's message is read one object at a time, in order.
	o := h.send
	if partialbatch.IsFIFO(msgs) {
		o.Concurrency = 1
	}
	results := h.runner.RunNotified(ctx, items, o)
	objs := make([]objectRun, len(items))
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for j, r := range results {
		obj := &objs[j]
		*obj = objectRun{msg: index[items[j].MessageID], obj: items[j].Object, ObjectResult: r}
		if r.HandedOff {
			inv.tasks += r.TasksQueued
		} else {
			inv.stats.Add(r.Stats)
			inv.badRecords += r.BadRecords
		}
		if obj.Failed != "" && errs[obj.msg] == nil {
			why := failObject
			switch obj.Failed {
			case engine.FailDeadline:
				why = string(partialbatch.ReasonDeadline)
			case engine.FailInProgress:
				why = engine.FailInProgress
			}
			errs[obj.msg] = &messageError{why: why, err: fmt.Errorf("%s: %s: %w", dataset.Notified(obj.obj).URI(), obj.Failed, obj.Err)}
		}
	}
	inv.objects = append(inv.objects, objs...)
	return errs
}

// sendOptions are how a handler's objects are sent: encoded as s3ingest
// does, to the runner's target.
func sendOptions(opts Options) engine.NotifiedOptions {
	return engine.NotifiedOptions{
		Ingest: &worktask.IngestEncoding{
			Partitions:       opts.Partitions,
			FileMetadata:     opts.FileMetadata,
			GroupIDPartition: opts.GroupIDPartition,
		},
		HandoffBytes:   opts.HandoffBytes,
		FailBadRecords: opts.FailBadRecords,
		Concurrency:    opts.ReadConcurrency,
	}
}
