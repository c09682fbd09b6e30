package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

const testQueue = "http://127.0.0.1:1/000000000000/out"

func TestLoadConfig(t *testing.T) {
	defaults := config{
		outputQueueURL:  testQueue,
		partitions:      partitionsString,
		fileMetadata:    true,
		readConcurrency: DefaultReadConcurrency,
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
				envFormat: "ndjson", envEventTypes: "ObjectCreated:Put, s3:ObjectCreated:Copy ,", envIgnoreDeletions: "false",
				envKeyPrefix: "events/", envKeySuffix: ".jsonl", envMaxFileAge: "2d", envDedupByFileName: "true",
				envSortByTime: "1", envEventBridgeKeysRaw: "true", envPartitionColumns: "Typed", envFileMetadata: "false",
				envSkipGroupOnError: "true", envOnBadRecord: "skip", envMaxInFlight: "8", envMaxAttempts: "3",
				envReplaceInvalidChars: "true", envReadConcurrency: "2", envHandoffBytes: "512MiB",
				envFanoutWorkQueueURL: "http://q/work", envChunkSize: "16MiB", envCSVNoQuotedNewlines: "true",
				envDeadlineMargin: "5s", envS3PathStyle: "true",
			},
			want: func(c *config) {
				c.filter = s3event.Filter{
					EventTypes: []string{"ObjectCreated:Put", "s3:ObjectCreated:Copy"}, KeepDeletions: true,
					Prefix: "events/", Suffix: ".jsonl", MaxFileAge: 48 * time.Hour, FileNameOnly: true, SortByTime: true,
					Options: s3event.Options{EventBridgeKeysRaw: true},
				}
				c.plan = dataset.PlanOptions{Format: dataset.FormatJSONL, ChunkSize: 16 << 20, CSV: dataset.CSVOptions{NoQuotedNewlines: true}}
				c.partitions = partitionsTyped
				c.fileMetadata = false
				c.skipGroupOnError = true
				c.skipBadRecords = true
				c.send = sqsbatch.Options{MaxInFlight: 8, MaxAttempts: 3, ReplaceInvalidCharacters: true}
				c.readConcurrency = 2
				c.handoffBytes = 512 << 20
				c.fanoutWorkQueueURL = "http://q/work"
				c.deadlineMargin = 5 * time.Second
				c.s3PathStyle = true
			},
		},
		{name: "age in hours", env: map[string]string{envMaxFileAge: "36h"}, want: func(c *config) { c.filter.MaxFileAge = 36 * time.Hour }},
		{name: "age off", env: map[string]string{envMaxFileAge: "off"}, want: func(c *config) { c.filter.MaxFileAge = -1 }},
		{name: "age zero is off", env: map[string]string{envMaxFileAge: "0"}, want: func(c *config) { c.filter.MaxFileAge = -1 }},
		{name: "event types", env: map[string]string{envEventTypes: "s3:ObjectCreated:Put, ObjectRestore:*,*"}, want: func(c *config) {
			c.filter.EventTypes = []string{"s3:ObjectCreated:Put", "ObjectRestore:*", "*"}
		}},
		{name: "partitions off", env: map[string]string{envPartitionColumns: "false"}, want: func(c *config) { c.partitions = partitionsOff }},
		{name: "prefix keeps spaces", env: map[string]string{envKeyPrefix: " a b/"}, want: func(c *config) { c.filter.Prefix = " a b/" }},
		{name: "size in bytes", env: map[string]string{envHandoffBytes: "1048576", envFanoutWorkQueueURL: "http://q/1/work"}, want: func(c *config) {
			c.handoffBytes = 1 << 20
			c.fanoutWorkQueueURL = "http://q/1/work"
		}},
		{name: "missing output queue", env: map[string]string{envOutputQueueURL: ""}, wantErr: []string{envOutputQueueURL}},
		{
			name: "every problem at once",
			env: map[string]string{
				envOutputQueueURL: "", envFormat: "xml", envIgnoreDeletions: "maybe", envMaxFileAge: "7 days",
				envPartitionColumns: "yes", envFileMetadata: "nope", envSkipGroupOnError: "2", envOnBadRecord: "ignore",
				envMaxInFlight: "0", envMaxAttempts: "x", envReadConcurrency: "65", envHandoffBytes: "-1",
				envChunkSize: "8 MB", envDeadlineMargin: "-3s", envS3PathStyle: "on",
			},
			wantErr: []string{
				envOutputQueueURL, envFormat, envIgnoreDeletions, envMaxFileAge, envPartitionColumns, envFileMetadata,
				envSkipGroupOnError, envOnBadRecord, envMaxInFlight, envMaxAttempts, envReadConcurrency, envHandoffBytes,
				envChunkSize, envDeadlineMargin, envS3PathStyle,
			},
		},
		{name: "handoff without queue", env: map[string]string{envHandoffBytes: "1GiB"}, wantErr: []string{envHandoffBytes + ": needs " + envFanoutWorkQueueURL}},
		{name: "zero handoff", env: map[string]string{envHandoffBytes: "0", envFanoutWorkQueueURL: "http://q/1/work"}, wantErr: []string{envHandoffBytes}},
		{name: "days not whole", env: map[string]string{envMaxFileAge: "1.5d"}, wantErr: []string{envMaxFileAge}},
		{name: "event type typo", env: map[string]string{envEventTypes: "ObjectCreate:*"}, wantErr: []string{
			envEventTypes + `: "ObjectCreate:*" is not an S3 event type; want a type such as ObjectCreated:Put, or one of ObjectCreated:*, ObjectRemoved:*`}},
		{name: "event type unknown", env: map[string]string{envEventTypes: "s3:ObjectCreated:Put, PutObject"}, wantErr: []string{envEventTypes + `: "PutObject" is not an S3 event type`}},
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
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{}), cmp.Comparer(func(a, b func() time.Time) bool { return a == nil && b == nil })); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMargin(t *testing.T) {
	h := &Handler{}
	for _, tt := range []struct{ left, want time.Duration }{
		{15 * time.Minute, 30 * time.Second},
		{60 * time.Second, 6 * time.Second},
		{10 * time.Second, 2 * time.Second},
		{3 * time.Second, 1500 * time.Millisecond},
		{0, 0},
	} {
		if got := h.margin(tt.left); got != tt.want {
			t.Errorf("margin(%v) = %v; want %v", tt.left, got, tt.want)
		}
	}
	h.cfg.deadlineMargin = 7 * time.Second
	if got := h.margin(time.Minute); got != 7*time.Second {
		t.Errorf("margin with DEADLINE_MARGIN=7s = %v", got)
	}
}
