package fanout

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/s3sqs/s3sqs/internal/settings"
	"github.com/s3sqs/s3sqs/internal/strictjson"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Overrides are the per-run settings a request may give. They travel with
// the run's tasks. Each is checked as the environment variable of the same
// name is (see Validate); empty means the runner's setting.
type Overrides struct {
	Format         dataset.Format `json:"format,omitempty"`
	Mode           Mode           `json:"mode,omitempty"`
	TargetQueueURL string         `json:"targetQueueUrl,omitempty"`
	// ChunkSize is the run's chunk size: bytes, or a string such as
	// "8MiB" (CHUNK_SIZE).
	ChunkSize Setting `json:"chunkSize,omitempty"`
	// MaxInFlight is the run's requests in flight per chunk
	// (MAX_IN_FLIGHT).
	MaxInFlight Setting `json:"maxInFlight,omitempty"`
	// MaxAttempts is the run's attempts per entry (MAX_ATTEMPTS).
	MaxAttempts Setting `json:"maxAttempts,omitempty"`
	Mapping
	// Ingest, when set, makes the run's records go out as s3ingest sends
	// them (see IngestEncoding) instead of through the Mapping.
	Ingest *IngestEncoding `json:"ingest,omitempty"`
}

// Setting is a numeric setting as a request writes it: a JSON number, or a
// string such as "8MiB". It is kept as written and checked by Validate, so
// that a bad value is refused with its field's name and range.
type Setting string

// UnmarshalJSON takes a JSON number or string.
func (s *Setting) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = Setting(v)
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		*s = Setting(b)
	default:
		return &json.UnmarshalTypeError{Value: strictjson.Kind(b), Type: reflect.TypeFor[float64]()}
	}
	return nil
}

// MarshalJSON writes a number as a JSON number, anything else as a string.
func (s Setting) MarshalJSON() ([]byte, error) {
	if json.Valid([]byte(s)) && s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return []byte(s), nil
	}
	return json.Marshal(string(s))
}

// IngestEncoding is set by s3ingest on the chunk tasks of an object it
// hands off, so that fanout sends each record exactly as s3ingest would
// have: one record per message, its body the JSON object of
// [recordjson.Encoder] (the record with the key's partition fields and, when
// FileMetadata is set, a _file object), its only attribute s3sqs-record-id
// (see [RecordID]), and on a FIFO queue the group [GroupID] of the
// object with the record id as deduplication id. Mode, Mapping and the
// configured mode are ignored. The _file object's bucket, key, versionId and
// eTag are the task chunk's; its eventTime is EventTime.
type IngestEncoding struct {
	// Partitions says whether and how the key's partition values are
	// added; "" adds none.
	Partitions recordjson.PartitionMode `json:"partitions,omitempty"`
	// FileMetadata adds the _file object.
	FileMetadata bool `json:"fileMetadata,omitempty"`
	// EventTime is the time of the S3 event that named the object; zero
	// writes null.
	EventTime time.Time `json:"eventTime,omitzero"`
}

// Request names a dataset to send, with optional per-run overrides.
type Request struct {
	dataset.Source
	Overrides
	// RunID names the run; empty means a new random id.
	RunID string `json:"runId,omitempty"`
}

// Validate reports the first problem of the request: a source that does
// not name exactly one dataset, a setting out of its range, or a bad run
// id. Every error names the request's field.
func (r *Request) Validate() error {
	if err := r.Source.Validate(); err != nil {
		return err
	}
	if err := r.Overrides.Validate(); err != nil {
		return err
	}
	return CheckRunID(r.RunID)
}

// CheckRunID reports a run id that cannot name a run: longer than 80
// characters, or with characters other than letters, digits, '-', '_' and
// '.'. The empty id is allowed: it means a new one.
func CheckRunID(id string) error { return settings.CheckRunID(id) }

// Validate checks each override with the check of the environment
// variable of the same name, and normalises Format and Mode. Every error
// names the field, the value and what is allowed.
func (ov *Overrides) Validate() error {
	if ov.Format != "" {
		f, err := settings.Format.Parse(string(ov.Format))
		if err != nil {
			return fmt.Errorf("format: %w", err)
		}
		ov.Format = dataset.Format(f)
	}
	if ov.Mode != "" {
		m, err := settings.Mode.Parse(string(ov.Mode))
		if err != nil {
			return fmt.Errorf("mode: %w", err)
		}
		ov.Mode = Mode(m)
	}
	if ov.TargetQueueURL != "" {
		if err := settings.CheckQueueURL(ov.TargetQueueURL); err != nil {
			return fmt.Errorf("targetQueueUrl: %w", err)
		}
	}
	for _, s := range []struct {
		name  string
		v     Setting
		parse func(string) (int64, error)
	}{
		{"chunkSize", ov.ChunkSize, settings.ChunkSize.Parse},
		{"maxInFlight", ov.MaxInFlight, settings.MaxInFlight.Parse},
		{"maxAttempts", ov.MaxAttempts, settings.MaxAttempts.Parse},
	} {
		if s.v == "" {
			continue
		}
		if _, err := s.parse(string(s.v)); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if ie := ov.Ingest; ie != nil {
		switch ie.Partitions {
		case recordjson.PartitionsOff, recordjson.PartitionsString, recordjson.PartitionsTyped:
		default:
			return fmt.Errorf("ingest.partitions: %q is not string or typed", ie.Partitions)
		}
	}
	return nil
}

// settings returns the checked numeric overrides; zero means not given.
// Validate has checked them.
func (ov *Overrides) settings() (chunkSize int64, maxInFlight, maxAttempts int) {
	if ov.ChunkSize != "" {
		chunkSize, _ = settings.ChunkSize.Parse(string(ov.ChunkSize))
	}
	if ov.MaxInFlight != "" {
		n, _ := settings.MaxInFlight.Parse(string(ov.MaxInFlight))
		maxInFlight = int(n)
	}
	if ov.MaxAttempts != "" {
		n, _ := settings.MaxAttempts.Parse(string(ov.MaxAttempts))
		maxAttempts = int(n)
	}
	return chunkSize, maxInFlight, maxAttempts
}

// DecodeRequest reads a request strictly: unknown fields, values of the
// wrong type, trailing data and values out of range are refused with an
// error that names the field, before anything is listed or sent.
func DecodeRequest(payload []byte) (Request, error) {
	var req Request
	if err := strictjson.Decode(payload, &req); err != nil {
		return Request{}, fmt.Errorf("fanout: bad request: %w", err)
	}
	if err := req.Validate(); err != nil {
		return Request{}, fmt.Errorf("fanout: bad request: %w", err)
	}
	return req, nil
}

// overridesOf reads the overrides a task or planning step carries as
// strictly as a request's: one whose overrides a request could not have
// given is malformed.
func overridesOf(raw json.RawMessage) (Overrides, error) {
	var ov Overrides
	if len(raw) == 0 {
		return ov, nil
	}
	err := strictjson.Decode(raw, &ov)
	if err == nil {
		err = ov.Validate()
	}
	if err != nil {
		return Overrides{}, &worktask.MalformedError{Err: fmt.Errorf("overrides: %w", err)}
	}
	return ov, nil
}
