package worktask_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestQueuedJSON decodes tasks and planning steps captured, byte for byte,
// from the code before overrides were typed (testdata/, written by
// json.Marshal of the old raw overrides), and checks that each re-encodes
// to the same bytes: messages already on queues still run, and a task
// queued again (a continuation, a chained task's next chunk) is written as
// it was.
func TestQueuedJSON(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("testdata: %v, %v", files, err)
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			body := string(bytes.TrimSpace(data))
			var again []byte
			if strings.HasPrefix(filepath.Base(name), "plan-") {
				p, err := worktask.ParsePlan(body)
				if err != nil {
					t.Fatalf("ParsePlan: %v", err)
				}
				again, err = json.Marshal(p)
			} else {
				task, err := worktask.Parse(body)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				var s string
				s, err = task.Marshal()
				again = []byte(s)
			}
			if err != nil || string(again) != body {
				t.Errorf("re-encoded (%v):\n%s\nwant:\n%s", err, again, body)
			}
		})
	}
}

// TestParsedOnce: the overrides of a task from the queue hold their values,
// parsed, and normalised names.
func TestParsedOnce(t *testing.T) {
	data, err := os.ReadFile("testdata/task-chained-overrides.json")
	if err != nil {
		t.Fatal(err)
	}
	task, err := worktask.Parse(string(data))
	if err != nil {
		t.Fatal(err)
	}
	ov := task.Overrides
	if ov == nil || ov.ChunkSize.Value() != 8<<20 || ov.MaxInFlight.Value() != 8 || ov.MaxAttempts.Value() != 3 ||
		ov.Mode != worktask.ModeChunk || ov.Format != dataset.FormatJSONL || ov.BodyField != "payload" {
		t.Errorf("overrides %+v", ov)
	}
	next, ok := task.Next()
	if !ok || next.Overrides != ov {
		t.Errorf("the next chunk's task does not carry the overrides: %+v", next)
	}
}

// TestMalformedOverrides: a task or step whose overrides a request could
// not have given is malformed, with the field's name.
func TestMalformedOverrides(t *testing.T) {
	const chunk = `"chunk":{"bucket":"b","key":"k","index":0,"count":1,"start":0,"end":0,"format":"jsonl"}`
	for _, tc := range []struct{ body, want string }{
		{`{"runId":"r",` + chunk + `,"overrides":{"chunkSize":"big"}}`, `overrides: chunkSize: "big" is not a size such as 8MiB`},
		{`{"runId":"r",` + chunk + `,"overrides":{"maxInFlight":0}}`, "overrides: maxInFlight: 0 is not a whole number from 1 to 1000"},
		{`{"runId":"r",` + chunk + `,"overrides":{"maxAttempts":true}}`, "maxAttempts: a bool is not allowed here; want a number"},
		{`{"runId":"r",` + chunk + `,"overrides":{"mode":"fast"}}`, `overrides: mode: "fast" is not record, chunk or notification`},
		{`{"runId":"r",` + chunk + `,"overrides":{"colour":1}}`, `unknown field "colour"`},
		{`{"runId":"r",` + chunk + `,"overrides":{"ingest":{"partitions":"yes"}}}`, `ingest.partitions: "yes" is not string or typed`},
		{`{"runId":"r","plan":{"bucket":"b","prefix":"p/"},"cursor":{},"step":2,"overrides":{"targetQueueUrl":"orders"}}`, `targetQueueUrl: "orders" is not a queue URL`},
	} {
		var err error
		if strings.Contains(tc.body, `"plan"`) {
			_, err = worktask.ParsePlan(tc.body)
		} else {
			_, err = worktask.Parse(tc.body)
		}
		var bad *worktask.MalformedError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a MalformedError that says %q", tc.body, err, tc.want)
		}
	}
}

// TestSettingJSON: a setting goes back as written, a number as a number
// and a size as its string.
func TestSettingJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		value int64
	}{{`8`, 8}, {`"8MiB"`, 8 << 20}, {`"8"`, 8}, {`1048576`, 1 << 20}} {
		var s worktask.Setting
		if err := json.Unmarshal([]byte(tc.in), &s); err != nil || s.Value() != tc.value {
			t.Errorf("%s: %d, %v; want %d", tc.in, s.Value(), err, tc.value)
		}
		out, _ := json.Marshal(s)
		want := strings.Trim(tc.in, `"`)
		if strings.HasSuffix(tc.in, `B"`) {
			want = tc.in
		}
		if string(out) != want {
			t.Errorf("%s marshals to %s, want %s", tc.in, out, want)
		}
	}
	if out, _ := json.Marshal(worktask.Overrides{}); string(out) != `{}` {
		t.Errorf("no overrides marshal to %s, want {}", out)
	}
}

// TestFormatNames: the settings table reads a format name as package
// dataset does, so that FORMAT, -format and "format" mean what a chunk's
// format means.
func TestFormatNames(t *testing.T) {
	for _, name := range []string{"", "auto", "AUTO", "jsonl", "ndjson", "json", "csv", "tsv", "text", "txt", "lines", "parquet", " Parquet ", "xml", "avro"} {
		got, err := settings.Format.Parse(name)
		want, werr := dataset.ParseFormat(name)
		if (err == nil) != (werr == nil) || dataset.Format(got) != want {
			t.Errorf("%q: settings %q, %v; dataset %q, %v", name, got, err, want, werr)
		}
	}
}

// TestSettingsAgreeWithLeaves: pkg/settings imports nothing of ours,
// so its S3 URI check and its offload modes repeat pkg/dataset's and
// pkg/sqsextended's rules; this holds them to the same answers.
func TestSettingsAgreeWithLeaves(t *testing.T) {
	for _, uri := range []string{"s3://b", "s3://b/", "s3://b/p/q", "s3:///p", "s3://", "b/p", "S3://b/p", ""} {
		_, _, derr := dataset.ParseS3URI(uri)
		if serr := settings.CheckS3URI(uri); (serr == nil) != (derr == nil) {
			t.Errorf("%q: settings %v; dataset %v", uri, serr, derr)
		}
	}
	for _, mode := range []string{"", "large", "always", "LARGE", " always ", "never", "Always"} {
		got, serr := settings.Offload.Parse(mode)
		want, werr := sqsextended.ParseMode(mode)
		if (serr == nil) != (werr == nil) || sqsextended.Mode(got) != want {
			t.Errorf("%q: settings %q, %v; sqsextended %q, %v", mode, got, serr, want, werr)
		}
	}
}
