// Package recordjson turns the records of an S3 object into the JSON
// message bodies s3ingest sends: each record a JSON object, with the Hive
// partition values of the object's key and a "_file" object naming its
// origin added. The engine (pkg/engine) encodes every task of s3ingest's
// with it, inline or handed off, so that a record arrives the same
// whichever invocation read it.
package recordjson

import (
	"bytes"
	"strconv"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/internal/jsonfields"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// PartitionMode says whether and how the Hive partition values of a key
// (the name=value directories) are added to its records.
type PartitionMode string

// Partition modes.
const (
	// PartitionsOff adds no partition fields. It is the zero value.
	PartitionsOff PartitionMode = ""
	// PartitionsString adds each value as a JSON string (null for
	// __HIVE_DEFAULT_PARTITION__).
	PartitionsString PartitionMode = "string"
	// PartitionsTyped adds numbers and booleans as JSON numbers and
	// booleans, and the other values as strings.
	PartitionsTyped PartitionMode = "typed"
)

// Fields the encoder adds to records.
const (
	// FieldFile holds the record's origin: bucket, key, version, eTag,
	// event time and position.
	FieldFile = "_file"
	// FieldLine holds a text record: {"line": "..."}.
	FieldLine = "line"
	// FieldValue holds a JSON Lines record that is not an object:
	// {"value": [1, 2]}.
	FieldValue = "value"
	// FieldDeleted and FieldEvent mark the record sent for a deletion when
	// IGNORE_DELETIONS=false.
	FieldDeleted = "_deleted"
	FieldEvent   = "_event"
)

// ErrNotJSON is wrapped by the *records.RecordError of a JSON Lines record
// that is not valid JSON. It is records.ErrNotJSON: package records refuses
// such lines as it reads them.
var ErrNotJSON = records.ErrNotJSON

// addedField is a field added to every record of an object, encoded once.
type addedField struct {
	name string // the field name, decoded
	key  []byte // the name as a JSON string, with quotes
	val  []byte // the JSON value
}

// Encoder turns the records of one object into JSON objects with the
// object's partition fields and _file added:
//
//   - a JSON Lines object, or a CSV or Parquet row (which package records
//     writes as an object), gets the fields after its own, its bytes kept;
//   - a JSON Lines value that is not an object becomes {"value": v, ...};
//   - a text line becomes {"line": "...", ...}.
//
// A field the record already has wins over an added one; onClash is called
// once per field name that clashed. An Encoder is used by one goroutine at a
// time.
type Encoder struct {
	format  dataset.Format
	fields  []addedField
	file    []byte // `{"bucket":...,"offset":` without the offset, or nil
	onClash func(name string)
	clashed map[string]bool
	keep    []bool // per field, reset per record
	buf     []byte // the body being built, reused from record to record
}

// NewEncoder returns the encoder of the records of obj, read as format. The
// partition fields come from obj.Key as mode says; with fileMetadata each
// record gets a _file object with obj's Bucket, Key, VersionID, ETag and
// EventTime (null when empty or zero) and the record's offset and line.
// The other fields of obj are not used. onClash may be nil.
func NewEncoder(format dataset.Format, obj s3event.Object, mode PartitionMode, fileMetadata bool, onClash func(string)) *Encoder {
	e := &Encoder{format: format, onClash: onClash}
	e.fields = partitionFields(obj, mode)
	if fileMetadata {
		e.file = fileObjectPrefix(obj)
		e.fields = append(e.fields, addedField{name: FieldFile, key: appendJSONString(nil, FieldFile)})
	}
	e.keep = make([]bool, len(e.fields))
	return e
}

// partitionFields returns the partition values of obj's key as fields. When
// a name appears twice in the key, the innermost directory wins.
func partitionFields(obj s3event.Object, mode PartitionMode) []addedField {
	if mode == PartitionsOff {
		return nil
	}
	var out []addedField
	for _, p := range obj.Partitions() {
		f := addedField{name: p.Name, key: appendJSONString(nil, p.Name), val: partitionValue(p, mode)}
		if i := indexField(out, p.Name); i >= 0 {
			out[i] = f
			continue
		}
		out = append(out, f)
	}
	return out
}

func indexField(fs []addedField, name string) int {
	for i, f := range fs {
		if f.name == name {
			return i
		}
	}
	return -1
}

// partitionValue encodes a partition value: null for
// __HIVE_DEFAULT_PARTITION__, a string, or in typed mode a number or a
// boolean when the value reads as one. A typed date stays the string it was
// in the key: JSON has no date type.
func partitionValue(p s3event.Partition, mode PartitionMode) []byte {
	if p.Null {
		return []byte("null")
	}
	if mode == PartitionsTyped {
		switch v := p.Typed().(type) {
		case int64:
			return strconv.AppendInt(nil, v, 10)
		case float64:
			return strconv.AppendFloat(nil, v, 'g', -1, 64)
		case bool:
			return strconv.AppendBool(nil, v)
		case time.Time:
			return appendJSONString(nil, v.Format(time.DateOnly))
		}
	}
	return appendJSONString(nil, p.Value)
}

// fileObjectPrefix encodes the _file object of obj up to its offset.
func fileObjectPrefix(obj s3event.Object) []byte {
	b := []byte(`{"bucket":`)
	b = appendJSONString(b, obj.Bucket)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, obj.Key)
	b = append(b, `,"versionId":`...)
	b = appendOptString(b, obj.VersionID)
	b = append(b, `,"eTag":`...)
	b = appendOptString(b, obj.ETag)
	b = append(b, `,"eventTime":`...)
	if obj.EventTime.IsZero() {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, obj.EventTime.UTC().Format(time.RFC3339Nano))
	}
	return append(b, `,"offset":`...)
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// Encode returns rec as a JSON object with the added fields, as the message
// body. A JSON Lines record that is not JSON is a *records.RecordError
// wrapping ErrNotJSON.
func (e *Encoder) Encode(obj dataset.Object, rec records.Record) (string, error) {
	v := rec.Value
	switch e.format {
	case dataset.FormatText:
		return e.wrap(FieldLine, appendJSONString(nil, v), rec), nil
	case dataset.FormatJSONL:
		// A UTF-8 byte order mark, which some writers put first in a
		// file, is not JSON.
		v = bytes.TrimSpace(bytes.TrimPrefix(v, []byte("\xef\xbb\xbf")))
		if !jsonfields.Valid(v) {
			return "", &records.RecordError{Object: obj, Offset: rec.Offset, Line: rec.Line, Err: ErrNotJSON}
		}
		if v[0] != '{' {
			return e.wrap(FieldValue, v, rec), nil
		}
	}
	// A JSON object: JSON Lines, or a CSV or Parquet row, which package
	// records writes as an object.
	for i := range e.keep {
		e.keep[i] = true
	}
	if len(e.fields) > 0 && e.mayClash(v) {
		jsonfields.Each(v, func(rawKey, _ []byte) bool {
			key, _ := jsonfields.Unquote(rawKey)
			if i := indexField(e.fields, key); i >= 0 {
				e.keep[i] = false
				e.clash(key)
			}
			return true
		})
	}
	last := bytes.LastIndexByte(v, '}')
	b := e.buf[:0]
	b = append(b, v[:last]...)
	sep := len(bytes.TrimSpace(v[1:last])) > 0
	b = e.appendFields(b, sep, rec)
	b = append(b, '}')
	e.buf = b
	return string(b), nil
}

