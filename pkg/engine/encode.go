package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/internal/jsonfields"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Message attributes the engine sets on every message.
const (
	// AttrRecordID is the deterministic id of the record (record mode,
	// RecordID) or of exactly the records the message carries (chunk
	// mode, chunkMessageID).
	AttrRecordID = "s3sqs-record-id"
	// AttrSource is the s3://bucket/key of the record's object.
	AttrSource = "s3sqs-source"
	// AttrVersion is the object's version id, or its ETag.
	AttrVersion = "s3sqs-version"
	// attrFirst and attrLast are the offsets of the first and last records
	// of a chunk-mode message.
	attrFirst = "s3sqs-first"
	attrLast  = "s3sqs-last"
	// AttrCount is the number of records of a chunk-mode message.
	AttrCount = "s3sqs-count"
)

// RecordID returns the deterministic id of the record at offset in obj: 32
// hex characters of SHA-256 over bucket, key, ETag and offset. The ETag,
// not the version id, names the version: listings (which give no version
// id), HeadObject, S3 and EventBridge notifications and GET responses all
// give the same ETag for a version, so a record has one id whichever path
// found its object. An object whose ETag is not known (an S3 Inventory
// report without its ETag field, a notification without eTag) is named by
// its version id instead, and its ids then differ from a listing's. Reads
// stay pinned by version id (dataset.Object.Pin). s3ingest builds its
// record ids the same way, so a record has one id whichever function sent
// it.
func RecordID(obj dataset.Object, offset int64) string {
	return newRecordIDs(obj).ID(offset)
}

// chunkMessageID returns the deterministic id of a chunk-mode message of
// obj that carries count records, from offset first to offset last: the
// id covers exactly those records, so that a message packed again with
// the same records keeps its id and one with other records (cut short, or
// longer) is a new message, which a FIFO queue does not take for a
// duplicate. It is never the RecordID of a record.
func chunkMessageID(obj dataset.Object, first, last int64, count int) string {
	return newRecordIDs(obj).chunk(first, last, count)
}

// recordIDs makes the record ids of one object, as RecordID does, without
// formatting the object's identity again for each record. It is not safe
// for concurrent use.
type recordIDs struct {
	buf    []byte
	prefix int
}

// newRecordIDs returns the record id maker of obj.
func newRecordIDs(obj dataset.Object) *recordIDs {
	version := cmp.Or(obj.ETag, obj.VersionID)
	b := make([]byte, 0, len(obj.Bucket)+len(obj.Key)+len(version)+48)
	b = append(append(append(append(append(b, obj.Bucket...), 0), obj.Key...), 0), version...)
	b = append(b, 0)
	return &recordIDs{buf: b, prefix: len(b)}
}

// ID returns the id of the record at offset.
func (r *recordIDs) ID(offset int64) string {
	r.buf = strconv.AppendInt(r.buf[:r.prefix], offset, 10)
	return r.sum()
}

// chunk returns the id of a chunk-mode message (see chunkMessageID). The
// NUL bytes between its numbers keep it apart from every record's id.
func (r *recordIDs) chunk(first, last int64, count int) string {
	b := strconv.AppendInt(r.buf[:r.prefix], first, 10)
	b = strconv.AppendInt(append(b, 0), last, 10)
	r.buf = strconv.AppendInt(append(b, 0), int64(count), 10)
	return r.sum()
}

func (r *recordIDs) sum() string {
	sum := sha256.Sum256(r.buf)
	return hex.EncodeToString(sum[:16])
}

// The data types of message attributes, shared by every attribute: the
// SDK only reads them.
var (
	stringType = aws.String("String")
	numberType = aws.String("Number")
)

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: stringType, StringValue: &v}
}

func numberAttr(v int64) types.MessageAttributeValue {
	n := strconv.FormatInt(v, 10)
	return types.MessageAttributeValue{DataType: numberType, StringValue: &n}
}

