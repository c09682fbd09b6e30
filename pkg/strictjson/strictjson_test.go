package strictjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

type mapping struct {
	BodyField string `json:"bodyField,omitempty"`
}

type ingest struct {
	Partitions string `json:"partitions,omitempty"`
}

type item struct {
	K int `json:"k"`
}

// request has the shapes strictjson's callers decode: an embedded struct,
// a nested pointer to one, an array of objects, a map, a field named by
// its Go name, a raw value and one that decodes itself.
type request struct {
	Prefix string `json:"prefix,omitempty"`
	mapping
	Ingest  *ingest           `json:"ingest,omitempty"`
	Items   []item            `json:"items,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Plain   string
	Raw     json.RawMessage  `json:"raw,omitempty"`
	Number  json.Number      `json:"number,omitempty"`
	Setting worktask.Setting `json:"setting,omitzero"`
	Any     any              `json:"any,omitempty"`
	Skipped string           `json:"-"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		// want is a part of the error; "" means none.
		want string
	}{
		{"exact keys", `{"prefix":"a/","bodyField":"v","ingest":{"partitions":"hive"},"items":[{"k":1}],"labels":{"a":"1","A":"2"},"Plain":"p","setting":"8MiB","any":{"x":1}}`, ""},
		{"duplicate key", `{"prefix":"a/","prefix":"b/"}`, `duplicate field "prefix": a field may appear only once`},
		{"duplicate key, one escaped", `{"pre\u0066ix":"a/","prefix":"b/"}`, `duplicate field "prefix"`},
		{"duplicate of the same value", `{"prefix":"a/","prefix":"a/"}`, `duplicate field "prefix"`},
		{"key in another case", `{"Prefix":"a/"}`, `unknown field "Prefix" (field names are case-sensitive: did you mean "prefix"?)`},
		{"key in upper case", `{"PREFIX":"a/"}`, `unknown field "PREFIX"`},
		{"both cases", `{"prefix":"a/","Prefix":"b/"}`, `unknown field "Prefix"`},
		{"embedded field in another case", `{"BodyField":"v"}`, `unknown field "BodyField" (field names are case-sensitive: did you mean "bodyField"?)`},
		{"Go name in another case", `{"plain":"p"}`, `did you mean "Plain"?`},
		{"nested duplicate", `{"ingest":{"partitions":"hive","partitions":"none"}}`, `duplicate field "ingest.partitions"`},
		{"nested key in another case", `{"ingest":{"Partitions":"hive"}}`, `unknown field "ingest.Partitions" (field names are case-sensitive: did you mean "ingest.partitions"?)`},
		{"duplicate in an array's object", `{"items":[{"k":1},{"k":1,"k":2}]}`, `duplicate field "items[1].k"`},
		{"case in an array's object", `{"items":[{"K":1}]}`, `unknown field "items[0].K"`},
		{"duplicate map key", `{"labels":{"a":"1","a":"2"}}`, `duplicate field "labels.a"`},
		{"duplicate in a free value", `{"any":{"x":1,"x":2}}`, `duplicate field "any.x"`},
		{"duplicate in a value that decodes itself", `{"setting":"1","setting":"2"}`, `duplicate field "setting"`},
		{"raw value left to its reader", `{"raw":{"x":1,"x":2,"X":3}}`, ""},
		{"number no float holds", `{"raw":[1e400],"number":1e400}`, ""},
		// What was refused before still is, with the same words.
		{"unknown field", `{"prefx":"a/"}`, `unknown field "prefx" (did you mean "prefix"?)`},
		{"field not decoded", `{"Skipped":"x"}`, `unknown field "Skipped"`},
		{"wrong type", `{"ingest":{"partitions":1}}`, `ingest.partitions: a number is not allowed here; want a string`},
		{"trailing data", `{"prefix":"a/"} {}`, "more than one JSON value"},
		{"not JSON", `{"prefix":`, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r request
			err := strictjson.Decode([]byte(tc.in), &r)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Decode(%s): %v; want no error", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Decode(%s): %v; want an error that says %q", tc.in, err, tc.want)
			}
		})
	}
}

// TestDecodeTopLevelMap checks a map at the top, as a Distributed Map
// batch is probed: its keys are free in case, but not given twice.
func TestDecodeTopLevelMap(t *testing.T) {
	var m map[string]json.RawMessage
	if err := strictjson.Decode([]byte(`{"Items":[],"items":[]}`), &m); err != nil {
		t.Errorf("keys in two cases: %v; want no error", err)
	}
	if err := strictjson.Decode([]byte(`{"Items":[],"Items":[{}]}`), &m); err == nil || !strings.Contains(err.Error(), `duplicate field "Items"`) {
		t.Errorf("a key twice: %v; want it refused", err)
	}
}

// TestDecodeRequest goes through fanout's request decoder: the request of
// the issue, which sent b/, is refused, and so is its key in another case.
func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"bucket":"lake","prefix":"a/","prefix":"b/"}`, `fanout: bad request: duplicate field "prefix"`},
		{`{"bucket":"lake","Prefix":"a/"}`, `fanout: bad request: unknown field "Prefix"`},
		{`{"bucket":"lake","prefix":"a/","ingest":{"fileMetadata":true,"fileMetadata":false}}`, `duplicate field "ingest.fileMetadata"`},
	} {
		if _, err := engine.DecodeRequest([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeRequest(%s): %v; want an error that says %q", tc.in, err, tc.want)
		}
	}
	req, err := engine.DecodeRequest([]byte(`{"bucket":"lake","prefix":"a/","bodyField":"v"}`))
	if err != nil || req.Prefix != "a/" || req.BodyField != "v" {
		t.Errorf("a good request: %+v, %v; want prefix a/ and bodyField v", req, err)
	}
}
