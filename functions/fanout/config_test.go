package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestLoadConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := loadConfig(env(settings.TargetQueueURL.Env, "https://sqs.eu-west-1.amazonaws.com/111122223333/q"))
		if err != nil {
			t.Fatal(err)
		}
		// The settings table's defaults, which loadConfig reads there.
		o := c.runner
		if o.Target.URL != "https://sqs.eu-west-1.amazonaws.com/111122223333/q" || o.Mode != worktask.ModeRecord || o.Plan.Format != dataset.FormatAuto ||
			o.Plan.ChunkSize != dataset.DefaultChunkSize || o.Send.MaxInFlight != sqsbatch.DefaultMaxInFlight || o.Send.MaxAttempts != sqsbatch.DefaultMaxAttempts ||
			o.ChunkConcurrency != engine.DefaultChunkConcurrency || c.handler.Concurrency != engine.DefaultChunkConcurrency ||
			o.Planning.InlineMaxBytes != engine.DefaultInlineMaxBytes || c.claimsTTL != claims.DefaultTTL ||
			c.handler.FailOnError || !slices.Equal(c.handler.Filter.EventTypes, []string{"ObjectCreated:*"}) {
			t.Errorf("defaults: %+v", c)
		}
	})
	t.Run("everything", func(t *testing.T) {
		c, err := loadConfig(env(
			settings.TargetQueueName.Env, "orders.fifo", settings.TargetQueueOwner.Env, "111122223333", settings.TargetMaxMessageSize.Env, "256KiB",
			settings.WorkQueueURL.Env, "http://127.0.0.1:4566/000000000000/work", settings.FailureS3URI.Env, "s3://f/failed/", settings.Format.Env, "csv", settings.Mode.Env, "chunk",
			settings.ChunkSize.Env, "16MiB", settings.MaxInFlight.Env, "8", settings.FixedInFlight.Env, "true", settings.MaxAttempts.Env, "7", settings.BodyField.Env, "payload",
			settings.AttributesField.Env, "attrs", settings.GroupIDField.Env, "tenant", settings.DedupIDField.Env, "id", settings.FailOnError.Env, "true",
			settings.InlineMaxBytes.Env, "1GiB", settings.DeadlineMargin.Env, "20s", settings.ChunkConcurrency.Env, "2", settings.CSVNoQuotedNewlines.Env, "true",
			settings.EventTypes.Env, "ObjectCreated:Put", settings.KeyPrefix.Env, "in/", settings.IgnoreDeletions.Env, "false",
		))
		if err != nil {
			t.Fatal(err)
		}
		o := c.runner
		if o.Target.Name != "orders.fifo" || o.Target.OwnerAccountID != "111122223333" || o.Target.MaxMessageSize != 256<<10 ||
			o.WorkQueueURL != "http://127.0.0.1:4566/000000000000/work" || o.FailureS3URI != "s3://f/failed/" || o.Plan.Format != dataset.FormatCSV ||
			o.Mode != worktask.ModeChunk || o.Plan.ChunkSize != 16<<20 || o.Send.MaxInFlight != 8 || !o.Send.FixedInFlight || o.Send.MaxAttempts != 7 ||
			o.Mapping != (worktask.Mapping{BodyField: "payload", AttributesField: "attrs", GroupIDField: "tenant", DedupIDField: "id"}) ||
			!c.handler.FailOnError || o.Planning.InlineMaxBytes != 1<<30 || c.handler.DeadlineMargin != 20*time.Second || o.ChunkConcurrency != 2 ||
			!o.Plan.CSV.NoQuotedNewlines || len(c.handler.Filter.EventTypes) != 1 || c.handler.Filter.Prefix != "in/" ||
			c.handler.Filter.KeepDeletions || c.handler.Concurrency != 2 {
			t.Errorf("config: %+v", c)
		}
	})
	t.Run("filters", func(t *testing.T) {
		c, err := loadConfig(env(settings.TargetQueueURL.Env, "https://sqs.eu-west-1.amazonaws.com/111122223333/q",
			settings.ModifiedAfter.Env, "2024-01-31", settings.ModifiedBefore.Env, "2024-02-01T10:00:00+02:00", settings.MinObjectSize.Env, "1KiB",
			settings.MaxObjectSize.Env, "1GiB", settings.StorageClasses.Env, "STANDARD, GLACIER_IR", settings.KeyRegex.Env, `\.parquet$`))
		if err != nil {
			t.Fatal(err)
		}
		f := c.runner.Planning.Filters
		if !f.ModifiedAfter.Equal(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)) || !f.ModifiedBefore.Equal(time.Date(2024, 2, 1, 8, 0, 0, 0, time.UTC)) ||
			f.MinSize != 1<<10 || f.MaxSize != 1<<30 || !slices.Equal(f.StorageClasses, []string{"STANDARD", "GLACIER_IR"}) || f.KeyRegex != `\.parquet$` {
			t.Errorf("filters: %+v", f)
		}
		_, err = loadConfig(env(settings.TargetQueueURL.Env, "https://sqs.eu-west-1.amazonaws.com/111122223333/q",
			settings.MinObjectSize.Env, "2MiB", settings.MaxObjectSize.Env, "1MiB"))
		if err == nil || !strings.Contains(err.Error(), "MIN_OBJECT_SIZE and MAX_OBJECT_SIZE: dataset: minSize 2097152 is above maxSize 1048576") {
			t.Errorf("bounds the wrong way round: %v", err)
		}
	})
	// Values a user may well write by mistake: each is refused with the
	// variable's name and words that say what is allowed.
	for _, tc := range []struct{ name, value, want string }{
		{settings.TargetMaxMessageSize.Env, "256", "outside SQS's range of 1,024 to 1,048,576 bytes"},
		{settings.TargetMaxMessageSize.Env, "2MiB", "outside SQS's range"},
		{settings.TargetQueueURL.Env, "my-queue", "looks like a queue name"},
		{settings.TargetQueueURL.Env, "arn:aws:sqs:us-east-1:111122223333:q", "that is an ARN"},
		{settings.WorkQueueURL.Env, "sqs.us-east-1.amazonaws.com/1/q", "is not a queue URL"},
		{settings.ChunkSize.Env, "-1", "is not a chunk size from 1KiB to 1GiB"},
		{settings.ChunkSize.Env, "100", "100 bytes is not a chunk size from 1KiB to 1GiB"},
		{settings.MaxInFlight.Env, "1e12", `"1e12" is not a whole number from 1 to 1000`},
		{settings.MaxAttempts.Env, "101", "101 is not a whole number from 1 to 100"},
		{settings.Mode.Env, "bogus", `"bogus" is not record, chunk or notification`},
		{settings.EventTypes.Env, "ObjectCreate:*", `"ObjectCreate:*" is not an S3 event type`},
		{settings.ReportS3URI.Env, "bucket/prefix", "is not an s3://bucket/prefix URI"},
		{settings.ClaimsTable.Env, "arn:aws:dynamodb:us-east-1:111122223333:table/claims", "is not a DynamoDB table name"},
		{settings.Tracing.Env, "xray", `"xray" is not off, otlp or stdout`},
		{"OFFLOAD", "sometimes", `"sometimes" is not large or always`},
		{settings.StorageClasses.Env, "standard", `"standard" is not an S3 storage class`},
		{settings.StorageClasses.Env, "STANDARD,", "has an empty name"},
		{settings.KeyRegex.Env, "a(", "missing closing )"},
		{settings.ModifiedAfter.Env, "yesterday", "is not a time such as 2024-01-31T12:00:00Z (RFC 3339) or a date"},
		{settings.MinObjectSize.Env, "1 MB", "is not a size such as 1MiB"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			kv := []string{tc.name, tc.value}
			if tc.name != settings.TargetQueueURL.Env {
				kv = append(kv, settings.TargetQueueURL.Env, "https://sqs.eu-west-1.amazonaws.com/111122223333/q")
			}
			_, err := loadConfig(env(kv...))
			if err == nil || !strings.Contains(err.Error(), tc.name+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadConfig: %v; want an error naming %s that says %q", err, tc.name, tc.want)
			}
		})
	}
	t.Run("errors name the variable", func(t *testing.T) {
		_, err := loadConfig(env(settings.TargetQueueURL.Env, "u", settings.TargetQueueName.Env, "n", settings.Format.Env, "xml", settings.Mode.Env, "fast",
			settings.ChunkSize.Env, "big", settings.MaxInFlight.Env, "0", settings.FailOnError.Env, "maybe", settings.DeadlineMargin.Env, "-1s",
			settings.FailureQueueURL.Env, "q", settings.FailureS3URI.Env, "nope"))
		if err == nil {
			t.Fatal("no error")
		}
		for _, name := range []string{settings.TargetQueueName.Env, settings.Format.Env, settings.Mode.Env, settings.ChunkSize.Env, settings.MaxInFlight.Env, settings.FailOnError.Env, settings.DeadlineMargin.Env, settings.FailureS3URI.Env} {
			if !strings.Contains(err.Error(), name+":") {
				t.Errorf("error does not name %s:\n%v", name, err)
			}
		}
	})
}

// TestConfigTable checks that the rows of docs/configuration.md for fanout
// (function fanout or both) are exactly the variables loadConfig reads.
func TestConfigTable(t *testing.T) {
	load := func(getenv func(string) string) error { _, err := loadConfig(getenv); return err }
	base := map[string]string{settings.TargetQueueURL.Env: "https://sqs.eu-west-1.amazonaws.com/111122223333/q"}
	for _, err := range doccheck.CheckFunction(doccheck.Fanout, load, base, "../../docs/configuration.md") {
		t.Error(err)
	}
}
