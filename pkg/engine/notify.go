package engine

import (
	"context"
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

// notificationEntries returns the encoder of a notification-mode task's
// entries: the notification of s's object, or, for a Versions task, of the
// version at the record's offset, in format (empty is the runner's
// Notification.Format), marked with run runID. Its eventTime is when it is
// encoded: the object is announced as if S3 had just announced it. Each
// version's record id is the one its own task would give it.
func (r *Runner) notificationEntries(runID string, format string, s *taskSpec, fifo bool) func(records.Record) (sqsbatch.Entry, error) {
	enc := s3event.Encoder{Format: r.opts.Notification.Format, RunID: runID}
	if format != "" {
		enc.Format = s3event.Format(format)
	}
	group := GroupID(s.task.Chunk.Object)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		obj, id := s.task.Chunk.Object, s.recordID(rec.Offset)
		if v := s.version(rec.Offset); v != nil {
			obj = *v
		}
		// The run's own sequencer: a consumer that runs each notified
		// version once (s3ingest's claims) takes a second replay as new,
		// and a notification sent again by this run as the same.
		note := obj.Created(time.Now())
		note.Sequencer, note.Region = s3event.RunSequencer(runID, int(rec.Offset)), r.opts.Notification.Region
		body, err := enc.Encode(note)
		if err != nil {
			return sqsbatch.Entry{}, err
		}
		e := sqsbatch.Entry{Body: string(body), Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)}}
		if fifo {
			e.GroupID, e.DeduplicationID = group, id
		}
		return e, nil
	}
}

// versionTasks returns the tasks of l, a key and its versions oldest first
// (dataset.Source.Versions), in notification mode: on a FIFO target one
// task that announces them all, in order, in the key's message group
// (worktask.Task.Versions); else a task per version, as for any object.
func (r *Runner) versionTasks(ctx context.Context, runID string, ov *worktask.Overrides, l dataset.Listed) ([]worktask.Task, error) {
	sender, _, err := r.sender(ctx, ov)
	if err != nil {
		return nil, err
	}
	if sender.FIFO() {
		// The task says its mode, so that a function whose MODE is
		// another refuses it rather than read the key's bytes.
		vo := *ov
		vo.Mode = worktask.ModeNotification
		c := dataset.Chunk{Object: l.Object, Count: 1, End: int64(len(l.Versions)), Format: dataset.FormatText}
		return []worktask.Task{{RunID: runID, Chunk: c, Overrides: &vo, Versions: true}}, nil
	}
	ts := make([]worktask.Task, len(l.Versions))
	for i, v := range l.Versions {
		ts[i] = worktask.Task{RunID: runID, Chunk: notificationChunk(v), Overrides: ov}
	}
	return ts, nil
}

// failure returns the failure of the record at offset at of s's task,
// where it comes from filled in. A Versions task's record at is the
// notification of one version, which that version's own task would send
// as its offset 0: the failure names it so, for a redrive to find it.
func (s *taskSpec) failure(at int64) Failure {
	obj, off := s.task.Chunk.Object, at
	f := Failure{RunID: s.task.RunID, at: at}
	if v := s.version(at); v != nil {
		obj, off, f.version = *v, 0, v
	}
	f.Source, f.Version, f.Offset = obj.URI(), obj.Pin(), off
	return f
}

// recordID returns the record id of the record at offset at of s's task.
func (s *taskSpec) recordID(at int64) string {
	if v := s.version(at); v != nil {
		return RecordID(*v, 0)
	}
	return RecordID(s.task.Chunk.Object, at)
}

// version returns the version a Versions task announces as its record at,
// or nil.
func (s *taskSpec) version(at int64) *dataset.Object {
	if !s.task.Versions || at < 0 || at >= int64(len(s.versions)) || s.versions[at].Key == "" {
		return nil
	}
	return &s.versions[at]
}

// notifyModeOf returns whether a run with overrides ov is in notification
// mode.
func (r *Runner) notifyModeOf(ov *worktask.Overrides) bool {
	return ov.Ingest == nil && (ov.Mode == worktask.ModeNotification || ov.Mode == "" && r.opts.Mode == worktask.ModeNotification)
}
