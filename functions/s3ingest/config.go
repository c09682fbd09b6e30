package main

import (
	"fmt"
	"strings"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
)

// Environment variables s3ingest reads. docs/configuration.md has the table
// with the defaults; TestConfigTable checks that it lists exactly these.
// The notification filter's variables are lambdaenv's.
const (
	envOutputQueueURL      = "OUTPUT_QUEUE_URL"
	envFailureQueueURL     = "FAILURE_QUEUE_URL"
	envFailureS3URI        = "FAILURE_S3_URI"
	envFormat              = "FORMAT"
	envPartitionColumns    = "PARTITION_COLUMNS"
	envFileMetadata        = "FILE_METADATA"
	envSkipGroupOnError    = "SKIP_GROUP_ON_ERROR"
	envOnBadRecord         = "ON_BAD_RECORD"
	envFailOnError         = "FAIL_ON_ERROR"
	envMaxInFlight         = "MAX_IN_FLIGHT"
	envMaxAttempts         = "MAX_ATTEMPTS"
	envReplaceInvalidChars = "REPLACE_INVALID_CHARACTERS"
	envReadConcurrency     = "READ_CONCURRENCY"
	envHandoffBytes        = "HANDOFF_BYTES"
	envFanoutWorkQueueURL  = "FANOUT_WORK_QUEUE_URL"
	envChunkSize           = "CHUNK_SIZE"
	envCSVNoQuotedNewlines = "CSV_NO_QUOTED_NEWLINES"
	envDeadlineMargin      = "DEADLINE_MARGIN"
	envClaimsTable         = lambdaenv.ClaimsTable
	envTracing             = lambdaenv.Tracing
	envS3PathStyle         = lambdaenv.S3PathStyle
)

// config is s3ingest's configuration, read once at init: the runner that
// reads and sends (its target is the output queue), and the handler.
type config struct {
	runner      fanout.Options
	ingest      ingesthandler.Options
	s3PathStyle bool
	claimsTable string
	tracing     tracing.Mode
}

// loadConfig reads the configuration with getenv and reports every problem
// at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	env := lambdaenv.New(getenv)
	var c config
	o, in := &c.runner, &c.ingest
	o.Target.URL = env.QueueURL(envOutputQueueURL)
	if env.String(envOutputQueueURL) == "" {
		env.Bad(envOutputQueueURL, "is required: the URL of the queue the records are sent to")
	}
	o.FailureQueueURL = env.QueueURL(envFailureQueueURL)
	o.FailureS3URI = env.S3URI(envFailureS3URI)
	env.OneOf(envFailureQueueURL, envFailureS3URI)
	o.Plan.Format = lambdaenv.Parse(env, envFormat, dataset.ParseFormat)
	o.Plan.ChunkSize = lambdaenv.Parse(env, envChunkSize, fanout.ParseChunkSize)
	o.Plan.CSV.NoQuotedNewlines = env.Bool(envCSVNoQuotedNewlines, false)
	o.Send.MaxInFlight = env.Int(envMaxInFlight, fanout.ParseMaxInFlight)
	o.Send.MaxAttempts = env.Int(envMaxAttempts, fanout.ParseMaxAttempts)
	o.Send.ReplaceInvalidCharacters = env.Bool(envReplaceInvalidChars, false)
	in.ReadConcurrency = env.Int(envReadConcurrency, fanout.ParseChunkConcurrency)
	if in.ReadConcurrency == 0 {
		in.ReadConcurrency = ingesthandler.DefaultReadConcurrency
	}
	o.ChunkConcurrency = in.ReadConcurrency

	in.HandoffBytes = env.Size(envHandoffBytes)
	if in.HandoffBytes > 0 {
		if env.String(envFanoutWorkQueueURL) == "" {
			env.Bad(envHandoffBytes, "needs %s, the queue the chunk tasks go to", envFanoutWorkQueueURL)
		}
		o.WorkQueueURL = env.QueueURL(envFanoutWorkQueueURL)
	}

	in.Filter = env.Filter(true)
	in.FileMetadata = env.Bool(envFileMetadata, true)
	in.Partitions = recordjson.PartitionsString
	if env.String(envPartitionColumns) != "" {
		in.Partitions = lambdaenv.Parse(env, envPartitionColumns, ingesthandler.ParsePartitions)
	}
	in.FailBadRecords = lambdaenv.Parse(env, envOnBadRecord, func(v string) (bool, error) {
		switch strings.ToLower(v) {
		case "fail":
			return true, nil
		case "output", "skip":
			return false, nil
		}
		return false, fmt.Errorf("%q is not output or fail", v)
	})
	in.FailOnError = env.Bool(envFailOnError, false)
	in.SkipGroupOnError = env.Bool(envSkipGroupOnError, false)
	in.DeadlineMargin = env.Duration(envDeadlineMargin)
	c.s3PathStyle = env.Bool(envS3PathStyle, false)
	c.claimsTable = env.ClaimsTable(envClaimsTable)
	env.Offload(&c.runner)
	c.tracing = env.Tracing()
	return c, env.Err()
}

// queueVariable returns the variable that names the runner's queue of role.
func queueVariable(role string) string {
	switch role {
	case fanout.RoleWork:
		return envFanoutWorkQueueURL
	case fanout.RoleFailure:
		return envFailureQueueURL
	}
	return envOutputQueueURL
}
