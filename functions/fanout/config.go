package main

import (
	"cmp"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Environment variables fanout reads. docs/configuration.md has the table;
// TestConfigTable checks that it lists exactly these.
const (
	envTargetQueueURL     = "TARGET_QUEUE_URL"
	envTargetQueueName    = "TARGET_QUEUE_NAME"
	envTargetQueueOwner   = "TARGET_QUEUE_OWNER_ACCOUNT_ID"
	envTargetMaxMsgSize   = "TARGET_MAX_MESSAGE_SIZE"
	envWorkQueueURL       = "WORK_QUEUE_URL"
	envFailureQueueURL    = "FAILURE_QUEUE_URL"
	envFailureS3URI       = "FAILURE_S3_URI"
	envReportS3URI        = "REPORT_S3_URI"
	envFormat             = "FORMAT"
	envMode               = "MODE"
	envChunkSize          = "CHUNK_SIZE"
	envMaxInFlight        = "MAX_IN_FLIGHT"
	envMaxAttempts        = "MAX_ATTEMPTS"
	envBodyField          = "BODY_FIELD"
	envAttributesField    = "ATTRIBUTES_FIELD"
	envGroupIDField       = "GROUP_ID_FIELD"
	envDedupIDField       = "DEDUP_ID_FIELD"
	envFailOnError        = "FAIL_ON_ERROR"
	envInlineMaxBytes     = "INLINE_MAX_BYTES"
	envDeadlineMargin     = "DEADLINE_MARGIN"
	envChunkConcurrency   = "CHUNK_CONCURRENCY"
	envCSVNoQuotedNewline = "CSV_NO_QUOTED_NEWLINES"
	envSkipGroupOnError   = "SKIP_GROUP_ON_ERROR"
	envClaimsTable        = lambdaenv.ClaimsTable
	envTracing            = lambdaenv.Tracing
	envS3PathStyle        = lambdaenv.S3PathStyle
)

// config is fanout's configuration, read once at init.
type config struct {
	runner      fanout.Options
	handler     fanouthandler.Options
	s3PathStyle bool
	claimsTable string
	tracing     tracing.Mode
}

// loadConfig reads the configuration with getenv and reports every
// problem at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	var c config
	env := lambdaenv.New(getenv)
	o := &c.runner
	o.Target = sqsbatch.Queue{
		URL:            env.QueueURL(envTargetQueueURL),
		Name:           env.String(envTargetQueueName),
		OwnerAccountID: env.String(envTargetQueueOwner),
		MaxMessageSize: int(lambdaenv.Parse(env, envTargetMaxMsgSize, fanout.ParseMessageSize)),
	}
	env.OneOf(envTargetQueueURL, envTargetQueueName)
	if o.Target.OwnerAccountID != "" && o.Target.Name == "" {
		env.Bad(envTargetQueueOwner, "needs %s", envTargetQueueName)
	}
	o.WorkQueueURL = env.QueueURL(envWorkQueueURL)
	o.FailureQueueURL = env.QueueURL(envFailureQueueURL)
	o.FailureS3URI = env.S3URI(envFailureS3URI)
	env.OneOf(envFailureQueueURL, envFailureS3URI)
	o.ReportS3URI = env.S3URI(envReportS3URI)
	o.Plan.Format = lambdaenv.Parse(env, envFormat, dataset.ParseFormat)
	o.Mode = lambdaenv.Parse(env, envMode, fanout.ParseMode)
	o.Plan.ChunkSize = lambdaenv.Parse(env, envChunkSize, fanout.ParseChunkSize)
	o.Plan.CSV.NoQuotedNewlines = env.Bool(envCSVNoQuotedNewline, false)
	o.Send.MaxInFlight = env.Int(envMaxInFlight, fanout.ParseMaxInFlight)
	o.Send.MaxAttempts = env.Int(envMaxAttempts, fanout.ParseMaxAttempts)
	o.Mapping = fanout.Mapping{
		BodyField:       env.String(envBodyField),
		AttributesField: env.String(envAttributesField),
		GroupIDField:    env.String(envGroupIDField),
		DedupIDField:    env.String(envDedupIDField),
	}
	o.InlineMaxBytes = env.Size(envInlineMaxBytes)
	o.ChunkConcurrency = env.Int(envChunkConcurrency, fanout.ParseChunkConcurrency)
	h := &c.handler
	h.Filter = env.Filter(false)
	h.DeadlineMargin = env.Duration(envDeadlineMargin)
	h.FailOnError = env.Bool(envFailOnError, false)
	h.SkipGroupOnError = env.Bool(envSkipGroupOnError, false)
	h.Concurrency = cmp.Or(o.ChunkConcurrency, fanout.DefaultChunkConcurrency)
	c.s3PathStyle = env.Bool(envS3PathStyle, false)
	c.claimsTable = env.ClaimsTable(envClaimsTable)
	env.Offload(&c.runner)
	c.tracing = env.Tracing()
	return c, env.Err()
}

// queueVariable returns the variable that names the runner's queue of role.
func (c config) queueVariable(role string) string {
	switch role {
	case fanout.RoleWork:
		return envWorkQueueURL
	case fanout.RoleFailure:
		return envFailureQueueURL
	}
	if c.runner.Target.Name != "" {
		return envTargetQueueName
	}
	return envTargetQueueURL
}