// wrap returns {"name": val} with the added fields, for records that are
// not objects.
func (e *Encoder) wrap(name string, val []byte, rec records.Record) string {
	b := append(e.buf[:0], '{')
	b = appendJSONString(b, name)
	b = append(b, ':')
	b = append(b, val...)
	for i, f := range e.fields {
		e.keep[i] = f.name != name
		if !e.keep[i] {
			e.clash(name)
		}
	}
	b = append(e.appendFields(b, true, rec), '}')
	e.buf = b
	return string(b)
}

// mayClash reports whether an added field's name may be a key of the
// object v: cheap checks first, so that most records need no key scan.
func (e *Encoder) mayClash(v []byte) bool {
	if bytes.IndexByte(v, '\\') >= 0 {
		// A key may be written with escapes.
		return true
	}
	for _, f := range e.fields {
		if bytes.Contains(v, f.key) {
			return true
		}
	}
	return false
}

func (e *Encoder) clash(name string) {
	if e.clashed == nil {
		e.clashed = map[string]bool{}
	}
	if !e.clashed[name] {
		e.clashed[name] = true
		if e.onClash != nil {
			e.onClash(name)
		}
	}
}

// appendFields appends the kept added fields, each preceded by a comma
// unless it is the first and sep is false.
func (e *Encoder) appendFields(b []byte, sep bool, rec records.Record) []byte {
	for i, f := range e.fields {
		if !e.keep[i] {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, f.key...)
		b = append(b, ':')
		if f.name == FieldFile && f.val == nil {
			b = append(b, e.file...)
			b = strconv.AppendInt(b, rec.Offset, 10)
			if rec.Line > 0 {
				b = append(b, `,"line":`...)
				b = strconv.AppendInt(b, rec.Line, 10)
			}
			b = append(b, '}')
			continue
		}
		b = append(b, f.val...)
	}
	return b
}

// DeletionBody is the message sent for a deletion event when deletions are
// kept: {"_deleted":true,"_event":"ObjectRemoved:Delete",<partitions>,"_file":{...}}.
// It always has _file, which is all it can say.
func DeletionBody(obj s3event.Object, mode PartitionMode) string {
	b := []byte(`{"` + FieldDeleted + `":true,"` + FieldEvent + `":`)
	b = appendJSONString(b, obj.EventName)
	for _, f := range partitionFields(obj, mode) {
		if f.name == FieldDeleted || f.name == FieldEvent || f.name == FieldFile {
			continue
		}
		b = append(b, ',')
		b = append(b, f.key...)
		b = append(b, ':')
		b = append(b, f.val...)
	}
	b = append(b, `,"`+FieldFile+`":`...)
	b = append(b, fileObjectPrefix(obj)...)
	b = append(b, "null}}"...)
	return string(b)
}

// appendJSONString appends s as a JSON string. Control characters, '"' and
// '\' are escaped; other bytes, including invalid UTF-8, are copied, so that
// sqsbatch can reject or replace them as configured.
func appendJSONString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
