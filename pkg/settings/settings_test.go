package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestParse: each kind of setting reads what configuration writes and
// refuses the rest in words that say what is allowed; the words are those
// every way of giving the setting reports.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) (any, error)
		in    string
		want  any    // when accepted
		err   string // "" means accepted
	}{
		{"chunk size", size(settings.ChunkSize), "8MiB", int64(8 << 20), ""},
		{"chunk size in bytes", size(settings.ChunkSize), " 1024 ", int64(1024), ""},
		{"chunk size too small", size(settings.ChunkSize), "100", nil, "100 bytes is not a chunk size from 1KiB to 1GiB"},
		{"chunk size negative", size(settings.ChunkSize), "-1", nil, "-1 bytes is not a chunk size from 1KiB to 1GiB"},
		{"chunk size words", size(settings.ChunkSize), "big", nil, `"big" is not a size such as 8MiB`},
		{"message size", size(settings.TargetMaxMessageSize), "256", nil, "256 bytes is outside SQS's range of 1,024 to 1,048,576 bytes"},
		{"message size in KiB", size(settings.TargetMaxMessageSize), "256KiB", int64(256 << 10), ""},
		{"in flight", count(settings.MaxInFlight), "8", int64(8), ""},
		{"in flight huge", count(settings.MaxInFlight), "1e12", nil, `"1e12" is not a whole number from 1 to 1000`},
		{"attempts", count(settings.MaxAttempts), "101", nil, "101 is not a whole number from 1 to 100"},
		{"concurrency", count(settings.ChunkConcurrency), "65", nil, "65 is not a whole number from 1 to 64"},
		{"mode", choice(settings.Mode), " Chunk", "chunk", ""},
		{"mode unknown", choice(settings.Mode), "fast", nil, `"fast" is not record, chunk or notification`},
		{"format alias", choice(settings.Format), "ndjson", "jsonl", ""},
		{"format auto", choice(settings.Format), "auto", "", ""},
		{"format unknown", choice(settings.Format), "xml", nil, `"xml" is not auto, jsonl, csv, text or parquet`},
		{"partitions", choice(settings.PartitionColumns), "Typed", "typed", ""},
		{"partitions true", choice(settings.PartitionColumns), "true", "string", ""},
		{"partitions unknown", choice(settings.PartitionColumns), "yes", nil, `"yes" is not true, false or typed`},
		{"tracing unset", choice(settings.Tracing), "", "off", ""},
		{"bad record skip", choice(settings.OnBadRecord), "skip", "output", ""},
		{"bool", boolean(settings.FailOnError), "1", true, ""},
		{"bool words", boolean(settings.FailOnError), "maybe", nil, `"maybe" is not true or false`},
		{"duration", duration(settings.DeadlineMargin), "10s", 10 * time.Second, ""},
		{"duration negative", duration(settings.DeadlineMargin), "-1s", nil, `"-1s" is not a positive duration such as 10s`},
		{"age in days", age(settings.MaxFileAge), "7d", 7 * 24 * time.Hour, ""},
		{"age off", age(settings.MaxFileAge), "off", time.Duration(-1), ""},
		{"age zero", age(settings.MaxFileAge), "0s", time.Duration(-1), ""},
		{"age bad days", age(settings.MaxFileAge), "0d", nil, `"0d" is not a whole number of days such as 7d`},
		{"queue URL", text(settings.WorkQueueURL), "http://127.0.0.1:4566/000000000000/work", "http://127.0.0.1:4566/000000000000/work", ""},
		{"queue name", text(settings.WorkQueueURL), "orders", nil, "that looks like a queue name"},
		{"queue ARN", text(settings.TargetQueueURL), "arn:aws:sqs:us-east-1:1:q", nil, "that is an ARN"},
		{"S3 URI", text(settings.FailureS3URI), "bucket/prefix", nil, `"bucket/prefix" is not an s3://bucket/prefix URI`},
		{"table name", text(settings.ClaimsTable), "arn:aws:dynamodb:us-east-1:1:table/c", nil, "is not a DynamoDB table name"},
		{"run id", text(settings.RunID), "a/b", nil, `runId: "a/b" may hold only letters`},
		{"run id long", text(settings.RunID), strings.Repeat("r", 81), nil, "longer than 80 characters"},
		{"free text", text(settings.BodyField), " payload ", " payload ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.parse(tc.in)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Parse(%q) = %v, %v; want an error that says %q", tc.in, got, err, tc.err)
			}
		})
	}
}

