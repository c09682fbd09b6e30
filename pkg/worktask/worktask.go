// Package worktask defines the messages that travel on fanout's work
// queue: chunk tasks (one chunk of a dataset to send, from a position on)
// and planning steps (the rest of a dataset's listing to plan into chunk
// tasks). fanout plans and consumes them; s3ingest hands large objects to
// fanout as chunk tasks.
package worktask

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
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
	// task, so that every worker sends the run the same way; nil means
	// none.
	Overrides *Overrides `json:"overrides,omitempty"`
	// Chain, when set, makes the object's chunks run one after another:
	// the run of this task is followed by its object's next chunk (see
	// Next), queued or run only once this one is sent. It is how records
	// reach a FIFO queue in their order in the object.
	Chain *Chain `json:"chain,omitempty"`
	// Versions, in notification mode, makes the task announce every
	// version of the chunk's key up to the chunk's own (the newest when it
	// was planned), oldest first, each as the record at its offset: the
	// chunk's End is how many there were. A FIFO queue so gets each key's
	// versions in one message group, in order (see dataset.Versions).
	Versions bool `json:"versions,omitempty"`
	// MessageID is the id of the SQS message that delivered the task, when
	// it came from a queue; it is not part of the message. A task with one
	// has its continuation queued by the engine (see engine.Runner.RunChains), and
	// a task that stopped before reading a record has its message come
	// back instead.
	MessageID string `json:"-"`
}

// Chain is how a chained task finds the next chunk of its object.
type Chain struct {
	// Step is the length of a chunk: bytes, or row groups for Parquet.
	Step int64 `json:"step"`
	// Total is the end of the object's last chunk.
	Total int64 `json:"total"`
}

// Next returns the task of the chunk that follows t's in a chain, as the
// planner would have planned it; ok is false when t is not chained or its
// chunk is the object's last.
func (t Task) Next() (next Task, ok bool) {
	if t.Chain == nil || t.Chunk.Index+1 >= t.Chunk.Count {
		return Task{}, false
	}
	next = t
	next.ResumeAt = 0
	next.Chunk.Index++
	next.Chunk.Start = t.Chunk.End
	next.Chunk.End = min(next.Chunk.Start+t.Chain.Step, t.Chain.Total)
	return next, true
}

// ID returns a deterministic identifier of the task, built from its run
// and its chunk (bucket, key, version or ETag, range), with the resume
// position when there is one: the same chunk of two runs are two tasks, a
// chunk planned twice in one run is one. It is valid as an SQS message
// deduplication id.
func (t Task) ID() string {
	h := sha256.New()
	fmt.Fprintf(h, "task\x00%s\x00%s", t.RunID, t.Chunk.ID())
	if t.Versions {
		h.Write([]byte("\x00versions"))
	}
	id := hex.EncodeToString(h.Sum(nil)[:16])
	if t.ResumeAt > 0 {
		return fmt.Sprintf("%s-%d", id, t.ResumeAt)
	}
	return id
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
	return entry(t.ID(), body, err, fifo)
}

// entry is the work-queue message of id and body, or err (see Task.Entry).
func entry(id, body string, err error, fifo bool) (sqsbatch.Entry, error) {
	if err != nil {
		return sqsbatch.Entry{}, err
	}
	e := sqsbatch.Entry{ID: id, Body: body}
	if fifo {
		e.GroupID, e.DeduplicationID = id, id
	}
	return e, nil
}

