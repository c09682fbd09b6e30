// Package worktask defines the chunk tasks that travel on fanout's work
// queue: one chunk of a dataset to send, from a position on. fanout plans
// them and consumes them; s3ingest hands large objects to fanout with them.
package worktask

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/s3sqs/s3sqs/internal/strictjson"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Task is one chunk to send.
type Task struct {
	// RunID names the run the task belongs to.
	RunID string `json:"runId"`
	// Chunk is the part of an object to read.
	Chunk dataset.Chunk `json:"chunk"`
	// ResumeAt, when above zero, skips the chunk's records that start
	// before it: they were sent by an earlier invocation that stopped
	// before its deadline.
	ResumeAt int64 `json:"resumeAt,omitempty"`
	// Overrides holds per-run settings of the request that planned the
	// task, so that every worker sends the run the same way.
	Overrides json.RawMessage `json:"overrides,omitempty"`
}

// ID returns a deterministic identifier of the task: the chunk's, with the
// resume position when there is one. It is valid as an SQS message
// deduplication id.
func (t Task) ID() string {
	if t.ResumeAt > 0 {
		return fmt.Sprintf("%s-%d", t.Chunk.ID(), t.ResumeAt)
	}
	return t.Chunk.ID()
}

// Marshal returns the task as an SQS message body.
func (t Task) Marshal() (string, error) {
	b, err := json.Marshal(t)
	return string(b), err
}

// Entry returns the task as the message that carries it to the work
// queue: its id is the task's, which is also its group and deduplication id
// on a FIFO queue, so that a task queued twice runs once there.
func (t Task) Entry(fifo bool) (sqsbatch.Entry, error) {
	body, err := t.Marshal()
	if err != nil {
		return sqsbatch.Entry{}, err
	}
	id := t.ID()
	e := sqsbatch.Entry{ID: id, Body: body}
	if fifo {
		e.GroupID, e.DeduplicationID = id, id
	}
	return e, nil
}

// ErrNotTask is returned by Parse for a body that is not a chunk task at
// all (not a JSON object with a "chunk" field), so that the caller may read
// it as another kind of message.
var ErrNotTask = errors.New("worktask: not a chunk task")

// MalformedError is a body that is a chunk task, but one that can never
// run: unknown fields, wrong types, or a chunk that names no object or a
// range that cannot be read. Retrying it cannot help.
type MalformedError struct {
	Err error
}

func (e *MalformedError) Error() string { return "worktask: malformed chunk task: " + e.Err.Error() }

// Unwrap returns the reason.
func (e *MalformedError) Unwrap() error { return e.Err }

// Parse reads a task from an SQS message body, strictly. A body without a
// "chunk" field is ErrNotTask; a task that cannot run is a *MalformedError.
// The overrides are left to the consumer, which knows their fields.
func Parse(body string) (Task, error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &probe) != nil || probe["chunk"] == nil {
		return Task{}, ErrNotTask
	}
	var t Task
	if err := strictjson.Decode([]byte(body), &t); err != nil {
		return Task{}, &MalformedError{Err: err}
	}
	if err := t.Validate(); err != nil {
		return Task{}, &MalformedError{Err: err}
	}
	return t, nil
}

// Validate reports a task that cannot run.
func (t Task) Validate() error {
	c := t.Chunk
	switch {
	case c.Bucket == "" || c.Key == "":
		return errors.New("chunk.bucket and chunk.key are required")
	case c.Format == "" || c.Format == dataset.FormatAuto:
		return errors.New("chunk.format is required (jsonl, csv, text or parquet)")
	case c.Start < 0 || c.End < c.Start:
		return fmt.Errorf("chunk range [%d,%d) is not a range: want 0 <= start <= end", c.Start, c.End)
	case c.Count < 1 || c.Index < 0 || c.Index >= c.Count:
		return fmt.Errorf("chunk index %d of %d: want 0 <= index < count", c.Index, c.Count)
	case c.Size < 0:
		return fmt.Errorf("chunk size %d is negative", c.Size)
	case t.ResumeAt < 0:
		return fmt.Errorf("resumeAt %d is negative", t.ResumeAt)
	}
	if f, err := dataset.ParseFormat(string(c.Format)); err != nil || f != c.Format {
		return fmt.Errorf("chunk.format %q is not jsonl, csv, text or parquet", c.Format)
	}
	switch c.Compression {
	case dataset.CompressionNone, dataset.CompressionGzip, dataset.CompressionZstd:
	default:
		return fmt.Errorf("chunk.compression %q is not gzip or zstd", c.Compression)
	}
	return nil
}
