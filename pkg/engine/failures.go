package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/textcut"
)

// Failure is a record that did not reach its queue, as the failure output
// holds it: what it was, where it came from and why it failed.
type Failure struct {
	RunID  string `json:"runId"`
	Source string `json:"source"`
	// Version is the object's version id or ETag.
	Version string `json:"version,omitempty"`
	// Offset is the record's position in the object.
	Offset int64 `json:"offset"`
	// RecordID is the record id (AttrRecordID) the message had, or the
	// record would have had, so that a redrive sends it under the same id.
	RecordID string `json:"recordId,omitempty"`
	// Code is SQS's error code, a validation rule, or a read error kind.
	Code    string `json:"code"`
	Message string `json:"message"`
	// SenderFault reports that resending the record unchanged would fail.
	SenderFault bool   `json:"senderFault"`
	Attempts    int    `json:"attempts"`
	Body        string `json:"body,omitempty"`
	// Truncated is set when Body was cut to fit the failure queue.
	Truncated bool `json:"truncated,omitempty"`

	// at is the record's offset in its task, where the task resumes to
	// send it again: Offset, except in a Versions task, whose record at is
	// the notification of version (see failedAt).
	at      int64
	version *dataset.Object
	// records is how many records the failure stands for, when more than
	// one: a chunk-mode message's.
	records int64
}

// failureSink writes failures to the configured output: a queue, an S3
// object per task, or (with neither) the log at error level.
type failureSink struct {
	w      io.Writer
	wmu    sync.Mutex
	queue  *sqsbatch.Sender
	bucket string
	prefix string
	s3     S3API
	log    *slog.Logger
}

// write puts the failures of a task on the output. name identifies the
// attempt at the task (see attemptName), for the S3 object's key and the
// FIFO deduplication id.
func (s *failureSink) write(ctx context.Context, runID, name string, fs []Failure) error {
	if len(fs) == 0 {
		return nil
	}
	switch {
	case s.w != nil:
		s.wmu.Lock()
		defer s.wmu.Unlock()
		enc := json.NewEncoder(s.w)
		for _, f := range fs {
			if err := enc.Encode(f); err != nil {
				return fmt.Errorf("fanout: write failures: %w", err)
			}
		}
		return nil
	case s.queue != nil:
		entries := make([]sqsbatch.Entry, len(fs))
		limit := s.queue.MaxMessageSize() - 256
		for i, f := range fs {
			b := marshalForSQS(f)
			if len(b) > limit {
				f.Body, f.Truncated = textcut.Prefix(f.Body, len(f.Body)-(len(b)-limit)-16), true
				b = marshalForSQS(f)
			}
			entries[i] = sqsbatch.Entry{ID: fmt.Sprint(i), Body: string(b), GroupID: runID, DeduplicationID: fmt.Sprintf("%s-%s-%d", name, f.Code, f.at)}
			if !s.queue.FIFO() {
				entries[i].GroupID, entries[i].DeduplicationID = "", ""
			}
		}
		res, err := s.queue.SendEntries(ctx, entries)
		if err != nil {
			return fmt.Errorf("fanout: write %d failures to the failure queue: %w", len(fs), err)
		}
		if res.Failed > 0 {
			return fmt.Errorf("fanout: %d of %d failures did not reach the failure queue: %s", res.Failed, len(fs), res.Failures[0])
		}
		return nil
	case s.bucket != "":
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, f := range fs {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		key := strings.TrimSuffix(s.prefix, "/")
		if key != "" {
			key += "/"
		}
		key += runID + "/" + name + ".jsonl"
		_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes()), ContentType: aws.String("application/x-ndjson")})
		if err != nil {
			return fmt.Errorf("fanout: write %d failures to s3://%s/%s: %w", len(fs), s.bucket, key, err)
		}
		return nil
	default:
		for _, f := range fs {
			s.log.ErrorContext(ctx, "record failed", "run", f.RunID, "source", f.Source, "offset", f.Offset,
				"code", f.Code, "message", f.Message, "attempts", f.Attempts, "body", textcut.Prefix(f.Body, 1024))
		}
		return nil
	}
}

// marshalForSQS encodes f as JSON that SQS accepts as a message body.
// json.Marshal escapes control characters but writes U+FFFE and U+FFFF as
// they are, and SQS refuses them: a record refused for holding one could
// not reach the failure queue, and its task would fail for good. They are
// escaped here, which decodes to the same body.
func marshalForSQS(f Failure) []byte {
	b, _ := json.Marshal(f)
	if !bytes.ContainsAny(b, "\ufffe\uffff") {
		return b
	}
	b = bytes.ReplaceAll(b, []byte("\ufffe"), []byte(`\ufffe`))
	return bytes.ReplaceAll(b, []byte("\uffff"), []byte(`\uffff`))
}

func failureFrom(f Failure, e *sqsbatch.EntryError) Failure {
	f.RecordID = aws.ToString(e.Entry.Attributes[AttrRecordID].StringValue)
	f.Code, f.Message, f.SenderFault, f.Attempts, f.Body = e.Code, e.Message, e.SenderFault, e.Attempts, e.Entry.Body
	return f
}

// unreadable returns the failure code of a read error that no retry
// fixes, the same bytes giving the same error: a corrupt or truncated
// object, one in a part of its format s3sqs does not read, one changed
// since it was planned, or a compressed one planned as byte ranges. ok is false for any other error, and, for s3ingest's
// objects (ingest), for a changed one: the notified version is then
// superseded, and a later notification names the new one.
func unreadable(err error, ingest bool) (code string, ok bool) {
	var enc *dataset.EncodingError
	switch {
	case errors.Is(err, dataset.ErrCorrupt):
		return "CorruptObject", true
	case errors.Is(err, dataset.ErrUnsupported):
		return "UnsupportedObject", true
	case errors.Is(err, dataset.ErrChanged):
		return "ObjectChanged", !ingest
	case errors.As(err, &enc):
		return "ObjectEncoded", true
	}
	return "", false
}