// GroupID is the FIFO message group of an object's records when the
// mapping gives none: a hash of bucket and key, so that the records of one
// object stay in order, objects are delivered in parallel, and any key (up
// to 1,024 bytes, any characters, where a group id allows 128 of a few) gives
// a valid group id. Both functions and both modes use it.
func GroupID(obj dataset.Object) string { return obj.GroupID() }

// recordMapper maps the records of one object to entries in record mode.
// It reads only the top-level fields the mapping names, without decoding
// the record: records come from package records, which has checked that a
// JSON Lines line is JSON and writes CSV and Parquet rows as JSON objects.
// Without a mapping a record is its own body. It is used by one goroutine
// at a time.
type recordMapper struct {
	m      worktask.Mapping
	ids    *recordIDs
	isJSON bool
	// The attributes every record of the object carries, built once.
	source, version types.MessageAttributeValue
	hasVersion      bool
	// mapped counts the records whose body was the body field; leftOut
	// names the other fields they had that no part of the mapping took
	// (see Stats.FieldsLeftOut). others is a record's keys, reused.
	mapped  int64
	leftOut []string
	others  [][]byte
}

func newRecordMapper(m worktask.Mapping, obj dataset.Object, isJSON bool) *recordMapper {
	rm := &recordMapper{m: m, ids: newRecordIDs(obj), isJSON: isJSON, source: stringAttr(obj.URI())}
	if v := obj.Pin(); v != "" {
		rm.version, rm.hasVersion = stringAttr(v), true
	}
	return rm
}

// entry maps one record. The error, if any, says why the record cannot be
// mapped; the caller puts the raw record on the failure output.
func (rm *recordMapper) entry(rec records.Record) (sqsbatch.Entry, error) {
	id := rm.ids.ID(rec.Offset)
	attrs := make(map[string]types.MessageAttributeValue, 4)
	attrs[AttrRecordID] = stringAttr(id)
	attrs[AttrSource] = rm.source
	if rm.hasVersion {
		attrs[AttrVersion] = rm.version
	}
	e := sqsbatch.Entry{Attributes: attrs, DeduplicationID: id, Body: string(rec.Value)}
	if !rm.isJSON || !rm.m.ReadsFields() {
		return e, nil
	}
	// A JSON value that is not an object has no fields: it is its own
	// body, as is an object without the body field.
	m := rm.m
	var err error
	hasBody := false
	rm.others = rm.others[:0]
	// One field may fill several roles (a key that is the group and the
	// deduplication id): each role is checked on its own.
	jsonfields.Each(rec.Value, func(key, raw []byte) bool {
		taken := false
		if m.BodyField != "" && jsonfields.KeyIs(key, m.BodyField) {
			hasBody, taken = true, true
			switch s, ok := jsonfields.Unquote(raw); {
			case ok:
				e.Body = s
			case string(raw) == "null":
				e.Body = "" // no body: SQS refuses the record, which says so
			default:
				e.Body = string(raw)
			}
		}
		if m.AttributesField != "" && jsonfields.KeyIs(key, m.AttributesField) {
			taken = true
			if err == nil {
				err = addAttributes(attrs, raw, m.AttributesField)
			}
		}
		if m.GroupIDField != "" && jsonfields.KeyIs(key, m.GroupIDField) {
			taken = true
			if err == nil {
				e.GroupID, err = scalar(raw, m.GroupIDField, e.GroupID)
			}
		}
		if m.DedupIDField != "" && jsonfields.KeyIs(key, m.DedupIDField) {
			taken = true
			if err == nil {
				e.DeduplicationID, err = scalar(raw, m.DedupIDField, e.DeduplicationID)
			}
		}
		if !taken && m.BodyField != "" {
			// Only a record sent as its body field leaves the others out.
			rm.others = append(rm.others, key)
		}
		return err == nil
	})
	if hasBody && err == nil {
		rm.noteLeftOut()
	}
	return e, err
}

// noteLeftOut counts a record whose body was its body field, and names
// the fields it had beside the mapping's, up to maxFieldsLeftOut names.
func (rm *recordMapper) noteLeftOut() {
	rm.mapped++
	for _, k := range rm.others {
		if len(rm.leftOut) == maxFieldsLeftOut {
			return
		}
		known := slices.ContainsFunc(rm.leftOut, func(name string) bool { return jsonfields.KeyIs(k, name) })
		if name, ok := jsonfields.Unquote(k); ok && !known {
			rm.leftOut = append(rm.leftOut, name)
		}
	}
}

