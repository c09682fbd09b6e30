package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

const testQueue = "http://127.0.0.1:1/000000000000/out"

func TestLoadConfig(t *testing.T) {
	// The settings table's defaults, which loadConfig reads there.
	defaults := config{
		runner: engine.Options{
			Target:           sqsbatch.Queue{URL: testQueue},
			Plan:             dataset.PlanOptions{ChunkSize: dataset.DefaultChunkSize},
			Send:             sqsbatch.Options{MaxInFlight: sqsbatch.DefaultMaxInFlight, MaxAttempts: sqsbatch.DefaultMaxAttempts},
			ChunkConcurrency: engine.DefaultReadConcurrency,
			Offload:          engine.Offload{Mode: sqsextended.ModeLarge},
		},
		ingest: ingesthandler.Options{
			Filter:          s3event.Filter{EventTypes: []string{"ObjectCreated:*"}, MaxFileAge: -1},
			Partitions:      recordjson.PartitionsString,
			FileMetadata:    true,
			ReadConcurrency: engine.DefaultReadConcurrency,
		},
		claimsTTL: claims.DefaultTTL,
		tracing:   tracing.ModeOff,
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
				settings.Format.Env: "ndjson", settings.EventTypes.Env: "ObjectCreated:Put, s3:ObjectCreated:Copy ,", settings.IgnoreDeletions.Env: "false",
				settings.KeyPrefix.Env: "events/", settings.KeySuffix.Env: ".jsonl", settings.MaxFileAge.Env: "2d", settings.DedupByFileName.Env: "true",
				settings.SortByTime.Env: "1", settings.EventBridgeKeysRaw.Env: "true", settings.PartitionColumns.Env: "Typed", settings.FileMetadata.Env: "false",
				settings.SkipGroupOnError.Env: "true", settings.OnBadRecord.Env: "fail", settings.FailOnError.Env: "true", settings.MaxInFlight.Env: "8", settings.FixedInFlight.Env: "true", settings.MaxAttempts.Env: "3",
				settings.ReplaceInvalidCharacters.Env: "true", settings.ReadConcurrency.Env: "2", settings.HandoffBytes.Env: "512MiB",
				settings.FanoutWorkQueueURL.Env: "http://q/work", settings.ChunkSize.Env: "16MiB", settings.CSVNoQuotedNewlines.Env: "true",
				settings.DeadlineMargin.Env: "5s", settings.S3PathStyle.Env: "true", settings.FailureQueueURL.Env: "http://q/failures",
			},
			want: func(c *config) {
				c.runner = engine.Options{
					Target:           sqsbatch.Queue{URL: testQueue},
					WorkQueueURL:     "http://q/work",
					FailureQueueURL:  "http://q/failures",
					Plan:             dataset.PlanOptions{Format: dataset.FormatJSONL, ChunkSize: 16 << 20, CSV: dataset.CSVOptions{NoQuotedNewlines: true}},
					Send:             sqsbatch.Options{MaxInFlight: 8, FixedInFlight: true, MaxAttempts: 3, ReplaceInvalidCharacters: true},
					ChunkConcurrency: 2,
					Offload:          engine.Offload{Mode: sqsextended.ModeLarge},
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
		{name: "age in hours", env: map[string]string{settings.MaxFileAge.Env: "36h"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = 36 * time.Hour }},
		{name: "age off", env: map[string]string{settings.MaxFileAge.Env: "off"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = -1 }},
		{name: "age zero is off", env: map[string]string{settings.MaxFileAge.Env: "0"}, want: func(c *config) { c.ingest.Filter.MaxFileAge = -1 }},
		{name: "event types", env: map[string]string{settings.EventTypes.Env: "s3:ObjectCreated:Put, ObjectRestore:*,*"}, want: func(c *config) {
			c.ingest.Filter.EventTypes = []string{"s3:ObjectCreated:Put", "ObjectRestore:*", "*"}
		}},
		{name: "partitions off", env: map[string]string{settings.PartitionColumns.Env: "false"}, want: func(c *config) { c.ingest.Partitions = recordjson.PartitionsOff }},
		{name: "bad records to the failure output", env: map[string]string{settings.OnBadRecord.Env: "output"}, want: func(*config) {}},
		{name: "skip is the old name of output", env: map[string]string{settings.OnBadRecord.Env: "Skip"}, want: func(*config) {}},
		{name: "failure output in S3", env: map[string]string{settings.FailureS3URI.Env: "s3://b/failed/"}, want: func(c *config) { c.runner.FailureS3URI = "s3://b/failed/" }},
		{name: "prefix keeps spaces", env: map[string]string{settings.KeyPrefix.Env: " a b/"}, want: func(c *config) { c.ingest.Filter.Prefix = " a b/" }},
		{name: "size in bytes", env: map[string]string{settings.HandoffBytes.Env: "1048576", settings.FanoutWorkQueueURL.Env: "http://q/1/work"}, want: func(c *config) {
			c.ingest.HandoffBytes = 1 << 20
			c.runner.WorkQueueURL = "http://q/1/work"
		}},
		{name: "work queue without hand-off is not used", env: map[string]string{settings.FanoutWorkQueueURL.Env: "http://q/1/work"}, want: func(*config) {}},
		{name: "claims table", env: map[string]string{settings.ClaimsTable.Env: "s3sqs-claims"}, want: func(c *config) { c.claimsTable = "s3sqs-claims" }},
		{name: "claims table that is no name", env: map[string]string{settings.ClaimsTable.Env: "a b"}, wantErr: []string{settings.ClaimsTable.Env + `: "a b" is not a DynamoDB table name`}},
		{name: "missing output queue", env: map[string]string{settings.OutputQueueURL.Env: ""}, wantErr: []string{settings.OutputQueueURL.Env}},
		{
			name: "every problem at once",
			env: map[string]string{
				settings.OutputQueueURL.Env: "", settings.Format.Env: "xml", settings.IgnoreDeletions.Env: "maybe", settings.MaxFileAge.Env: "7 days",
				settings.PartitionColumns.Env: "yes", settings.FileMetadata.Env: "nope", settings.SkipGroupOnError.Env: "2", settings.OnBadRecord.Env: "ignore",
				settings.MaxInFlight.Env: "0", settings.MaxAttempts.Env: "x", settings.ReadConcurrency.Env: "65", settings.HandoffBytes.Env: "-1",
				settings.ChunkSize.Env: "8 MB", settings.DeadlineMargin.Env: "-3s", settings.S3PathStyle.Env: "on", settings.FailOnError.Env: "yes please",
				settings.FailureQueueURL.Env: "failures",
			},
			wantErr: []string{
				settings.OutputQueueURL.Env, settings.Format.Env, settings.IgnoreDeletions.Env, settings.MaxFileAge.Env, settings.PartitionColumns.Env, settings.FileMetadata.Env,
				settings.SkipGroupOnError.Env, settings.OnBadRecord.Env, settings.MaxInFlight.Env, settings.MaxAttempts.Env, settings.ReadConcurrency.Env, settings.HandoffBytes.Env,
				settings.ChunkSize.Env, settings.DeadlineMargin.Env, settings.S3PathStyle.Env, settings.FailOnError.Env, settings.FailureQueueURL.Env,
			},
		},
		{name: "handoff without queue", env: map[string]string{settings.HandoffBytes.Env: "1GiB"}, wantErr: []string{settings.HandoffBytes.Env + ": needs " + settings.FanoutWorkQueueURL.Env}},
		{name: "zero handoff", env: map[string]string{settings.HandoffBytes.Env: "0", settings.FanoutWorkQueueURL.Env: "http://q/1/work"}, wantErr: []string{settings.HandoffBytes.Env}},
		{name: "two failure outputs", env: map[string]string{settings.FailureQueueURL.Env: "http://q/failures", settings.FailureS3URI.Env: "s3://b/failed/"}, wantErr: []string{
			settings.FailureS3URI.Env + ": set only one of " + settings.FailureQueueURL.Env + " and " + settings.FailureS3URI.Env}},
		{name: "failure S3 URI without scheme", env: map[string]string{settings.FailureS3URI.Env: "b/failed"}, wantErr: []string{settings.FailureS3URI.Env + `: "b/failed" is not an s3://bucket/prefix URI`}},
		{name: "days not whole", env: map[string]string{settings.MaxFileAge.Env: "1.5d"}, wantErr: []string{settings.MaxFileAge.Env}},
		{name: "event type typo", env: map[string]string{settings.EventTypes.Env: "ObjectCreate:*"}, wantErr: []string{
			settings.EventTypes.Env + `: "ObjectCreate:*" is not an S3 event type; want a type such as ObjectCreated:Put, or one of ObjectCreated:*, ObjectRemoved:*`}},
		{name: "event type unknown", env: map[string]string{settings.EventTypes.Env: "s3:ObjectCreated:Put, PutObject"}, wantErr: []string{settings.EventTypes.Env + `: "PutObject" is not an S3 event type`}},
		{name: "output queue name", env: map[string]string{settings.OutputQueueURL.Env: "records"}, wantErr: []string{settings.OutputQueueURL.Env + `: "records" is not a queue URL`}},
		{name: "chunk size too small", env: map[string]string{settings.ChunkSize.Env: "512"}, wantErr: []string{settings.ChunkSize.Env + ": 512 bytes is not a chunk size from 1KiB to 1GiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{settings.OutputQueueURL.Env: testQueue}
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
		engine.RoleTarget:  settings.OutputQueueURL.Env,
		engine.RoleWork:    settings.FanoutWorkQueueURL.Env,
		engine.RoleFailure: settings.FailureQueueURL.Env,
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
	base := map[string]string{settings.OutputQueueURL.Env: testQueue}
	for _, err := range doccheck.CheckFunction(doccheck.S3Ingest, load, base, "../../docs/configuration.md") {
		t.Error(err)
	}
}
