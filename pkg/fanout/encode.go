package fanout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Message attributes fanout sets on every message.
const (
	// AttrRecordID is the deterministic id of the record (record mode) or
	// of the first record of the message (chunk mode).
	AttrRecordID = "s3sqs-record-id"
	// AttrSource is the s3://bucket/key of the record's object.
	AttrSource = "s3sqs-source"
	// AttrVersion is the object's version id, or its ETag.
	AttrVersion = "s3sqs-version"
	// AttrFirst and AttrLast are the offsets of the first and last records
	// of a chunk-mode message.
	AttrFirst = "s3sqs-first"
	AttrLast  = "s3sqs-last"
	// AttrCount is the number of records of a chunk-mode message.
	AttrCount = "s3sqs-count"
)

// Mode says how records become messages.
type Mode string

// Modes.
const (
	// ModeRecord sends one record per message.
	ModeRecord Mode = "record"
	// ModeChunk sends many records per message, newline-delimited.
	ModeChunk Mode = "chunk"
)

// Mapping names the record fields that become parts of a message. Empty
// fields mean the defaults of the Spark SQS sink.
type Mapping struct {
	// BodyField is the field sent as the body; "" means "value". Without
	// it a record is its own body.
	BodyField string `json:"bodyField,omitempty"`
	// AttributesField is an object of strings sent as message attributes;
	// "" means "msg_attributes".
	AttributesField string `json:"attributesField,omitempty"`
	// GroupIDField is the FIFO message group; "" means "group_id".
	GroupIDField string `json:"groupIdField,omitempty"`
	// DedupIDField, when set, is the FIFO deduplication id.
	DedupIDField string `json:"dedupIdField,omitempty"`
}

func (m Mapping) withDefaults() Mapping {
	if m.BodyField == "" {
		m.BodyField = "value"
	}
	if m.AttributesField == "" {
		m.AttributesField = "msg_attributes"
	}
	if m.GroupIDField == "" {
		m.GroupIDField = "group_id"
	}
	return m
}

// RecordID returns the deterministic id of the record at offset in obj: 32
// hex characters of SHA-256 over bucket, key, version (or ETag) and offset.
// s3ingest builds its record ids the same way, so a record has one id
// whichever function sent it.
func RecordID(obj dataset.Object, offset int64) string {
	return NewRecordIDs(obj).ID(offset)
}

// RecordIDs makes the record ids of one object, as RecordID does, without
// formatting the object's pin again for each record. It is not safe for
// concurrent use.
type RecordIDs struct {
	buf    []byte
	prefix int
}

// NewRecordIDs returns the record id maker of obj.
func NewRecordIDs(obj dataset.Object) *RecordIDs {
	pin := obj.Pin()
	b := make([]byte, 0, len(obj.Bucket)+len(obj.Key)+len(pin)+24)
	b = append(append(append(append(append(b, obj.Bucket...), 0), obj.Key...), 0), pin...)
	b = append(b, 0)
	return &RecordIDs{buf: b, prefix: len(b)}
}

// ID returns the id of the record at offset.
func (r *RecordIDs) ID(offset int64) string {
	r.buf = strconv.AppendInt(r.buf[:r.prefix], offset, 10)
	sum := sha256.Sum256(r.buf)
	return hex.EncodeToString(sum[:16])
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func numberAttr(v int64) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(v, 10))}
}

// GroupID is the FIFO message group of an object's records when the
// mapping gives none: a hash of bucket and key, so that the records of one
// object stay in order, objects are delivered in parallel, and any key (up
// to 1,024 bytes, any characters, where a group id allows 128 of a few) gives
// a valid group id. Both functions and both modes use it.
func GroupID(obj dataset.Object) string {
	h := sha256.Sum256([]byte(obj.Bucket + "\x00" + obj.Key))
	return hex.EncodeToString(h[:16])
}