// addAttributes adds the object of strings raw, the field name, to attrs;
// null adds nothing.
func addAttributes(attrs map[string]types.MessageAttributeValue, raw []byte, name string) error {
	if string(raw) == "null" {
		return nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("field %q is not an object of strings", name)
	}
	var err error
	jsonfields.Each(raw, func(key, value []byte) bool {
		k, _ := jsonfields.Unquote(key)
		v, ok := jsonfields.Unquote(value)
		if !ok {
			err = fmt.Errorf("field %q is not an object of strings: %q is %s", name, k, value)
			return false
		}
		if reservedAttribute(k) {
			// The record's id, source and version are what consumers and
			// redrive trust; a record that sets one would pass for another.
			err = fmt.Errorf("field %q sets attribute %q, which s3sqs writes itself (names starting with %s and the SQS Extended Client's are reserved)", name, k, reservedPrefix)
			return false
		}
		attrs[k] = stringAttr(v)
		return true
	})
	return err
}

// reservedPrefix starts the names of the attributes the engine writes.
const reservedPrefix = "s3sqs-"

// reservedAttribute reports whether a record's attributes field may not
// set attribute name: one the engine writes, or one that marks an SQS
// Extended Client pointer.
func reservedAttribute(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), reservedPrefix) || slices.Contains(sqsextended.AttributeNames(), name)
}

// scalar returns a string or number field as a string; null keeps def.
func scalar(raw []byte, name, def string) (string, error) {
	switch {
	case string(raw) == "null":
		return def, nil
	case len(raw) > 0 && raw[0] == '"':
		s, _ := jsonfields.Unquote(raw)
		if s == "" {
			return def, nil
		}
		return s, nil
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil
	}
	return def, fmt.Errorf("field %q is neither a string nor a number", name)
}

// chunkPacker gathers records into chunk-mode messages of at most max
// bytes, counting attributes as SQS does. Each message's body is built in
// place, in a buffer of max bytes, and handed over without a copy; between
// messages the packer holds no buffer.
type chunkPacker struct {
	obj dataset.Object
	max int
	// fifo: each message gets its own deduplication id, which a
	// standard queue refuses.
	fifo bool
	// group is the messages' group (see objectGroup); empty for none.
	group string
	body  strings.Builder
	first int64
	last  int64
	n     int
}

// chunkOverhead is a generous bound on the attributes of a chunk-mode message.
const chunkOverhead = 512

// fits reports whether rec fits in the message beside what is gathered;
// when it does not, flush first.
func (p *chunkPacker) fits(rec records.Record) bool {
	return p.n == 0 || p.body.Len()+1+len(rec.Value)+len(p.obj.Pin())+len(p.obj.Key)+chunkOverhead <= p.max
}

// add adds a record to the message, which it starts when none is
// gathered.
func (p *chunkPacker) add(rec records.Record) {
	if p.n > 0 {
		p.body.WriteByte('\n')
	} else {
		p.first = rec.Offset
		p.body.Grow(max(p.max, len(rec.Value)))
	}
	p.body.Write(rec.Value)
	p.last = rec.Offset
	p.n++
}

// flush returns the gathered records as one entry, with the records it
// holds, and starts anew.
func (p *chunkPacker) flush() (sqsbatch.Entry, span) {
	id := chunkMessageID(p.obj, p.first, p.last, p.n)
	e := sqsbatch.Entry{
		Body: p.body.String(),
		Attributes: map[string]types.MessageAttributeValue{
			AttrRecordID: stringAttr(id),
			AttrSource:   stringAttr(p.obj.URI()),
			attrFirst:    numberAttr(p.first),
			attrLast:     numberAttr(p.last),
			AttrCount:    numberAttr(int64(p.n)),
		},
		GroupID: p.group,
	}
	if p.fifo {
		e.DeduplicationID = id
	}
	if v := p.obj.Pin(); v != "" {
		e.Attributes[AttrVersion] = stringAttr(v)
	}
	held := span{offset: p.first, count: p.n}
	p.body.Reset()
	p.n = 0
	return e, held
}

