package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

const testQueue = "http://127.0.0.1:1/000000000000/out"

func TestLoadConfig(t *testing.T) {
	defaults := config{
		runner: fanout.Options{
			Target:           sqsbatch.Queue{URL: testQueue},
			ChunkConcurrency: ingesthandler.DefaultReadConcurrency,
		},
		ingest: ingesthandler.Options{
			Partitions:      recordjson.PartitionsString,
			FileMetadata:    true,
			ReadConcurrency: ingesthandler.DefaultReadConcurrency,
		},
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(c *config)
		wantErr []string // each must appear in the error
	}{
		{name: "defaults", want: func(*config) {}},
		{
			name: "every setting",
			env: map[string]string{
				envFormat: "ndjson", lambdaenv.EventTypes: "ObjectCreated:Put, s3:ObjectCreated:Copy ,", lambdaenv.IgnoreDeletions: "false",
				lambdaenv.KeyPrefix: "events/", lambdaenv.KeySuffix: ".jsonl", lambdaenv.MaxFileAge: "2d", lambdaenv.DedupByFileName: "true",
				lambdaenv.SortByTime: "1", lambdaenv.EventBridgeKeysRaw: "true", envPartitionColumns: "Typed", envFileMetadata: "false",
				envSkipGroupOnError: "true", envOnBadRecord: "fail", envFailOnError: "true", envMaxInFlight: "8", envMaxAttempts: "3",
				envReplaceInvalidChars: "true", envReadConcurrency: "2", envHandoffBytes: "512MiB",
				envFanoutWorkQueueURL: "http://q/work", envChunkSize: "16MiB", envCSVNoQuotedNewlines: "true",
				envDeadlineMargin: "5s", envS3PathStyle: "true", envFailureQueueURL: "http://q/failures",
			},
			want: func(c *config) {
				c.runner = fanout.Options{
					Target:           sqsbatch.Queue{URL: testQueue},
					WorkQueueURL:     "http://q/work",
					FailureQueueURL:  "http://q/failures",
					Plan:             dataset.PlanOptions{Format: dataset.FormatJSONL, ChunkSize: 16 << 20, CSV: dataset.CSVOptions{NoQuotedNewlines: true}},
					Send:             sqsbatch.Options{MaxInFlight: 8, MaxAttempts: 3, ReplaceInvalidCharacters: true},
					ChunkConcurrency: 2,
				}
				c.ingest = ingesthandler.Options{
					Filter: s3event.Filter{
						EventTypes: []string{"ObjectCreated:Put", "s3:ObjectCreated:Copy"}, KeepDeletions: true,
						Prefix: "events/", Suffix: ".jsonl", MaxFileAge: 48 * time.Hour, FileNameOnly: true, SortByTime: true,
						Options: s3event.Options{EventBridgeKeysRaw: true},
					},
					Partitions:       recordjson.PartitionsTyped,
					FileMetadata:     false,
					FailBadRecords:   true,
					FailOnError:      true,
					SkipGroupOnError: true,
					ReadConcurrency:  2,
					HandoffBytes:     512 << 20,
					DeadlineMargin:   5 * time.Second,
				}
				c.s3PathStyle = true
			},
		},
		{name: "age in hours", env: map[string]string{lambdaenv.MaxFileAge: "36h"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = 36 * time.Hour }},
		{name: "age off", env: map[string]string{lambdaenv.MaxFileAge: "off"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = -1 }},
		{name: "age zero is off", env: map[string]string{lambdaenv.MaxFileAge: "0"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = -1 }},
		{name: "event types", env: map[string]string{lambdaenv.EventTypes: "s3:ObjectCreated:Put, ObjectRestore:*,*"}, want: func(c *config) {
			c.ingest.Filter.EventTypes = []string{"s3:ObjectCreated:Put", "ObjectRestore:*", "*"}
		}},
		{name: "partitions off", env: map[string]string{envPartitionColumns: "false"}, want: func(c *config) { c.ingest.Partitions = recordjson.PartitionsOff }},
		{name: "bad records to the failure output", env: map[string]string{envOnBadRecord: "output"}, want: func(*config) {}},
		{name: "skip is the old name of output", env: map[string]string{envOnBadRecord: "Skip"}, want: func(*config) {}},
		{name: "failure output in S3", env: map[string]string{envFailureS3URI: "s3://b/failed/"}, want: func(c *config) { c.runner.FailureS3URI = "s3://b/failed/" }},
		{name: "prefix keeps spaces", env: map[string]string{lambdaenv.KeyPrefix: " a b/"}, want: func(c *config) { c.ingest.Filter.Prefix = " a b/" }},
		{name: "size in bytes", env: map[string]string{envHandoffBytes: "1048576", envFanoutWorkQueueURL: "http://q/1/work"}, want: func(c *config) {
			c.ingest.HandoffBytes = 1 << 20
			c.runner.WorkQueueURL = "http://q/1/work"
		}},
		{name: "work queue without hand-off is not used", env: map[string]string{envFanoutWorkQueueURL: "http://q/1/work"}, want: func(*config) {}},
		{name: "claims table", env: map[string]string{envClaimsTable: "s3sqs-claims"}, want: func(c *config) { c.claimsTable = "s3sqs-claims" }},
		{name: "claims table that is no name", env: map[string]string{envClaimsTable: "a b"}, wantErr: []string{envClaimsTable + `: "a b" is not a DynamoDB table name`}},
		{name: "missing output queue", env: map[string]string{envOutputQueueURL: ""}, wantErr: []string{envOutputQueueURL}},
		{
			name: "every problem at once",
			env: map[string]string{
				envOutputQueueURL: "", envFormat: "xml", lambdaenv.IgnoreDeletions: "maybe", lambdaenv.MaxFileAge: "7 days",
				envPartitionColumns: "yes", envFileMetadata: "nope", envSkipGroupOnError: "2", envOnBadRecord: "ignore",
				envMaxInFlight: "0", envMaxAttempts: "x", envReadConcurrency: "65", envHandoffBytes: "-1",
				envChunkSize: "8 MB", envDeadlineMargin: "-3s", envS3PathStyle: "on", envFailOnError: "yes please",
				envFailureQueueURL: "failures",
			},
			wantErr: []string{
				envOutputQueueURL, envFormat, lambdaenv.IgnoreDeletions, lambdaenv.MaxFileAge, envPartitionColumns, envFileMetadata,
				envSkipGroupOnError, envOnBadRecord, envMaxInFlight, envMaxAttempts, envReadConcurrency, envHandoffBytes,
				envChunkSize, envDeadlineMargin, envS3PathStyle, envFailOnError, envFailureQueueURL,
			},
		},
		{name: "handoff without queue", env: map[string]string{envHandoffBytes: "1GiB"}, wantErr: []string{envHandoffBytes + ": needs " + envFanoutWorkQueueURL}},
		{name: "zero handoff", env: map[string]string{envHandoffBytes: "0", envFanoutWorkQueueURL: "http://q/1/work"}, wantErr: []string{envHandoffBytes}},
		{name: "two failure outputs", env: map[string]string{envFailureQueueURL: "http://q/failures", envFailureS3URI: "s3://b/failed/"}, wantErr: []string{
			envFailureS3URI + ": set only one of " + envFailureQueueURL + " and " + envFailureS3URI}},
		{name: "failure S3 URI without scheme", env: map[string]string{envFailureS3URI: "b/failed"}, wantErr: []string{envFailureS3URI + `: "b/failed" is not an s3://bucket/prefix URI`}},
		{name: "days not whole", env: map[string]string{lambdaenv.MaxFileAge: "1.5d"}, wantErr: []string{lambdaenv.MaxFileAge}},
		{name: "event type typo", env: map[string]string{lambdaenv.EventTypes: "ObjectCreate:*"}, wantErr: []string{
			lambdaenv.EventTypes + `: "ObjectCreate:*" is not an S3 event type; want a type such as ObjectCreated:Put, or one of ObjectCreated:*, ObjectRemoved:*`}},
		{name: "event type unknown", env: map[string]string{lambdaenv.EventTypes: "s3:ObjectCreated:Put, PutObject"}, wantErr: []string{lambdaenv.EventTypes + `: "PutObject" is not an S3 event type`}},
		{name: "output queue name", env: map[string]string{envOutputQueueURL: "records"}, wantErr: []string{envOutputQueueURL + `: "records" is not a queue URL`}},
		{name: "chunk size too small", env: map[string]string{envChunkSize: "512"}, wantErr: []string{envChunkSize + ": 512 bytes is not a chunk size from 1KiB to 1GiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{envOutputQueueURL: testQueue}
			for k, v := range tt.env {
				env[k] = v
			}
			got, err := loadConfig(func(k string) string { return env[k] })
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; want one naming %v", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not name %s:\n%v", w, err)
					}
				}
				if n := len(strings.Split(err.Error(), "\n")); n != len(tt.wantErr) {
					t.Errorf("error has %d lines, want %d:\n%v", n, len(tt.wantErr), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			want := defaults
			tt.want(&want)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueVariable(t *testing.T) {
	for role, want := range map[string]string{
		fanout.RoleTarget:  envOutputQueueURL,
		fanout.RoleWork:    envFanoutWorkQueueURL,
		fanout.RoleFailure: envFailureQueueURL,
	} {
		if got := queueVariable(role); got != want {
			t.Errorf("queueVariable(%q) = %s; want %s", role, got, want)
		}
	}
}

// TestConfigTable checks that the rows of docs/configuration.md for
// s3ingest (function s3ingest or both) are exactly the variables
// loadConfig reads, FANOUT_WORK_QUEUE_URL (read only with HANDOFF_BYTES)
// included.
func TestConfigTable(t *testing.T) {
	load := func(getenv func(string) string) error { _, err := loadConfig(getenv); return err }
	base := map[string]string{envOutputQueueURL: testQueue}
	for _, err := range doccheck.CheckFunction(doccheck.S3Ingest, load, base, "../../docs/configuration.md") {
		t.Error(err)
	}
}