// ParkedEntry returns the message that puts back body, a work-queue
// message parked as runID's n-th (see runstate.Table.Unpark). On a FIFO
// queue it is its own message group, as each task the planner queues is,
// and is deduplicated by its parking, not its body: a task parked again
// after a resume has the same body, and SQS would drop it for five minutes.
func ParkedEntry(runID string, n int64, body string, fifo bool) sqsbatch.Entry {
	e := sqsbatch.Entry{ID: "0", Body: body}
	if fifo {
		group := sha256.Sum256([]byte(body))
		dedup := sha256.Sum256(fmt.Appendf(nil, "%s\x00parked\x00%d\x00%s", runID, n, body))
		e.GroupID, e.DeduplicationID = hex.EncodeToString(group[:]), hex.EncodeToString(dedup[:])
	}
	return e
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

// Error says why the task is malformed.
func (e *MalformedError) Error() string { return "worktask: malformed chunk task: " + e.Err.Error() }

// Unwrap returns the reason.
func (e *MalformedError) Unwrap() error { return e.Err }

// Parse reads a task from an SQS message body, strictly. A body without a
// "chunk" field is ErrNotTask; a task that cannot run, overrides a request
// could not have given included, is a *MalformedError.
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
	case t.Chain != nil && (t.Chain.Step < 1 || t.Chain.Total < c.End):
		return fmt.Errorf("chain step %d total %d: want step >= 1 and total >= the chunk's end %d", t.Chain.Step, t.Chain.Total, c.End)
	case t.Versions && (t.Chain != nil || c.Count != 1 || c.Start != 0 || c.End < 1):
		return fmt.Errorf("versions task of chunk [%d,%d) %d of %d: want one unchained chunk [0,n) of n >= 1 versions", c.Start, c.End, c.Index, c.Count)
	}
	if f, err := dataset.ParseFormat(string(c.Format)); err != nil || f != c.Format {
		return fmt.Errorf("chunk.format %q is not jsonl, csv, text or parquet", c.Format)
	}
	switch c.Compression {
	case dataset.CompressionNone, dataset.CompressionGzip, dataset.CompressionZstd:
	default:
		return fmt.Errorf("chunk.compression %q is not gzip or zstd", c.Compression)
	}
	return validateOverrides(t.Overrides)
}

// Plan is a planning step of a run: the rest of a dataset's listing, from
// Cursor on, to plan into chunk tasks. A request that runs out of time while
// it plans queues one, and each step queues the next until the listing
// ends, so that a dataset of any number of objects is planned across as
// many invocations as it takes.
type Plan struct {
	// RunID names the run the step plans.
	RunID string `json:"runId"`
	// Source is the dataset, as the request named it.
	Source dataset.Source `json:"plan"`
	// Cursor is where the listing resumes.
	Cursor dataset.Cursor `json:"cursor"`
	// Overrides are the run's, as on its tasks.
	Overrides *Overrides `json:"overrides,omitempty"`
	// Step numbers the run's planning steps; the request's is 1.
	Step int `json:"step"`
}

// ID returns a deterministic identifier of the step, built from its run,
// dataset and cursor: 32 hex characters, valid as an SQS deduplication id.
// A step queued twice has one id.
func (p Plan) ID() string {
	src, _ := json.Marshal(p.Source)
	cur, _ := json.Marshal(p.Cursor)
	h := sha256.New()
	fmt.Fprintf(h, "plan\x00%s\x00%s\x00%s", p.RunID, src, cur)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Entry returns the step as the message that carries it to the work
// queue, as Task.Entry does.
func (p Plan) Entry(fifo bool) (sqsbatch.Entry, error) {
	body, err := json.Marshal(p)
	return entry(p.ID(), string(body), err, fifo)
}

// ParsePlan reads a planning step from an SQS message body, strictly. A
// body without a "plan" field is ErrNotTask; a step that cannot run is a
// *MalformedError.
func ParsePlan(body string) (Plan, error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &probe) != nil || probe["plan"] == nil {
		return Plan{}, ErrNotTask
	}
	var p Plan
	if err := strictjson.Decode([]byte(body), &p); err != nil {
		return Plan{}, &MalformedError{Err: err}
	}
	if err := p.Source.Validate(); err != nil {
		return Plan{}, &MalformedError{Err: fmt.Errorf("plan: %w", err)}
	}
	if p.RunID == "" || p.Step < 1 {
		return Plan{}, &MalformedError{Err: fmt.Errorf("a planning step needs its runId and a step >= 1")}
	}
	if err := validateOverrides(p.Overrides); err != nil {
		return Plan{}, &MalformedError{Err: err}
	}
	return p, nil
}

// validateOverrides checks the overrides of a task or planning step, if
// any: one whose overrides a request could not have given is malformed.
func validateOverrides(ov *Overrides) error {
	if ov == nil {
		return nil
	}
	if err := ov.Validate(); err != nil {
		return fmt.Errorf("overrides: %w", err)
	}
	return nil
}