// mappedEntries returns the record-mode encoder of a chunk's records: the
// mapping's body, attributes, group and deduplication id; on a FIFO queue a
// record without a group goes in its object's (see GroupID). A standard
// queue takes a record's group, which names its tenant for SQS's fair
// queues, and no deduplication id.
func mappedEntries(rm *recordMapper, c dataset.Chunk, fifo bool) func(records.Record) (sqsbatch.Entry, error) {
	group := objectGroup(c.Object, rm.m.GroupIDPartition, fifo)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		e, err := rm.entry(rec)
		if err != nil {
			return e, err
		}
		if !fifo {
			e.DeduplicationID = ""
		}
		e.GroupID = cmp.Or(e.GroupID, group)
		return e, nil
	}
}

// objectGroup is the group of obj's messages that carry none of their
// own, in record and chunk mode: the value of its key's partition column
// (see Mapping.GroupIDPartition) when it has one, else on a FIFO queue the
// object's group (see GroupID), else none.
func objectGroup(obj dataset.Object, column string, fifo bool) string {
	if g := partitionGroup(obj, column); g != "" || !fifo {
		return g
	}
	return GroupID(obj)
}

// partitionGroup is the value of the Hive partition column of obj's key,
// the message group Mapping.GroupIDPartition names; empty when column is
// empty or the key has no such partition. A value that is no valid group
// id makes its records fail with sqsbatch's InvalidMessageGroupId,
// naming it, rather than go in another group.
func partitionGroup(obj dataset.Object, column string) string {
	if column == "" {
		return ""
	}
	for _, p := range s3event.Partitions(obj.Key) {
		if p.Name == column {
			return p.Value
		}
	}
	return ""
}

// ingestRecords returns the bodies s3ingest gives the records of chunk c:
// each record the JSON object of [recordjson.Encoder], with the key's
// partition values as ie.Partitions says and, with ie.FileMetadata, a
// _file object naming the chunk's bucket, key, version id and ETag and
// ie.EventTime. A field the record already has wins over an added one,
// with a warning on log once per field. The engine owns it, so that a
// record arrives the same whichever Runner read it: s3ingest's, fanout's
// workers running a task s3ingest handed off, the CLI's or a redrive's.
func ingestRecords(ctx context.Context, c dataset.Chunk, ie worktask.IngestEncoding, log *slog.Logger) func(records.Record) (string, error) {
	src := s3event.Object{Bucket: c.Bucket, Key: c.Key, ETag: c.ETag, VersionID: c.VersionID, EventTime: ie.EventTime}
	enc := recordjson.NewEncoder(c.Format, src, ie.Partitions, ie.FileMetadata, func(field string) {
		log.WarnContext(ctx, "records already have a field that s3ingest adds; the record's value is kept",
			"object", c.URI(), "field", field)
	})
	return func(rec records.Record) (string, error) { return enc.Encode(c.Object, rec) }
}

// encodedEntries returns the encoder of an object's records whose bodies
// enc makes (see ingestRecords): each entry's only attribute is its record
// id; its group is the object's (see objectGroup, with the partition
// column groupColumn); on a FIFO queue its deduplication id is the record
// id.
func encodedEntries(enc func(records.Record) (string, error), obj dataset.Object, fifo bool, groupColumn string) func(records.Record) (sqsbatch.Entry, error) {
	ids := newRecordIDs(obj)
	group := objectGroup(obj, groupColumn, fifo)
	return func(rec records.Record) (sqsbatch.Entry, error) {
		body, err := enc(rec)
		if err != nil {
			return sqsbatch.Entry{}, err
		}
		id := ids.ID(rec.Offset)
		e := sqsbatch.Entry{Body: body, GroupID: group, Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)}}
		if fifo {
			e.DeduplicationID = id
		}
		return e, nil
	}
}
