package fanout

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Notification mode (worktask.ModeNotification) replays objects to a
// consumer of S3 event notifications: each object is planned as one task
// of one chunk, never read, and its task sends one message, the object's
// notification (s3event.Encoder), as if the object were its one record at
// offset 0. So the task's claim makes each object version announced once
// per run, the message carries the record id of that record (a failure
// names it too), and on a FIFO queue its group is the object's key
// (GroupID) and its deduplication id the record id.

// notificationChunk is the one chunk of obj in notification mode. Its
// format says text, which a task must name; nothing reads it.
func notificationChunk(obj dataset.Object) dataset.Chunk {
	return dataset.Chunk{Object: obj, Count: 1, End: obj.Size, Format: dataset.FormatText}
}

// notificationEntries returns the encoder of a notification-mode task's one
// entry: the notification of c's object, in format (empty is the runner's
// NotificationFormat), marked with run runID. Its eventTime is when it is
// encoded: the object is announced as if S3 had just announced it.
func (r *Runner) notificationEntries(runID string, format string, c dataset.Chunk, fifo bool) func(records.Record) (sqsbatch.Entry, error) {
	enc := s3event.Encoder{Format: r.opts.NotificationFormat, RunID: runID}
	if format != "" {
		enc.Format = s3event.Format(format)
	}
	ids := newRecordIDs(c.Object)
	group := GroupID(c.Object)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		body, err := enc.Encode(s3event.Object{Bucket: c.Bucket, Key: c.Key, Size: c.Size, ETag: c.ETag,
			VersionID: c.VersionID, EventTime: time.Now(), Region: r.opts.Region})
		if err != nil {
			return sqsbatch.Entry{}, err
		}
		id := ids.ID(rec.Offset)
		e := sqsbatch.Entry{Body: string(body), Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)}}
		if fifo {
			e.GroupID, e.DeduplicationID = group, id
		}
		return e, nil
	}
}

// notifyModeOf returns whether a run with overrides ov is in notification
// mode.
func (r *Runner) notifyModeOf(ov *worktask.Overrides) bool {
	return ov.Ingest == nil && (ov.Mode == worktask.ModeNotification || ov.Mode == "" && r.opts.Mode == worktask.ModeNotification)
}
