package worktask

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
)

// Overrides are the per-run settings a request may give. They travel with
// the run's tasks and planning steps, so that every worker sends the run
// the same way. Each is checked as the environment variable of the same
// name is (see Validate); empty means the runner's setting. Overrides are
// read from JSON once, where the request or message is decoded, and then
// used as they are.
type Overrides struct {
	Format dataset.Format `json:"format,omitempty"`
	Mode   Mode           `json:"mode,omitempty"`
	// NotificationFormat is the shape of ModeNotification's messages
	// (NOTIFICATION_FORMAT): "s3", "eventbridge" or "sns".
	NotificationFormat string `json:"notificationFormat,omitempty"`
	TargetQueueURL     string `json:"targetQueueUrl,omitempty"`
	// ChunkSize is the run's chunk size in bytes (CHUNK_SIZE).
	ChunkSize Setting `json:"chunkSize,omitzero"`
	// MaxInFlight is the run's ceiling of requests in flight to its
	// target (MAX_IN_FLIGHT).
	MaxInFlight Setting `json:"maxInFlight,omitzero"`
	// MaxAttempts is the run's attempts per entry (MAX_ATTEMPTS).
	MaxAttempts Setting `json:"maxAttempts,omitzero"`
	// MaxRate is the run-wide ceiling of messages per second (MAX_RATE).
	MaxRate Setting `json:"maxRate,omitzero"`
	// TargetMaxBacklog is the target's backlog above which the run's
	// sends hold (TARGET_MAX_BACKLOG).
	TargetMaxBacklog Setting `json:"targetMaxBacklog,omitzero"`
	// MaxFailures and MaxFailedObjects are the run's failure budget
	// (MAX_FAILURES, MAX_FAILED_OBJECTS): past either, the run stops
	// itself (see engine.Options.Control.MaxFailures).
	MaxFailures      Limit `json:"maxFailures,omitzero"`
	MaxFailedObjects Limit `json:"maxFailedObjects,omitzero"`
	Mapping
	// Ingest, when set, makes the run's records go out as s3ingest sends
	// them (see IngestEncoding) instead of through the Mapping.
	Ingest *IngestEncoding `json:"ingest,omitempty"`
}

// Mode says how records become messages.
type Mode string

// Modes.
const (
	// ModeRecord sends one record per message.
	ModeRecord Mode = "record"
	// ModeChunk sends many records per message, newline-delimited.
	ModeChunk Mode = "chunk"
	// ModeNotification sends one S3 event notification per object,
	// without reading the object (see s3event.Encoder).
	ModeNotification Mode = "notification"
)

// Mapping names the record fields that become parts of a message. Empty
// fields take no part: the zero Mapping sends each record whole as its
// body. The Spark SQS sink's column mapping is value, msg_attributes and
// group_id.
type Mapping struct {
	// BodyField, when set, is the field sent as the body: a record that
	// has it is sent as that field, its other fields left out (counted in
	// the run's summary); one without it is its own body.
	BodyField string `json:"bodyField,omitempty"`
	// AttributesField, when set, is an object of strings sent as message
	// attributes.
	AttributesField string `json:"attributesField,omitempty"`
	// GroupIDField, when set, is the FIFO message group; a record without
	// it goes in its object's.
	GroupIDField string `json:"groupIdField,omitempty"`
	// DedupIDField, when set, is the FIFO deduplication id.
	DedupIDField string `json:"dedupIdField,omitempty"`
	// GroupIDPartition, when set, is a Hive partition column of the key
	// (tenant in tenant=acme/): its value is the message group of the
	// object's records that GroupIDField gives none, on any queue. An
	// object whose key has no such column is as without it.
	GroupIDPartition string `json:"groupIdPartition,omitempty"`
}

// ReadsFields reports whether m takes any field of a record: a mapping of
// the partition group alone reads none.
func (m Mapping) ReadsFields() bool {
	return m.BodyField != "" || m.AttributesField != "" || m.GroupIDField != "" || m.DedupIDField != ""
}

