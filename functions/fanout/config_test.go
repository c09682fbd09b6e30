package main

import (
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
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
		c, err := loadConfig(env(envTargetQueueURL, "https://sqs.eu-west-1.amazonaws.com/111122223333/q"))
		if err != nil {
			t.Fatal(err)
		}
		if c.runner.Target.URL != "https://sqs.eu-west-1.amazonaws.com/111122223333/q" || c.runner.Mode != "" || c.runner.Plan.Format != dataset.FormatAuto || c.handler.FailOnError || c.handler.Filter.EventTypes != nil {
			t.Errorf("defaults: %+v", c)
		}
	})
	t.Run("everything", func(t *testing.T) {
		c, err := loadConfig(env(
			envTargetQueueName, "orders.fifo", envTargetQueueOwner, "111122223333", envTargetMaxMsgSize, "256KiB",
			envWorkQueueURL, "http://127.0.0.1:4566/000000000000/work", envFailureS3URI, "s3://f/failed/", envFormat, "csv", envMode, "chunk",
			envChunkSize, "16MiB", envMaxInFlight, "8", envMaxAttempts, "7", envBodyField, "payload",
			envAttributesField, "attrs", envGroupIDField, "tenant", envDedupIDField, "id", envFailOnError, "true",
			envInlineMaxBytes, "1GiB", envDeadlineMargin, "20s", envChunkConcurrency, "2", envCSVNoQuotedNewline, "true",
			lambdaenv.EventTypes, "ObjectCreated:Put", lambdaenv.KeyPrefix, "in/", lambdaenv.IgnoreDeletions, "false",
		))
		if err != nil {
			t.Fatal(err)
		}
		o := c.runner
		if o.Target.Name != "orders.fifo" || o.Target.OwnerAccountID != "111122223333" || o.Target.MaxMessageSize != 256<<10 ||
			o.WorkQueueURL != "http://127.0.0.1:4566/000000000000/work" || o.FailureS3URI != "s3://f/failed/" || o.Plan.Format != dataset.FormatCSV ||
			o.Mode != fanout.ModeChunk || o.Plan.ChunkSize != 16<<20 || o.Send.MaxInFlight != 8 || o.Send.MaxAttempts != 7 ||
			o.Mapping != (fanout.Mapping{BodyField: "payload", AttributesField: "attrs", GroupIDField: "tenant", DedupIDField: "id"}) ||
			!c.handler.FailOnError || o.InlineMaxBytes != 1<<30 || c.handler.DeadlineMargin != 20*time.Second || o.ChunkConcurrency != 2 ||
			!o.Plan.CSV.NoQuotedNewlines || len(c.handler.Filter.EventTypes) != 1 || c.handler.Filter.Prefix != "in/" ||
			c.handler.Filter.KeepDeletions || c.handler.Concurrency != 2 {
			t.Errorf("config: %+v", c)
		}
	})
	// Values a user may well write by mistake: each is refused with the
	// variable's name and words that say what is allowed.
	for _, tc := range []struct{ name, value, want string }{
		{envTargetMaxMsgSize, "256", "outside SQS's range of 1,024 to 1,048,576 bytes"},
		{envTargetMaxMsgSize, "2MiB", "outside SQS's range"},
		{envTargetQueueURL, "my-queue", "looks like a queue name"},
		{envTargetQueueURL, "arn:aws:sqs:us-east-1:111122223333:q", "that is an ARN"},
		{envWorkQueueURL, "sqs.us-east-1.amazonaws.com/1/q", "is not a queue URL"},
		{envChunkSize, "-1", "is not a chunk size from 1KiB to 1GiB"},
		{envChunkSize, "100", "100 bytes is not a chunk size from 1KiB to 1GiB"},
		{envMaxInFlight, "1e12", `"1e12" is not a whole number from 1 to 1000`},
		{envMaxAttempts, "101", "101 is not a whole number from 1 to 100"},
		{envMode, "bogus", `"bogus" is not record or chunk`},
		{lambdaenv.EventTypes, "ObjectCreate:*", `"ObjectCreate:*" is not an S3 event type`},
		{envReportS3URI, "bucket/prefix", "is not an s3://bucket/prefix URI"},
		{envClaimsTable, "arn:aws:dynamodb:us-east-1:111122223333:table/claims", "is not a DynamoDB table name"},
		{envTracing, "xray", `"xray" is not off, otlp or stdout`},
		{"OFFLOAD", "sometimes", `"sometimes" is not large or always`},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			kv := []string{tc.name, tc.value}
			if tc.name != envTargetQueueURL {
				kv = append(kv, envTargetQueueURL, "https://sqs.eu-west-1.amazonaws.com/111122223333/q")
			}
			_, err := loadConfig(env(kv...))
			if err == nil || !strings.Contains(err.Error(), tc.name+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadConfig: %v; want an error naming %s that says %q", err, tc.name, tc.want)
			}
		})
	}
	t.Run("errors name the variable", func(t *testing.T) {
		_, err := loadConfig(env(envTargetQueueURL, "u", envTargetQueueName, "n", envFormat, "xml", envMode, "fast",
			envChunkSize, "big", envMaxInFlight, "0", envFailOnError, "maybe", envDeadlineMargin, "-1s",
			envFailureQueueURL, "q", envFailureS3URI, "nope"))
		if err == nil {
			t.Fatal("no error")
		}
		for _, name := range []string{envTargetQueueName, envFormat, envMode, envChunkSize, envMaxInFlight, envFailOnError, envDeadlineMargin, envFailureS3URI} {
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
	base := map[string]string{envTargetQueueURL: "https://sqs.eu-west-1.amazonaws.com/111122223333/q"}
	for _, err := range doccheck.CheckFunction(doccheck.Fanout, load, base, "../../docs/configuration.md") {
		t.Error(err)
	}
}