// recordEntry maps one record to an entry in record mode. json says
// whether the record is JSON (not a text line). The error, if any, says
// why the record cannot be mapped; the entry then holds the raw record.
func (m Mapping) recordEntry(ids *RecordIDs, obj dataset.Object, rec records.Record, isJSON bool) (sqsbatch.Entry, error) {
	id := ids.ID(rec.Offset)
	e := sqsbatch.Entry{
		Body: string(rec.Value),
		Attributes: map[string]types.MessageAttributeValue{
			AttrRecordID: stringAttr(id),
			AttrSource:   stringAttr(obj.URI()),
		},
		DeduplicationID: id,
	}
	if v := obj.Pin(); v != "" {
		e.Attributes[AttrVersion] = stringAttr(v)
	}
	if !isJSON {
		return e, nil
	}
	trimmed := bytes.TrimSpace(rec.Value)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return e, nil // a JSON value that is not an object is its own body
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return e, fmt.Errorf("record is not valid JSON: %w", err)
	}
	if raw, ok := fields[m.BodyField]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			e.Body = s
		} else {
			e.Body = string(raw)
		}
	}
	if raw, ok := fields[m.AttributesField]; ok && string(raw) != "null" {
		var attrs map[string]string
		if err := json.Unmarshal(raw, &attrs); err != nil {
			return e, fmt.Errorf("field %q is not an object of strings: %w", m.AttributesField, err)
		}
		for k, v := range attrs {
			e.Attributes[k] = stringAttr(v)
		}
	}
	if s, err := stringField(fields, m.GroupIDField); err != nil {
		return e, err
	} else if s != "" {
		e.GroupID = s
	}
	if m.DedupIDField != "" {
		if s, err := stringField(fields, m.DedupIDField); err != nil {
			return e, err
		} else if s != "" {
			e.DeduplicationID = s
		}
	}
	return e, nil
}

// stringField returns a string or number field as a string.
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("field %q is neither a string nor a number", name)
}

// chunkPacker gathers records into chunk-mode messages of at most max
// bytes, counting attributes as SQS does.
type chunkPacker struct {
	obj   dataset.Object
	max   int
	body  bytes.Buffer
	first int64
	last  int64
	n     int
}

// overhead is a generous bound on the attributes of a chunk-mode message.
const chunkOverhead = 512

// add adds a record; it returns a full message to send first when the
// record does not fit beside what is gathered, with the records it holds.
func (p *chunkPacker) add(rec records.Record) (sqsbatch.Entry, span, bool) {
	var (
		out  sqsbatch.Entry
		held span
		full bool
	)
	if p.n > 0 && p.body.Len()+1+len(rec.Value)+len(p.obj.Pin())+len(p.obj.Key)+chunkOverhead > p.max {
		out, held = p.flush()
		full = true
	}
	if p.n > 0 {
		p.body.WriteByte('\n')
	} else {
		p.first = rec.Offset
	}
	p.body.Write(rec.Value)
	p.last = rec.Offset
	p.n++
	return out, held, full
}

// flush returns the gathered records as one entry, with the records it
// holds, and starts anew.
func (p *chunkPacker) flush() (sqsbatch.Entry, span) {
	id := RecordID(p.obj, p.first)
	e := sqsbatch.Entry{
		Body: p.body.String(),
		Attributes: map[string]types.MessageAttributeValue{
			AttrRecordID: stringAttr(id),
			AttrSource:   stringAttr(p.obj.URI()),
			AttrFirst:    numberAttr(p.first),
			AttrLast:     numberAttr(p.last),
			AttrCount:    numberAttr(int64(p.n)),
		},
		DeduplicationID: id,
		GroupID:         GroupID(p.obj),
	}
	if v := p.obj.Pin(); v != "" {
		e.Attributes[AttrVersion] = stringAttr(v)
	}
	held := span{offset: p.first, count: p.n}
	p.body.Reset()
	p.n = 0
	return e, held
}

// ParseSize reads a size as configuration writes it: "8388608", "8MiB",
// "512KiB" or "1GiB".
func ParseSize(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || v > (1<<62)/u.mult {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return v * u.mult, nil
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
