package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

func TestEncode(t *testing.T) {
	when := time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.UTC)
	obj := s3event.Object{
		Bucket: "lake", Key: "t/date=2024-01-01/n=007/f=1.5/ok=true/kind=a b/nul=__HIVE_DEFAULT_PARTITION__/x.jsonl",
		ETag: "e1", VersionID: "v1", EventTime: when,
	}
	file := `"_file":{"bucket":"lake","key":"t/date=2024-01-01/n=007/f=1.5/ok=true/kind=a b/nul=__HIVE_DEFAULT_PARTITION__/x.jsonl","versionId":"v1","eTag":"e1","eventTime":"2024-01-02T03:04:05.6Z","offset":42,"line":3}`
	parts := `"date":"2024-01-01","n":"007","f":"1.5","ok":"true","kind":"a b","nul":null`
	typed := `"date":"2024-01-01","n":7,"f":1.5,"ok":true,"kind":"a b","nul":null`
	tests := []struct {
		name   string
		format dataset.Format
		mode   partitionMode
		noFile bool
		obj    *s3event.Object
		value  string
		want   string
		clash  []string
	}{
		{name: "object", format: dataset.FormatJSONL, mode: partitionsString, value: `{"a":1}`, want: `{"a":1,` + parts + `,` + file + `}`},
		{name: "typed", format: dataset.FormatJSONL, mode: partitionsTyped, value: `{"a":1}`, want: `{"a":1,` + typed + `,` + file + `}`},
		{name: "no partitions", format: dataset.FormatJSONL, mode: partitionsOff, value: `{"a":1}`, want: `{"a":1,` + file + `}`},
		{name: "nothing added", format: dataset.FormatJSONL, mode: partitionsOff, noFile: true, value: ` {"a":1} `, want: `{"a":1}`},
		{name: "empty object", format: dataset.FormatJSONL, mode: partitionsOff, value: `{ }`, want: `{ ` + file + `}`},
		{name: "spaces kept", format: dataset.FormatJSONL, mode: partitionsOff, noFile: true, value: "{ \"a\" : [1, 2] }\r", want: `{ "a" : [1, 2] }`},
		{name: "not an object", format: dataset.FormatJSONL, mode: partitionsOff, value: `[1,2]`, want: `{"value":[1,2],` + file + `}`},
		{name: "string value", format: dataset.FormatJSONL, mode: partitionsOff, noFile: true, value: `"x"`, want: `{"value":"x"}`},
		{name: "byte order mark", format: dataset.FormatJSONL, mode: partitionsOff, noFile: true, value: "\xef\xbb\xbf{\"a\":1}", want: `{"a":1}`},
		{
			name: "record wins", format: dataset.FormatJSONL, mode: partitionsString,
			value: `{"date":"mine","_file":0,"nested":{"n":1},"s":"kind"}`,
			want:  `{"date":"mine","_file":0,"nested":{"n":1},"s":"kind","n":"007","f":"1.5","ok":"true","kind":"a b","nul":null}`,
			clash: []string{"date", "_file"},
		},
		{
			name: "escaped key", format: dataset.FormatJSONL, mode: partitionsString, noFile: true,
			value: `{"d\u0061te":1,"v":"a\"b"}`,
			want:  `{"d\u0061te":1,"v":"a\"b","n":"007","f":"1.5","ok":"true","kind":"a b","nul":null}`,
			clash: []string{"date"},
		},
		{name: "csv row", format: dataset.FormatCSV, mode: partitionsOff, value: `{"a":"1","b":""}`, want: `{"a":"1","b":"",` + file + `}`},
		{name: "text", format: dataset.FormatText, mode: partitionsOff, value: "a \"q\" \\ \t\x01 é", want: `{"line":"a \"q\" \\ \t\u0001 é",` + file + `}`},
		{
			name: "text line clashes", format: dataset.FormatText, mode: partitionsString, noFile: true,
			obj:   &s3event.Object{Bucket: "b", Key: "line=x/k=v/f.txt"},
			value: "hello", want: `{"line":"hello","k":"v"}`, clash: []string{"line"},
		},
		{
			name: "innermost partition wins", format: dataset.FormatJSONL, mode: partitionsString, noFile: true,
			obj:   &s3event.Object{Bucket: "b", Key: "a=1/b=2/a=3/f.json"},
			value: `{}`, want: `{"a":"3","b":"2"}`,
		},
		{
			name: "no version, no time", format: dataset.FormatJSONL, mode: partitionsOff,
			obj:   &s3event.Object{Bucket: "b", Key: "k<&>.json", ETag: "e"},
			value: `{}`, want: `{"_file":{"bucket":"b","key":"k<&>.json","versionId":null,"eTag":"e","eventTime":null,"offset":42,"line":3}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obj
			if tt.obj != nil {
				o = *tt.obj
			}
			var clashed []string
			enc := newRecordEncoder(tt.format, o, tt.mode, !tt.noFile, func(f string) { clashed = append(clashed, f) })
			pin := dataset.Object{Bucket: o.Bucket, Key: o.Key}
			for range 2 { // the second time, clashes are not reported again
				got, err := enc.encode(pin, records.Record{Offset: 42, Line: 3, Value: []byte(tt.value)})
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if got != tt.want {
					t.Errorf("encode(%s)\n got %s\nwant %s", tt.value, got, tt.want)
				}
				if !json.Valid([]byte(got)) {
					t.Errorf("not valid JSON: %s", got)
				}
			}
			slices.Sort(clashed)
			slices.Sort(tt.clash)
			if diff := cmp.Diff(tt.clash, clashed); diff != "" {
				t.Errorf("clashes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeNotJSON(t *testing.T) {
	enc := newRecordEncoder(dataset.FormatJSONL, s3event.Object{Bucket: "b", Key: "k.jsonl"}, partitionsString, true, nil)
	for _, v := range []string{`{"a":`, `nope`, `{"a":1} x`} {
		_, err := enc.encode(dataset.Object{Bucket: "b", Key: "k.jsonl"}, records.Record{Offset: 7, Line: 2, Value: []byte(v)})
		var re *records.RecordError
		if !errors.As(err, &re) || !errors.Is(err, errNotJSON) || re.Offset != 7 || re.Line != 2 {
			t.Errorf("encode(%q) = %v; want a *records.RecordError at offset 7, line 2, wrapping errNotJSON", v, err)
		}
	}
}

func TestDeletionBody(t *testing.T) {
	o := s3event.Object{Bucket: "b", Key: "d=1/_deleted=x/f.csv", VersionID: "v", EventName: "ObjectRemoved:Delete"}
	got := deletionBody(o, partitionsTyped)
	want := `{"_deleted":true,"_event":"ObjectRemoved:Delete","d":1,"_file":{"bucket":"b","key":"d=1/_deleted=x/f.csv","versionId":"v","eTag":null,"eventTime":null,"offset":null}}`
	if got != want {
		t.Errorf("deletionBody\n got %s\nwant %s", got, want)
	}
}

func TestTopLevelKeys(t *testing.T) {
	var got []string
	topLevelKeys([]byte(`{"a":{"b":1,"c":[{"d":2}]},"e\"f":"g,\"h\":1","i":[],"j\\":null}`), func(k string) { got = append(got, k) })
	if want := []string{"a", `e"f`, "i", `j\`}; !slices.Equal(got, want) {
		t.Errorf("topLevelKeys = %q; want %q", got, want)
	}
}

func TestIDs(t *testing.T) {
	a := dataset.Object{Bucket: "b", Key: "k", ETag: "e"}
	b := dataset.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v"}
	ids := []string{recordID(a, 0), recordID(a, 1), recordID(b, 0), groupID("b", "k"), groupID("b", "k2")}
	for i, id := range ids {
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Errorf("id %q is not 32 hex characters", id)
		}
		if slices.Contains(ids[:i], id) {
			t.Errorf("id %q repeats", id)
		}
	}
	if recordID(a, 5) != recordID(a, 5) {
		t.Error("recordID is not deterministic")
	}
	// The scheme fanout uses for s3sqs-record-id: SHA-256 of
	// "bucket\x00key\x00pin\x00offset", 16 bytes in hex.
	sum := sha256.Sum256([]byte("b\x00k\x00v\x00123"))
	if got, want := recordID(b, 123), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("recordID = %s; want %s", got, want)
	}
	if seq, ok := seqOf(entryID(12, 345)); !ok || seq != 12 {
		t.Errorf("seqOf(entryID(12, 345)) = %d, %v", seq, ok)
	}
}