// IngestEncoding is set by s3ingest on the chunk tasks of an object it
// hands off, so that fanout sends each record exactly as s3ingest would
// have: one record per message, its body the JSON object of
// [recordjson.Encoder] (the record with the key's partition fields and, when
// FileMetadata is set, a _file object), its only attribute s3sqs-record-id,
// and on a FIFO queue the object's group with the record id as
// deduplication id. Mode, Mapping and the configured mode are ignored. The
// _file object's bucket, key, versionId and eTag are the task chunk's; its
// eventTime is EventTime.
type IngestEncoding struct {
	// Partitions says whether and how the key's partition values are
	// added; "" adds none.
	Partitions recordjson.PartitionMode `json:"partitions,omitempty"`
	// FileMetadata adds the _file object.
	FileMetadata bool `json:"fileMetadata,omitempty"`
	// EventTime is the time of the S3 event that named the object; zero
	// writes null.
	EventTime time.Time `json:"eventTime,omitzero"`
	// GroupIDPartition, when set, is a Hive partition column of the key
	// whose value is the message group of the object's records, as
	// Mapping.GroupIDPartition is fanout's (GROUP_ID_PARTITION).
	GroupIDPartition string `json:"groupIdPartition,omitempty"`
}

// Setting is a numeric override: its value, and the text it was written
// as (a JSON number, or a string such as "8MiB"), which goes back on the
// queue as written, so that a task or planning step re-encodes to the
// bytes it was read from. The zero Setting is one not given. Decoding
// reads the value; Overrides.Validate checks it against its field's range,
// with the field's name in the error.
type Setting struct {
	text  string
	value int64
}

// SettingOf returns the setting written as text: a whole number, or a
// size such as "8MiB". A text that is neither has the value 0 and is
// refused by Overrides.Validate.
func SettingOf(text string) Setting {
	n, _ := settings.ParseSize(strings.TrimSpace(text))
	return Setting{text: text, value: n}
}

// Value returns the setting's value; 0 when it is not given.
func (s Setting) Value() int64 { return s.value }

// IsZero reports whether the setting is not given.
func (s Setting) IsZero() bool { return s.text == "" }

// Equal reports whether s and o are written alike, which go-cmp uses to
// compare overrides.
func (s Setting) Equal(o Setting) bool { return s == o }

// String returns the setting as it was written.
func (s Setting) String() string { return s.text }

// UnmarshalJSON takes a JSON number or string.
func (s *Setting) UnmarshalJSON(b []byte) error {
	text, err := writtenAs(b, reflect.TypeFor[float64]())
	*s = SettingOf(text)
	return err
}

// writtenAs returns how the JSON number or string b was written: the
// number's text, or the string. Any other JSON value is an
// UnmarshalTypeError for a field of type want.
func writtenAs(b []byte, want reflect.Type) (string, error) {
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		err := json.Unmarshal(b, &v)
		return v, err
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		return string(b), nil
	}
	return "", &json.UnmarshalTypeError{Value: strictjson.Kind(b), Type: want}
}

// MarshalJSON writes a number as a JSON number, anything else as a string.
func (s Setting) MarshalJSON() ([]byte, error) {
	if json.Valid([]byte(s.text)) && s.text != "" && (s.text[0] == '-' || s.text[0] >= '0' && s.text[0] <= '9') {
		return []byte(s.text), nil
	}
	return json.Marshal(s.text)
}

// Validate checks each override with the check of the environment
// variable of the same name (pkg/settings), sets the numeric ones'
// values and normalises Format and Mode. Every error names the field, the
// value and what is allowed.
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
	if ov.NotificationFormat != "" {
		f, err := settings.NotificationFormat.Parse(ov.NotificationFormat)
		if err != nil {
			return fmt.Errorf("notificationFormat: %w", err)
		}
		ov.NotificationFormat = f
	}
	if ov.TargetQueueURL != "" {
		if err := settings.CheckQueueURL(ov.TargetQueueURL); err != nil {
			return fmt.Errorf("targetQueueUrl: %w", err)
		}
	}
	for _, s := range []struct {
		row   settings.Row
		v     *Setting
		parse func(string) (int64, error)
	}{
		{settings.ChunkSize.Row, &ov.ChunkSize, settings.ChunkSize.Parse},
		{settings.MaxInFlight.Row, &ov.MaxInFlight, settings.MaxInFlight.Parse},
		{settings.MaxAttempts.Row, &ov.MaxAttempts, settings.MaxAttempts.Parse},
		{settings.MaxRate.Row, &ov.MaxRate, settings.MaxRate.Parse},
		{settings.TargetMaxBacklog.Row, &ov.TargetMaxBacklog, settings.TargetMaxBacklog.Parse},
	} {
		if s.v.IsZero() {
			continue
		}
		n, err := s.parse(s.v.text)
		if err != nil {
			return fmt.Errorf("%s: %w", s.row.Field, err)
		}
		s.v.value = n
	}
	if err := ov.MaxFailures.validate(settings.MaxFailures); err != nil {
		return err
	}
	if err := ov.MaxFailedObjects.validate(settings.MaxFailedObjects); err != nil {
		return err
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
