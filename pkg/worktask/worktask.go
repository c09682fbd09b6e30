// Package worktask defines the chunk tasks that travel on fanout's work
// queue: one chunk of a dataset to send, from a position on. fanout plans
// them and consumes them; s3ingest hands large objects to fanout with them.
package worktask

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/s3sqs/s3sqs/pkg/dataset"
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

// Parse reads a task from an SQS message body.
func Parse(body string) (Task, error) {
	var t Task
	if err := json.Unmarshal([]byte(body), &t); err != nil {
		return Task{}, fmt.Errorf("worktask: %w", err)
	}
	if t.Chunk.Bucket == "" || t.Chunk.Key == "" || t.Chunk.Format == "" {
		return Task{}, errors.New("worktask: body is not a chunk task (no chunk bucket, key or format)")
	}
	return t, nil
}
