package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "" means accepted
	}{
		{"prefix", `{"bucket":"b","prefix":"p/"}`, ""},
		{"all", `{"bucket":"b","all":true}`, ""},
		{"manifest", `{"manifest":"s3://m/manifest.json"}`, ""},
		{"settings as numbers", `{"bucket":"b","key":"k","chunkSize":1048576,"maxInFlight":8,"maxAttempts":3}`, ""},
		{"settings as strings", `{"bucket":"b","key":"k","chunkSize":"8MiB","maxInFlight":"8","mode":"Chunk","format":"ndjson"}`, ""},
		{"typo", `{"bucket":"b","prefx":"p/"}`, `unknown field "prefx" (did you mean "prefix"?)`},
		{"typo far from any field", `{"bucket":"b","prefix":"p/","colour":1}`, `unknown field "colour"`},
		{"bucket alone", `{"bucket":"b"}`, "names no dataset"},
		{"empty keys", `{"bucket":"b","keys":[]}`, "names no dataset"},
		{"empty key in list", `{"bucket":"b","keys":["a",""]}`, "keys[1] is empty"},
		{"key and prefix", `{"bucket":"b","key":"k","prefix":"p/"}`, "names key and prefix"},
		{"bucket with manifest", `{"bucket":"b","manifest":"s3://m/x.csv"}`, "bucket is not used with manifest"},
		{"bucket as URI", `{"bucket":"s3://b/p/","prefix":"p/"}`, "is not a bucket name"},
		{"no bucket", `{"prefix":"p/"}`, "bucket is missing"},
		{"manifest not a URI", `{"manifest":"m/x.csv"}`, "manifest"},
		{"negative chunk size", `{"bucket":"b","key":"k","chunkSize":-1}`, "chunkSize: -1 bytes is not a chunk size from 1KiB to 1GiB"},
		{"chunk size words", `{"bucket":"b","key":"k","chunkSize":"big"}`, `chunkSize: "big" is not a size such as 8MiB`},
		{"huge in flight", `{"bucket":"b","key":"k","maxInFlight":1e12}`, `maxInFlight: "1e12" is not a whole number from 1 to 1000`},
		{"zero attempts", `{"bucket":"b","key":"k","maxAttempts":0}`, "maxAttempts: 0 is not a whole number from 1 to 100"},
		{"in flight as bool", `{"bucket":"b","key":"k","maxInFlight":true}`, "maxInFlight: a bool is not allowed here; want a number"},
		{"bad mode", `{"bucket":"b","key":"k","mode":"bogus"}`, `mode: "bogus" is not record, chunk or notification`},
		{"bad format", `{"bucket":"b","key":"k","format":"xml"}`, `format: "xml" is not auto, jsonl, csv, text or parquet`},
		{"bad target", `{"bucket":"b","key":"k","targetQueueUrl":"arn:aws:sqs:us-east-1:1:q"}`, "that is an ARN"},
		{"mapping field of wrong type", `{"bucket":"b","key":"k","groupIdField":3}`, "groupIdField: a number is not allowed here; want a string"},
		{"bad partitions", `{"bucket":"b","key":"k","ingest":{"partitions":"yes"}}`, `ingest.partitions: "yes" is not string or typed`},
		{"bad run id", `{"bucket":"b","key":"k","runId":"a b"}`, `runId: "a b" may hold only`},
		{"long run id", `{"bucket":"b","key":"k","runId":"` + strings.Repeat("r", 81) + `"}`, "longer than 80"},
		{"null", `null`, "names no dataset"},
		{"array", `[]`, "an array is not an object"},
		{"not JSON", `{bucket:b}`, "not JSON"},
		{"empty", ``, "empty: want a JSON object"},
		{"trailing", `{"bucket":"b","key":"k"}{}`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("DecodeRequest(%s): %v; want it accepted", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("DecodeRequest(%s): %v; want an error that says %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestDecodeRequestNormalises(t *testing.T) {
	req, err := DecodeRequest([]byte(`{"bucket":"b","key":"k","chunkSize":"2MiB","maxInFlight":"8","mode":"CHUNK","format":"ndjson"}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Mode != worktask.ModeChunk || req.Format != dataset.FormatJSONL {
		t.Errorf("mode %q, format %q; want chunk and jsonl", req.Mode, req.Format)
	}
	if cs, inFlight, attempts := req.ChunkSize.Value(), req.MaxInFlight.Value(), req.MaxAttempts.Value(); cs != 2<<20 || inFlight != 8 || attempts != 0 {
		t.Errorf("settings %d, %d, %d; want 2MiB, 8 and unset", cs, inFlight, attempts)
	}
	// Overrides travel with tasks as JSON, and must read back the same.
	raw, err := json.Marshal(req.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"format":"jsonl","mode":"chunk","chunkSize":"2MiB","maxInFlight":8}` {
		t.Errorf("overrides marshal to %s", raw)
	}
}

// FuzzDecodeRequest checks that decoding never panics and never accepts a
// request that Validate refuses, and that what it accepts survives the
// trip through a task's JSON.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"bucket":"b","prefix":"p/"}`, `{"bucket":"b","all":true}`, `{"manifest":"s3://m/x.csv","glob":"*.jsonl"}`,
		`{"bucket":"b","keys":["a","b"],"chunkSize":"8MiB","maxInFlight":8,"mode":"chunk","runId":"r-1"}`,
		`{"bucket":"b","prefx":"p/"}`, `{"bucket":"b","key":"k","maxInFlight":1e12}`, `null`, `{"ingest":{"partitions":"typed"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := DecodeRequest(in)
		if err != nil {
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("DecodeRequest accepted %q, which Validate refuses: %v", in, err)
		}
		raw, err := json.Marshal(req.Overrides)
		if err != nil {
			t.Fatalf("marshal overrides of %q: %v", in, err)
		}
		if _, err := worktask.Parse(taskWith(raw)); err != nil {
			t.Fatalf("overrides of %q do not read back from a task (%s): %v", in, raw, err)
		}
	})
}

// taskWith returns the body of a task that carries overrides, as JSON.
func taskWith(overrides []byte) string {
	return `{"runId":"r","chunk":{"bucket":"b","key":"k","start":0,"end":0,"index":0,"count":1,"format":"jsonl"},"overrides":` + string(overrides) + `}`
}