// TestRows: every setting has a way to be given, the variables and flags
// are unique, and each variable names who reads it.
func TestRows(t *testing.T) {
	envs, flags := map[string]bool{}, map[string]bool{}
	for _, r := range settings.Rows() {
		if r.Env == "" && r.Flag == "" && r.Field == "" {
			t.Errorf("row %+v: no variable, flag or field", r)
		}
		if r.Env != "" {
			if envs[r.Env] || (r.Function != settings.Fanout && r.Function != settings.S3Ingest && r.Function != settings.Both) {
				t.Errorf("row %+v: variable listed twice, or no function", r)
			}
			envs[r.Env] = true
		}
		if r.Flag != "" {
			if flags[r.Flag] || strings.HasPrefix(r.Flag, "-") {
				t.Errorf("row %+v: flag listed twice, or with its dash", r)
			}
			flags[r.Flag] = true
		}
		if r.Doc == "" {
			t.Errorf("row %+v: no doc line", r)
		}
	}
}

func size(s settings.Size) func(string) (any, error)         { return wrap(s.Parse) }
func count(s settings.Count) func(string) (any, error)       { return wrap(s.Parse) }
func choice(s settings.Choice) func(string) (any, error)     { return wrap(s.Parse) }
func boolean(s settings.Bool) func(string) (any, error)      { return wrap(s.Parse) }
func duration(s settings.Duration) func(string) (any, error) { return wrap(s.Parse) }
func age(s settings.Age) func(string) (any, error)           { return wrap(s.Parse) }
func text(s settings.Text) func(string) (any, error)         { return wrap(s.Parse) }

func wrap[T any](parse func(string) (T, error)) func(string) (any, error) {
	return func(s string) (any, error) {
		v, err := parse(s)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "10B": 10, "4KiB": 4096, "8MiB": 8 << 20, "2GiB": 2 << 30} {
		if got, err := settings.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1.5MiB", "99999999999GiB"} {
		if got, err := settings.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d; want an error", in, got)
		}
	}
}

// TestDefaultsParse: every row's default is a value its own parser takes,
// since the functions and the CLI read an unset setting as its default.
func TestDefaultsParse(t *testing.T) {
	checks := []func() (settings.Row, error){
		parsed(settings.Mode), parsed(settings.NotificationFormat), parsed(settings.Format), parsed(settings.Offload),
		parsed(settings.PartitionColumns), parsed(settings.OnBadRecord), parsed(settings.Tracing), parsed(settings.ChunkSize),
		parsed(settings.InlineMaxBytes), parsed(settings.MaxInFlight), parsed(settings.MaxAttempts), parsed(settings.ChunkConcurrency),
		parsed(settings.ReadConcurrency), parsed(settings.IgnoreDeletions), parsed(settings.FileMetadata), parsed(settings.ReplaceInvalidCharacters),
		parsed(settings.CSVNoQuotedNewlines), parsed(settings.CSVHeader), parsed(settings.ParquetBinaryAsString), parsed(settings.FixedInFlight),
		parsed(settings.FailOnError), parsed(settings.SkipGroupOnError), parsed(settings.S3PathStyle), parsed(settings.DedupByFileName),
		parsed(settings.SortByTime), parsed(settings.EventBridgeKeysRaw), parsed(settings.ClaimsTTL), parsed(settings.MaxFileAge), parsed(settings.EventTypes),
	}
	for _, check := range checks {
		if row, err := check(); err != nil || row.Default == "" {
			t.Errorf("%s: the default %q: %v", row.Env, row.Default, err)
		}
	}
	withDefault := 0
	for _, r := range settings.Rows() {
		if r.Default != "" {
			withDefault++
		}
	}
	if withDefault != len(checks) {
		t.Errorf("%d rows have a default and %d are checked here: add the new one", withDefault, len(checks))
	}
}

// parsed returns the check that s's parser takes its default.
func parsed[T any](s settings.Setting[T]) func() (settings.Row, error) {
	return func() (settings.Row, error) {
		_, err := s.Parse(s.Spec().Default)
		return s.Spec(), err
	}
}
