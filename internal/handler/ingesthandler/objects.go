package ingesthandler

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// messages is the partial-batch handler: it reads the objects of msgs
// (all of a standard queue's batch at once, so that their records share
// requests; one message at a time from a FIFO queue) and returns each
// message's outcome.
func (inv *invocation) messages(ctx context.Context, msgs []events.SQSMessage) []error {
	h := inv.h
	in := make([]s3event.Message, len(msgs))
	for i, m := range msgs {
		in[i] = s3event.Message{ID: m.MessageId, Body: m.Body}
	}
	o := h.send
	if partialbatch.IsFIFO(msgs) {
		o.Concurrency = 1 // a FIFO message's objects, in order
	}
	res := h.runner.RunNotified(ctx, in, o)
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.testEvents += len(res.TestEvents)
	inv.skip(ctx, res.Skipped)
	errs := make([]error, len(msgs))
	for i, m := range res.Messages {
		for _, r := range m.Objects {
			if r.HandedOff {
				inv.tasks += r.TasksQueued
			} else {
				inv.stats.Add(r.Stats)
				inv.badRecords += r.BadRecords
			}
		}
		inv.objects = append(inv.objects, m.Objects...)
		if m.Failed == "" {
			continue
		}
		why := failObject
		switch m.Failed {
		case engine.FailParse:
			why = failParse
			// Logged once here, where it is handled: the message goes
			// back to the queue and, after maxReceiveCount, to its DLQ.
			h.log.WarnContext(ctx, "message is not an S3 notification, or a record of it cannot be read; reported as failed", "messageId", msgs[i].MessageId, "err", m.Err)
		case engine.FailDeadline:
			why = string(partialbatch.ReasonDeadline)
		case engine.FailInProgress:
			why = engine.FailInProgress
		}
		errs[i] = &messageError{why: why, err: m.Err}
	}
	return errs
}

// skip counts and logs the objects the filter left out.
func (inv *invocation) skip(ctx context.Context, skipped []s3event.Skipped) {
	for _, s := range skipped {
		inv.skipped[s.Reason.String()]++
		if s.Reason == s3event.SkipTooOld {
			// Unlike the other filters, age drops an object the
			// notification asked for, such as one redriven from a DLQ
			// late: say which.
			inv.h.log.WarnContext(ctx, "object skipped: its notification is older than the maximum file age (MAX_FILE_AGE)", "messageId", s.MessageID,
				"bucket", s.Object.Bucket, "key", s.Object.Key, "versionId", s.Object.VersionID, "eventTime", s.Object.EventTime, "detail", s.Detail)
			continue
		}
		inv.h.log.DebugContext(ctx, "object skipped", "messageId", s.MessageID, "bucket", s.Object.Bucket, "key", s.Object.Key, "reason", s.Reason.String(), "detail", s.Detail)
	}
}

// sendOptions are how a handler's objects are sent: encoded as s3ingest
// does, to the runner's target.
func sendOptions(opts Options) engine.NotifiedOptions {
	return engine.NotifiedOptions{
		Filter: opts.Filter,
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
