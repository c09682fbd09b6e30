package recordjson

import (
	"encoding/json"
	"errors"
	"slices"
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
		mode   PartitionMode
		noFile bool
		obj    *s3event.Object
		value  string
		want   string
		clash  []string
	}{
		{name: "object", format: dataset.FormatJSONL, mode: PartitionsString, value: `{"a":1}`, want: `{"a":1,` + parts + `,` + file + `}`},
		{name: "typed", format: dataset.FormatJSONL, mode: PartitionsTyped, value: `{"a":1}`, want: `{"a":1,` + typed + `,` + file + `}`},
		{name: "no partitions", format: dataset.FormatJSONL, mode: PartitionsOff, value: `{"a":1}`, want: `{"a":1,` + file + `}`},
		{name: "nothing added", format: dataset.FormatJSONL, mode: PartitionsOff, noFile: true, value: ` {"a":1} `, want: `{"a":1}`},
		{name: "empty object", format: dataset.FormatJSONL, mode: PartitionsOff, value: `{ }`, want: `{ ` + file + `}`},
		{name: "spaces kept", format: dataset.FormatJSONL, mode: PartitionsOff, noFile: true, value: "{ \"a\" : [1, 2] }\r", want: `{ "a" : [1, 2] }`},
		{name: "not an object", format: dataset.FormatJSONL, mode: PartitionsOff, value: `[1,2]`, want: `{"value":[1,2],` + file + `}`},
		{name: "string value", format: dataset.FormatJSONL, mode: PartitionsOff, noFile: true, value: `"x"`, want: `{"value":"x"}`},
		{name: "byte order mark", format: dataset.FormatJSONL, mode: PartitionsOff, noFile: true, value: "\xef\xbb\xbf{\"a\":1}", want: `{"a":1}`},
		{
			name: "record wins", format: dataset.FormatJSONL, mode: PartitionsString,
			value: `{"date":"mine","_file":0,"nested":{"n":1},"s":"kind"}`,
			want:  `{"date":"mine","_file":0,"nested":{"n":1},"s":"kind","n":"007","f":"1.5","ok":"true","kind":"a b","nul":null}`,
			clash: []string{"date", "_file"},
		},
		{
			name: "escaped key", format: dataset.FormatJSONL, mode: PartitionsString, noFile: true,
			value: `{"d\u0061te":1,"v":"a\"b"}`,
			want:  `{"d\u0061te":1,"v":"a\"b","n":"007","f":"1.5","ok":"true","kind":"a b","nul":null}`,
			clash: []string{"date"},
		},
		{name: "csv row", format: dataset.FormatCSV, mode: PartitionsOff, value: `{"a":"1","b":""}`, want: `{"a":"1","b":"",` + file + `}`},
		{name: "text", format: dataset.FormatText, mode: PartitionsOff, value: "a \"q\" \\ \t\x01 é", want: `{"line":"a \"q\" \\ \t\u0001 é",` + file + `}`},
		{
			name: "text line clashes", format: dataset.FormatText, mode: PartitionsString, noFile: true,
			obj:   &s3event.Object{Bucket: "b", Key: "line=x/k=v/f.txt"},
			value: "hello", want: `{"line":"hello","k":"v"}`, clash: []string{"line"},
		},
		{
			name: "innermost partition wins", format: dataset.FormatJSONL, mode: PartitionsString, noFile: true,
			obj:   &s3event.Object{Bucket: "b", Key: "a=1/b=2/a=3/f.json"},
			value: `{}`, want: `{"a":"3","b":"2"}`,
		},
		{
			name: "no version, no time", format: dataset.FormatJSONL, mode: PartitionsOff,
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
			enc := NewEncoder(tt.format, o, tt.mode, !tt.noFile, func(f string) { clashed = append(clashed, f) })
			pin := dataset.Object{Bucket: o.Bucket, Key: o.Key}
			for range 2 { // the second time, clashes are not reported again
				got, err := enc.Encode(pin, records.Record{Offset: 42, Line: 3, Value: []byte(tt.value)})
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if got != tt.want {
					t.Errorf("Encode(%s)\n got %s\nwant %s", tt.value, got, tt.want)
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
	enc := NewEncoder(dataset.FormatJSONL, s3event.Object{Bucket: "b", Key: "k.jsonl"}, PartitionsString, true, nil)
	for _, v := range []string{`{"a":`, `nope`, `{"a":1} x`} {
		_, err := enc.Encode(dataset.Object{Bucket: "b", Key: "k.jsonl"}, records.Record{Offset: 7, Line: 2, Value: []byte(v)})
		var re *records.RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrNotJSON) || re.Offset != 7 || re.Line != 2 {
			t.Errorf("Encode(%q) = %v; want a *records.RecordError at offset 7, line 2, wrapping ErrNotJSON", v, err)
		}
	}
}

func TestDeletionBody(t *testing.T) {
	o := s3event.Object{Bucket: "b", Key: "d=1/_deleted=x/f.csv", VersionID: "v", EventName: "ObjectRemoved:Delete"}
	got := DeletionBody(o, PartitionsTyped)
	want := `{"_deleted":true,"_event":"ObjectRemoved:Delete","d":1,"_file":{"bucket":"b","key":"d=1/_deleted=x/f.csv","versionId":"v","eTag":null,"eventTime":null,"offset":null}}`
	if got != want {
		t.Errorf("DeletionBody\n got %s\nwant %s", got, want)
	}
}
