package main

import (
	"time"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	s "github.com/s3sqs/s3sqs/pkg/settings"
)

// config is s3ingest's configuration, read once at init: the runner that
// reads and sends (its target is the output queue), and the handler. The
// variables and their checks are pkg/settings' rows;
// docs/configuration.md has the table with the defaults, which
// TestConfigTable holds to what loadConfig reads.
type config struct {
	runner      engine.Options
	ingest      ingesthandler.Options
	s3PathStyle bool
	claimsTable string
	claimsTTL   time.Duration
	tracing     tracing.Mode
}

// loadConfig reads the configuration with getenv and reports every problem
// at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	env := lambdaenv.New(getenv)
	var c config
	o, in := &c.runner, &c.ingest
	o.Target.URL = lambdaenv.Get(env, s.OutputQueueURL)
	if env.String(s.OutputQueueURL.Env) == "" {
		env.Bad(s.OutputQueueURL.Env, "is required: the URL of the queue the records are sent to")
	}
	o.FailureQueueURL = lambdaenv.Get(env, s.FailureQueueURL)
	o.FailureS3URI = lambdaenv.Get(env, s.FailureS3URI)
	env.OneOf(s.FailureQueueURL.Row, s.FailureS3URI.Row)
	o.Plan.Format = dataset.Format(lambdaenv.Get(env, s.Format))
	o.Plan.ChunkSize = lambdaenv.Get(env, s.ChunkSize)
	env.Formats(&o.Plan)
	o.Send.MaxInFlight = env.Int(s.MaxInFlight)
	o.Send.FixedInFlight = env.Bool(s.FixedInFlight)
	o.Send.MaxAttempts = env.Int(s.MaxAttempts)
	o.Send.ReplaceInvalidCharacters = env.Bool(s.ReplaceInvalidCharacters)
	in.ReadConcurrency = env.Int(s.ReadConcurrency)
	o.ChunkConcurrency = in.ReadConcurrency

	in.HandoffBytes = lambdaenv.Get(env, s.HandoffBytes)
	if in.HandoffBytes > 0 {
		if env.String(s.FanoutWorkQueueURL.Env) == "" {
			env.Bad(s.HandoffBytes.Env, "needs %s, the queue the chunk tasks go to", s.FanoutWorkQueueURL.Env)
		}
		o.WorkQueueURL = lambdaenv.Get(env, s.FanoutWorkQueueURL)
	}

	in.Filter = env.Filter(true)
	in.FileMetadata = env.Bool(s.FileMetadata)
	in.GroupIDPartition = lambdaenv.Get(env, s.GroupIDPartition)
	in.Partitions = recordjson.PartitionMode(lambdaenv.Get(env, s.PartitionColumns))
	in.FailBadRecords = lambdaenv.Get(env, s.OnBadRecord) == "fail"
	in.FailOnError = env.Bool(s.FailOnError)
	in.SkipGroupOnError = env.Bool(s.SkipGroupOnError)
	in.DeadlineMargin = lambdaenv.Get(env, s.DeadlineMargin)
	c.s3PathStyle = env.Bool(s.S3PathStyle)
	c.claimsTable = lambdaenv.Get(env, s.ClaimsTable)
	c.claimsTTL = lambdaenv.Get(env, s.ClaimsTTL)
	env.Offload(&c.runner)
	c.tracing = env.Tracing()
	return c, env.Err()
}

// queueVariable returns the variable that names the runner's queue of role.
func queueVariable(role string) string {
	switch role {
	case engine.RoleWork:
		return s.FanoutWorkQueueURL.Env
	case engine.RoleFailure:
		return s.FailureQueueURL.Env
	}
	return s.OutputQueueURL.Env
}
