package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestRecordEntry(t *testing.T) {
	obj := dataset.Object{Bucket: "b", Key: "k.jsonl", ETag: "e"}
	m := sparkMapping
	m.DedupIDField = "id"
	tests := []struct {
		name, rec, body, group, dedup string
		attrs                         map[string]string
		isJSON                        bool
		wantErr                       string
	}{
		{name: "value string", rec: `{"value":"hi","id":7}`, body: "hi", dedup: "7", isJSON: true},
		{name: "value object", rec: `{"value":{"a":[1]}}`, body: `{"a":[1]}`, isJSON: true},
		{name: "no value", rec: `{"x":1}`, body: `{"x":1}`, isJSON: true},
		{name: "attributes and group", rec: `{"value":"v","msg_attributes":{"k":"v2"},"group_id":"g"}`, body: "v", group: "g", attrs: map[string]string{"k": "v2"}, isJSON: true},
		{name: "numeric group", rec: `{"value":"v","group_id":42}`, body: "v", group: "42", isJSON: true},
		{name: "array", rec: `[1,2]`, body: `[1,2]`, isJSON: true},
		{name: "text line", rec: `{"not":"parsed"`, body: `{"not":"parsed"`},
		{name: "escaped value", rec: `{"value":"a\"b\u00e9","id":"d"}`, body: `a"bé`, dedup: "d", isJSON: true},
		{name: "value with spaces kept", rec: ` { "value" : { "a" : [ 1 ] } } `, body: `{ "a" : [ 1 ] }`, isJSON: true},
		{name: "escaped key", rec: `{"val\u0075e":"hi"}`, body: "hi", isJSON: true},
		{name: "null attributes and group", rec: `{"value":"v","msg_attributes":null,"group_id":null}`, body: "v", isJSON: true},
		{name: "number dedup", rec: `{"value":"v","id":-12.5}`, body: "v", dedup: "-12.5", isJSON: true},
		{name: "nested value field not read", rec: `{"x":{"value":"inner"}}`, body: `{"x":{"value":"inner"}}`, isJSON: true},
		{name: "bad attributes", rec: `{"msg_attributes":[1]}`, isJSON: true, wantErr: "msg_attributes"},
		{name: "attribute not a string", rec: `{"msg_attributes":{"k":1}}`, isJSON: true, wantErr: `field "msg_attributes" is not an object of strings: "k" is 1`},
		{name: "reserved record id", rec: `{"value":"v","msg_attributes":{"s3sqs-record-id":"forged"}}`, isJSON: true, wantErr: `field "msg_attributes" sets attribute "s3sqs-record-id", which s3sqs writes itself`},
		{name: "reserved source, other case", rec: `{"msg_attributes":{"S3SQS-Source":"s3://x/y"}}`, isJSON: true, wantErr: `sets attribute "S3SQS-Source"`},
		{name: "reserved pointer marker", rec: `{"msg_attributes":{"ExtendedPayloadSize":"9"}}`, isJSON: true, wantErr: `sets attribute "ExtendedPayloadSize"`},
		{name: "bad group", rec: `{"group_id":{}}`, isJSON: true, wantErr: "group_id"},
		{name: "bad dedup", rec: `{"id":true}`, isJSON: true, wantErr: `field "id" is neither a string nor a number`},
	}
	// One field may be the group and the deduplication id at once.
	both := worktask.Mapping{GroupIDField: "k", DedupIDField: "k"}
	if e, err := newRecordMapper(both, obj, true).entry(records.Record{Value: []byte(`{"k":"abc"}`)}); err != nil || e.GroupID != "abc" || e.DeduplicationID != "abc" {
		t.Errorf("a field that is group and dedup id gives group %q, dedup %q (%v); want abc twice", e.GroupID, e.DeduplicationID, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := newRecordMapper(m, obj, tt.isJSON).entry(records.Record{Offset: 10, Value: []byte(tt.rec)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Body != tt.body || e.GroupID != tt.group {
				t.Errorf("body %q group %q, want %q %q", e.Body, e.GroupID, tt.body, tt.group)
			}
			wantDedup := tt.dedup
			if wantDedup == "" {
				wantDedup = RecordID(obj, 10)
			}
			if e.DeduplicationID != wantDedup || aws.ToString(e.Attributes[AttrRecordID].StringValue) != RecordID(obj, 10) {
				t.Errorf("dedup %q record id %v", e.DeduplicationID, e.Attributes[AttrRecordID])
			}
			for k, v := range tt.attrs {
				if got := aws.ToString(e.Attributes[k].StringValue); got != v {
					t.Errorf("attribute %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestChunkPacker(t *testing.T) {
	obj := dataset.Object{Bucket: "b", Key: "k", ETag: "e"}
	p := &chunkPacker{obj: obj, max: 2048, fifo: true, group: objectGroup(obj, "", true)}
	var out []sqsbatch.Entry
	total := 0
	for i := range 100 {
		rec := records.Record{Offset: int64(i * 100), Value: []byte(strings.Repeat("x", 99))}
		if !p.fits(rec) {
			e, held := p.flush()
			out = append(out, e)
			if held.count != strings.Count(e.Body, "\n")+1 || held.offset%100 != 0 {
				t.Errorf("entry holds %+v; its body has %d records", held, strings.Count(e.Body, "\n")+1)
			}
			if e.GroupID != GroupID(obj) {
				t.Errorf("chunk entry's group %q; want the object's %q", e.GroupID, GroupID(obj))
			}
		}
		p.add(rec)
		total++
	}
	last, _ := p.flush()
	out = append(out, last)
	got := 0
	ids := map[string]bool{}
	for _, e := range out {
		attr := func(name string) string { return aws.ToString(e.Attributes[name].StringValue) }
		id := chunkMessageID(obj, atoi(t, attr(attrFirst)), atoi(t, attr(attrLast)), int(atoi(t, attr(AttrCount))))
		if attr(AttrRecordID) != id || e.DeduplicationID != id || ids[id] {
			t.Errorf("message from %s: record id %s, dedup id %s; want %s, its records' own", attr(attrFirst), attr(AttrRecordID), e.DeduplicationID, id)
		}
		ids[id] = true
		if e.Size() > 2048 {
			t.Errorf("message of %d bytes over 2048", e.Size())
		}
		got += strings.Count(e.Body, "\n") + 1
	}
	if got != total || len(out) < 5 {
		t.Errorf("%d records in %d messages, want %d packed", got, len(out), total)
	}

	// On a standard queue a chunk has neither id: SQS refuses a
	// deduplication id there, and the object is no tenant.
	std := &chunkPacker{obj: obj, max: 2048, group: objectGroup(obj, "", false)}
	std.add(records.Record{Value: []byte("x")})
	if e, _ := std.flush(); e.GroupID != "" || e.DeduplicationID != "" || e.Body != "x" {
		t.Errorf("standard queue chunk: group %q, dedup id %q, body %q; want no ids", e.GroupID, e.DeduplicationID, e.Body)
	}
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIngestEntry(t *testing.T) {
	ov := worktask.Overrides{TargetQueueURL: "q", Ingest: &worktask.IngestEncoding{
		Partitions: recordjson.PartitionsTyped, FileMetadata: true, EventTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
	}}
	raw, err := json.Marshal(ov)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"targetQueueUrl":"q","ingest":{"partitions":"typed","fileMetadata":true,"eventTime":"2024-01-02T03:04:05Z"}}`
	if string(raw) != want {
		t.Errorf("overrides %s; want %s", raw, want)
	}
	var back worktask.Overrides
	if err := json.Unmarshal(raw, &back); err != nil || *back.Ingest != *ov.Ingest {
		t.Errorf("overrides round trip: %+v, %v", back.Ingest, err)
	}
	if raw, _ := json.Marshal(worktask.Overrides{TargetQueueURL: "q"}); string(raw) != `{"targetQueueUrl":"q"}` {
		t.Errorf("overrides without ingest %s", raw)
	}

}

// TestIngestRecords checks the body s3ingest's encoding gives a record of
// a chunk (the engine adds the record id and FIFO ids; see
// TestEncodedEntries): the record with the key's typed partition value and
// a _file object from the chunk and the event time, and a JSON Lines
// record that is not JSON refused with recordjson.ErrNotJSON.
func TestIngestRecords(t *testing.T) {
	ie := worktask.IngestEncoding{Partitions: recordjson.PartitionsTyped, FileMetadata: true, EventTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "d=1/k.jsonl", ETag: "e", VersionID: "v"}, Format: dataset.FormatJSONL}
	encode := ingestRecords(t.Context(), c, ie, slog.New(slog.DiscardHandler))
	body, err := encode(records.Record{Offset: 10, Line: 2, Value: []byte(`{"value":"x","group_id":"g"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"value":"x","group_id":"g","d":1,"_file":{"bucket":"b","key":"d=1/k.jsonl","versionId":"v","eTag":"e","eventTime":"2024-01-02T03:04:05Z","offset":10,"line":2}}`
	if body != want {
		t.Errorf("body %s; want %s", body, want)
	}
	if _, err := encode(records.Record{Offset: 20, Value: []byte(`{"a":`)}); !errors.Is(err, recordjson.ErrNotJSON) {
		t.Errorf("body of a bad record: %v", err)
	}
}

// TestEncodedEntries checks what the engine adds to the bodies of an
// encoder such as ingestRecords: the record id as the only attribute, and on a
// FIFO queue the object's group with the record id as deduplication id;
// the encoder's error is the record's.
func TestEncodedEntries(t *testing.T) {
	obj := dataset.Object{Bucket: "b", Key: "d=1/k.jsonl", ETag: "e", VersionID: "v"}
	bad := errors.New("not this one")
	enc := func(rec records.Record) (string, error) {
		if rec.Offset == 20 {
			return "", bad
		}
		return "body-" + string(rec.Value), nil
	}
	for _, fifo := range []bool{false, true} {
		encode := encodedEntries(enc, obj, fifo, "")
		e, err := encode(records.Record{Offset: 10, Line: 2, Value: []byte(`x`)})
		if err != nil {
			t.Fatal(err)
		}
		id := RecordID(obj, 10)
		if e.Body != "body-x" || len(e.Attributes) != 1 || aws.ToString(e.Attributes[AttrRecordID].StringValue) != id {
			t.Errorf("entry %+v", e)
		}
		wantGroup, wantDedup := "", ""
		if fifo {
			wantGroup, wantDedup = GroupID(obj), id
		}
		if e.GroupID != wantGroup || e.DeduplicationID != wantDedup {
			t.Errorf("fifo %v: group %q, dedup %q", fifo, e.GroupID, e.DeduplicationID)
		}
		if _, err := encode(records.Record{Offset: 20, Value: []byte(`{"a":`)}); !errors.Is(err, bad) {
			t.Errorf("entry of a bad record: %v", err)
		}
	}
	// The key's partition d=1 as the group, on either queue.
	for _, fifo := range []bool{false, true} {
		e, err := encodedEntries(enc, obj, fifo, "d")(records.Record{Offset: 10, Value: []byte(`x`)})
		if err != nil || e.GroupID != "1" {
			t.Errorf("fifo %v, group by d: group %q, %v; want 1", fifo, e.GroupID, err)
		}
	}
}

// TestGroupID checks that the FIFO group of an object is valid for any
// key: SQS takes 1 to 128 characters of a-z, A-Z, 0-9 and punctuation,
// which raw keys with spaces, unicode or 300 characters are not.
func TestGroupID(t *testing.T) {
	seen := map[string]bool{}
	for _, key := range []string{"dir/part 0001.jsonl", "région=Zürich/日本語.jsonl", strings.Repeat("k", 300), "a", "a "} {
		g := GroupID(dataset.Object{Bucket: "lake", Key: key})
		if len(g) == 0 || len(g) > 128 || strings.Trim(g, "0123456789abcdef") != "" {
			t.Errorf("GroupID(%q) = %q; not a valid message group id", key, g)
		}
		if seen[g] {
			t.Errorf("GroupID(%q) = %q, the same as another key's", key, g)
		}
		seen[g] = true
	}
}

// sparkMapping is the Spark SQS sink's column mapping.
var sparkMapping = worktask.Mapping{BodyField: "value", AttributesField: "msg_attributes", GroupIDField: "group_id"}

// TestRecordMapperWholeRecord holds the default: without a mapping a
// record is its own body, every field kept, whatever its fields are
// named; with one, a record whose body is its body field is counted, and
// the fields the mapping did not take are named.
func TestRecordMapperWholeRecord(t *testing.T) {
	obj := dataset.Object{Bucket: "b", Key: "k", ETag: "e"}
	rec := `{"sensor":"t1","value":42.5,"unit":"C","msg_attributes":{"a":"b"},"group_id":"g"}`
	rm := newRecordMapper(worktask.Mapping{}, obj, true)
	e, err := rm.entry(records.Record{Value: []byte(rec)})
	if err != nil || e.Body != rec || len(e.Attributes) != 3 || rm.mapped != 0 || rm.leftOut != nil {
		t.Errorf("no mapping: body %s, attributes %v, %d mapped, left out %v (%v); want the whole record, only s3sqs's attributes", e.Body, e.Attributes, rm.mapped, rm.leftOut, err)
	}
	rm = newRecordMapper(sparkMapping, obj, true)
	for _, r := range []string{rec, `{"value":1,"sensor":"t2","site":"s"}`, `{"sensor":"t3"}`} {
		if _, err := rm.entry(records.Record{Value: []byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	if rm.mapped != 2 || !slices.Equal(rm.leftOut, []string{"sensor", "unit", "site"}) {
		t.Errorf("Spark's mapping: %d mapped, left out %v; want 2 (the record without value is its own body), sensor, unit and site", rm.mapped, rm.leftOut)
	}
	var st Stats
	st.Add(Stats{RecordsMapped: 2, FieldsLeftOut: []string{"sensor", "unit"}})
	st.Add(Stats{RecordsMapped: 1, FieldsLeftOut: []string{"site", "unit"}})
	if st.RecordsMapped != 3 || !slices.Equal(st.FieldsLeftOut, []string{"sensor", "site", "unit"}) {
		t.Errorf("Stats.Add: %d mapped, left out %v; want 3, and the names once each, sorted", st.RecordsMapped, st.FieldsLeftOut)
	}
}

func TestMappedEntriesGroup(t *testing.T) {
	c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "dir/part 0001.jsonl", ETag: "e"}, Format: dataset.FormatJSONL}
	for _, tc := range []struct {
		fifo              bool
		rec, group, dedup string
	}{
		// A standard queue takes the record's group (SQS's fair queues)
		// and no deduplication id, and has no object group.
		{false, `{"value":"v","group_id":"g"}`, "g", ""},
		{false, `{"value":"v"}`, "", ""},
		{true, `{"value":"v","group_id":"g"}`, "g", RecordID(c.Object, 0)},
		{true, `{"value":"v"}`, GroupID(c.Object), RecordID(c.Object, 0)},
	} {
		e, err := mappedEntries(newRecordMapper(sparkMapping, c.Object, true), c, tc.fifo)(records.Record{Value: []byte(tc.rec)})
		if err != nil || e.GroupID != tc.group || e.DeduplicationID != tc.dedup {
			t.Errorf("fifo %v, %s: group %q dedup %q (%v); want %q %q", tc.fifo, tc.rec, e.GroupID, e.DeduplicationID, err, tc.group, tc.dedup)
		}
	}
}

// TestRecordID pins the record id scheme that fanout and s3ingest share:
// SHA-256 of "bucket\x00key\x00etag\x00offset", 16 bytes in hex, with the
// version id in place of the ETag only when no ETag is known; so an object
// found by a listing (ETag only) and by HeadObject or a notification (ETag
// and version id) gives its records one id.
func TestRecordID(t *testing.T) {
	sum := sha256.Sum256([]byte("b\x00k\x00e\x00123"))
	if got, want := RecordID(dataset.Object{Bucket: "b", Key: "k", VersionID: "v", ETag: "e"}, 123), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("RecordID = %s; want %s", got, want)
	}
	if got, want := RecordID(dataset.Object{Bucket: "b", Key: "k", ETag: "e"}, 123), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("RecordID of the object as a listing names it = %s; want %s, as HeadObject names it", got, want)
	}
	sum = sha256.Sum256([]byte("b\x00k\x00v\x00-1"))
	if got, want := RecordID(dataset.Object{Bucket: "b", Key: "k", VersionID: "v"}, -1), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("RecordID without ETag = %s; want %s", got, want)
	}
	ids := newRecordIDs(dataset.Object{Bucket: "b", Key: "k", VersionID: "v"})
	for _, off := range []int64{0, 123, 7, 123} {
		if got, want := ids.ID(off), RecordID(dataset.Object{Bucket: "b", Key: "k", VersionID: "v"}, off); got != want {
			t.Errorf("recordIDs.ID(%d) = %s; want %s", off, got, want)
		}
	}
}

// TestChunkMessageID pins the id of a chunk-mode message: SHA-256 of
// "bucket\x00key\x00etag\x00first\x00last\x00count", 16 bytes in hex. It
// differs for every other set of records, and from every record id.
func TestChunkMessageID(t *testing.T) {
	obj := dataset.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v"}
	sum := sha256.Sum256([]byte("b\x00k\x00e\x000\x0040\x005"))
	if got, want := chunkMessageID(obj, 0, 40, 5), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("chunkMessageID = %s; want %s", got, want)
	}
	seen := map[string]string{RecordID(obj, 0): "record 0"}
	for _, c := range []struct{ first, last, count int64 }{{0, 40, 5}, {0, 30, 4}, {0, 0, 1}, {10, 40, 4}} {
		id := chunkMessageID(obj, c.first, c.last, int(c.count))
		if other, dup := seen[id]; dup {
			t.Errorf("message of %+v has the id of %s", c, other)
		}
		seen[id] = fmt.Sprintf("message %+v", c)
	}
}

func TestLanes(t *testing.T) {
	a := dataset.Object{Bucket: "b", Key: "a", ETag: "1"}
	b := dataset.Object{Bucket: "b", Key: "b", ETag: "1"}
	run := func(obj dataset.Object, index int) *taskSpec {
		return &taskSpec{task: worktask.Task{Chunk: dataset.Chunk{Object: obj, Index: index}}}
	}
	runs := []*taskSpec{run(a, 0), run(b, 0), run(a, 1), run(a, 2), run(b, 1)}
	names := func(ls [][]int) []string {
		var out []string
		for _, l := range ls {
			var s []string
			for _, g := range l {
				s = append(s, fmt.Sprintf("%s%d", runs[g].task.Chunk.Key, runs[g].task.Chunk.Index))
			}
			out = append(out, strings.Join(s, ","))
		}
		return out
	}
	// On a FIFO queue an object's chunks are read in order, one lane each
	// object; elsewhere every chunk is read on its own.
	if got, want := names(lanes(runs, true)), []string{"a0,a1,a2", "b0,b1"}; !slices.Equal(got, want) {
		t.Errorf("FIFO lanes %v; want %v", got, want)
	}
	if got := names(lanes(runs, false)); len(got) != 5 {
		t.Errorf("standard lanes %v; want one a task", got)
	}
}

// FuzzRecordMapper checks the one-pass mapper against the mapping done
// the slow way, by decoding the whole record with encoding/json, on every
// JSON object without repeated keys.
func FuzzRecordMapper(f *testing.F) {
	for _, s := range []string{`{"value":"hi","id":7}`, `{"value":{"a":[1]},"msg_attributes":{"k":"v"},"group_id":"g"}`,
		`{"group_id":4.5e1,"value":null}`, `{"msg_attributes":{"k":1}}`, `{"x":{"value":"in"}}`, `["value"]`, `"s"`} {
		f.Add([]byte(s))
	}
	obj := dataset.Object{Bucket: "b", Key: "k", ETag: "e"}
	m := sparkMapping
	m.DedupIDField = "id"
	f.Fuzz(func(t *testing.T, rec []byte) {
		var fields map[string]json.RawMessage
		if !json.Valid(rec) || hasRepeatedKey(rec) {
			return
		}
		got, gotErr := newRecordMapper(m, obj, true).entry(records.Record{Value: rec})
		want := sqsbatch.Entry{Body: string(rec), DeduplicationID: RecordID(obj, 0)}
		wantAttrs := map[string]string{}
		var wantErr bool
		if json.Unmarshal(rec, &fields) == nil {
			if raw, ok := fields["value"]; ok {
				var s string
				if json.Unmarshal(raw, &s) == nil {
					want.Body = s
				} else {
					want.Body = string(raw)
				}
			}
			if raw, ok := fields["msg_attributes"]; ok && string(raw) != "null" {
				wantErr = wantErr || json.Unmarshal(raw, &wantAttrs) != nil || raw[0] != '{'
			}
			for name, dst := range map[string]*string{"group_id": &want.GroupID, "id": &want.DeduplicationID} {
				raw, ok := fields[name]
				if !ok || string(raw) == "null" {
					continue
				}
				var s string
				var n json.Number
				switch {
				case json.Unmarshal(raw, &s) == nil:
					if s != "" {
						*dst = s
					}
				case json.Unmarshal(raw, &n) == nil:
					*dst = n.String()
				default:
					wantErr = true
				}
			}
		}
		if (gotErr != nil) != wantErr {
			t.Fatalf("%s: error %v; the slow way says error %v", rec, gotErr, wantErr)
		}
		if wantErr {
			return
		}
		if got.Body != want.Body || got.GroupID != want.GroupID || got.DeduplicationID != want.DeduplicationID {
			t.Fatalf("%s: body %q group %q dedup %q; the slow way gives %q %q %q", rec, got.Body, got.GroupID, got.DeduplicationID, want.Body, want.GroupID, want.DeduplicationID)
		}
		for k, v := range wantAttrs {
			if a, ok := got.Attributes[k]; !ok || aws.ToString(a.StringValue) != v {
				t.Fatalf("%s: attribute %q = %v; the slow way gives %q", rec, k, a.StringValue, v)
			}
		}
	})
}

// hasRepeatedKey reports whether a JSON object, or one of the objects it
// holds, repeats a key, where decoding into a map keeps only the last.
func hasRepeatedKey(rec []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(rec))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				ks, _ := k.(string)
				if seen[ks] || walk() {
					return true
				}
				seen[ks] = true
			}
			dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			dec.Token()
		}
		return false
	}
	return walk()
}
