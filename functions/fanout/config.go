package main

import (
	"time"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	s "github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// config is fanout's configuration, read once at init. The variables and
// their checks are pkg/settings' rows; docs/configuration.md has the
// table, which TestConfigTable holds to what loadConfig reads.
type config struct {
	runner      engine.Options
	handler     fanouthandler.Options
	s3PathStyle bool
	claimsTable string
	claimsTTL   time.Duration
	tracing     tracing.Mode
}

// loadConfig reads the configuration with getenv and reports every
// problem at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	var c config
	env := lambdaenv.New(getenv)
	o := &c.runner
	o.Target = sqsbatch.Queue{
		URL:            lambdaenv.Get(env, s.TargetQueueURL),
		Name:           lambdaenv.Get(env, s.TargetQueueName),
		OwnerAccountID: lambdaenv.Get(env, s.TargetQueueOwner),
		MaxMessageSize: int(lambdaenv.Get(env, s.TargetMaxMessageSize)),
	}
	env.OneOf(s.TargetQueueURL.Row, s.TargetQueueName.Row)
	if o.Target.OwnerAccountID != "" && o.Target.Name == "" {
		env.Bad(s.TargetQueueOwner.Env, "needs %s", s.TargetQueueName.Env)
	}
	o.WorkQueueURL = lambdaenv.Get(env, s.WorkQueueURL)
	o.FailureQueueURL = lambdaenv.Get(env, s.FailureQueueURL)
	o.FailureS3URI = lambdaenv.Get(env, s.FailureS3URI)
	env.OneOf(s.FailureQueueURL.Row, s.FailureS3URI.Row)
	o.ReportS3URI = lambdaenv.Get(env, s.ReportS3URI)
	o.Plan.Format = dataset.Format(lambdaenv.Get(env, s.Format))
	o.Mode = worktask.Mode(lambdaenv.Get(env, s.Mode))
	o.Notification.Format = s3event.Format(lambdaenv.Get(env, s.NotificationFormat))
	o.Plan.ChunkSize = lambdaenv.Get(env, s.ChunkSize)
	env.Formats(&o.Plan)
	o.Send.MaxInFlight = env.Int(s.MaxInFlight)
	o.Send.FixedInFlight = env.Bool(s.FixedInFlight)
	o.Send.MaxAttempts = env.Int(s.MaxAttempts)
	o.Mapping = worktask.Mapping{
		BodyField:        lambdaenv.Get(env, s.BodyField),
		AttributesField:  lambdaenv.Get(env, s.AttributesField),
		GroupIDField:     lambdaenv.Get(env, s.GroupIDField),
		DedupIDField:     lambdaenv.Get(env, s.DedupIDField),
		GroupIDPartition: lambdaenv.Get(env, s.GroupIDPartition),
	}
	o.Control.MaxRate = lambdaenv.Get(env, s.MaxRate)
	o.Control.TargetMaxBacklog = lambdaenv.Get(env, s.TargetMaxBacklog)
	o.Control.MaxFailures, o.Control.MaxFailedObjects = limit(env, s.MaxFailures), limit(env, s.MaxFailedObjects)
	o.Planning.Filters = filters(env)
	o.Planning.InlineMaxBytes = lambdaenv.Get(env, s.InlineMaxBytes)
	o.ChunkConcurrency = env.Int(s.ChunkConcurrency)
	h := &c.handler
	h.Filter = env.Filter(false)
	h.DeadlineMargin = lambdaenv.Get(env, s.DeadlineMargin)
	h.FailOnError = env.Bool(s.FailOnError)
	h.SkipGroupOnError = env.Bool(s.SkipGroupOnError)
	h.Concurrency = o.ChunkConcurrency
	c.s3PathStyle = env.Bool(s.S3PathStyle)
	c.claimsTable = lambdaenv.Get(env, s.ClaimsTable)
	c.claimsTTL = lambdaenv.Get(env, s.ClaimsTTL)
	h.Reconcile.QueueURL = lambdaenv.Get(env, s.ReconcileQueueURL)
	h.Reconcile.MaxAge = c.claimsTTL
	env.Offload(&c.runner)
	c.tracing = env.Tracing()
	return c, env.Err()
}

// queueVariable returns the variable that names the runner's queue of role.
func (c config) queueVariable(role string) string {
	switch role {
	case engine.RoleWork:
		return s.WorkQueueURL.Env
	case engine.RoleFailure:
		return s.FailureQueueURL.Env
	}
	if c.runner.Target.Name != "" {
		return s.TargetQueueName.Env
	}
	return s.TargetQueueURL.Env
}

// limit reads the variable of a failure budget's row, checked, as the
// Limit a request would give.
func limit(env *lambdaenv.Reader, row s.Limit) worktask.Limit {
	lambdaenv.Get(env, row)
	return worktask.LimitOf(env.String(row.Env))
}

// filters reads the object filters of requests that give none of their
// own, checked as a request's are, each error naming its variables.
func filters(env *lambdaenv.Reader) dataset.Filters {
	f := dataset.Filters{
		ModifiedAfter:  lambdaenv.Get(env, s.ModifiedAfter),
		ModifiedBefore: lambdaenv.Get(env, s.ModifiedBefore),
		MinSize:        lambdaenv.Get(env, s.MinObjectSize),
		MaxSize:        lambdaenv.Get(env, s.MaxObjectSize),
		StorageClasses: lambdaenv.Get(env, s.StorageClasses),
		KeyRegex:       lambdaenv.Get(env, s.KeyRegex),
	}
	for names, part := range map[string]dataset.Filters{
		s.StorageClasses.Env: {StorageClasses: f.StorageClasses},
		s.MinObjectSize.Env + " and " + s.MaxObjectSize.Env:  {MinSize: f.MinSize, MaxSize: f.MaxSize},
		s.ModifiedAfter.Env + " and " + s.ModifiedBefore.Env: {ModifiedAfter: f.ModifiedAfter, ModifiedBefore: f.ModifiedBefore},
	} {
		if err := part.Validate(); err != nil {
			env.Bad(names, "%v", err)
		}
	}
	return f
}
