package lambdaenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// Function is what a function's start-up needs from its configuration.
type Function struct {
	// Name is the function's kind, fanout or s3ingest, for its spans.
	Name string
	// Tracing says where spans go (TRACING).
	Tracing tracing.Mode
	// Runner configures the engine; its Logger is set here.
	Runner engine.Options
	// S3PathStyle turns on path-style S3 requests.
	S3PathStyle bool
	// ClaimsTable, when set, is the claims store's DynamoDB table.
	ClaimsTable string
	// ClaimsTTL is how long a claim is kept (CLAIMS_TTL); zero means
	// claims.DefaultTTL.
	ClaimsTTL time.Duration
	// RunState keeps the runs' shared state (engine.Options.Control.Runs) in the
	// claims table, when there is one: their control, rate budget,
	// counters and parked tasks.
	RunState bool
	// QueueVariable names the variable of the runner's queue of a role
	// (engine.RoleTarget, RoleWork, RoleFailure), for init errors.
	QueueVariable func(role string) string
}

// Parts are what Start builds for a function's handler.
type Parts struct {
	Runner *engine.Runner
	S3     *s3.Client
	SQS    *sqs.Client
	// Claims is the claims store of Function.ClaimsTable; nil without one.
	Claims *claims.Table
	Logger *slog.Logger
}

// Start is a function's whole init: it logs with the Lambda logger, builds
// the AWS clients, the claims store and the runner (resolving its queues
// once, so that a wrong URL or a missing permission fails here, named by
// its variable), and hands them to handler, whose result goes to
// lambda.Start. A configuration error (cfgErr, or one found here) is
// logged and ends the process before the runtime starts. Start does not
// return.
func Start(fn Function, cfgErr error, handler func(Parts) func(context.Context, json.RawMessage) (any, error)) {
	log := lambdacontext.NewLogger()
	slog.SetDefault(log)
	fail := func(err error) {
		log.Error("bad config", "err", err)
		os.Exit(1)
	}
	if cfgErr != nil {
		fail(cfgErr)
	}
	if limit, ok := MemoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
		log.Debug("Go soft memory limit set from the function's memory", "limitMiB", limit>>20)
	}
	if b := BytesInFlight(os.Getenv); b > 0 {
		fn.Runner.Send.MaxBytesInFlight = b
	}
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		fail(fmt.Errorf("AWS config: %w", err))
	}
	tr, err := tracing.Setup(ctx, fn.Tracing, fn.Name, os.Stdout)
	if err != nil {
		fail(fmt.Errorf("%s: %w", settings.Tracing.Env, err))
	}
	tr.AWS(&cfg)
	s3c, sqsc := awssetup.FromConfig(cfg, fn.S3PathStyle)
	parts := Parts{S3: s3c, SQS: sqsc, Logger: log}
	if parts.Runner, parts.Claims, err = newRunner(ctx, cfg, s3c, sqsc, fn, log); err != nil {
		fail(err)
	}
	lambda.Start(tr.Handler(fn.Name, handler(parts)))
}

// newRunner builds the runner and its claims store (see
// awssetup.NewRunner), and says what running without a claims table
// means.
func newRunner(ctx context.Context, cfg aws.Config, s3c *s3.Client, sqsc *sqs.Client, fn Function, log *slog.Logger) (*engine.Runner, *claims.Table, error) {
	if fn.ClaimsTable == "" {
		log.Info("no " + settings.ClaimsTable.Env + ": tasks and notifications run at least once, and one delivered twice sends its records twice")
		if fn.RunState && fn.Runner.Control.MaxRate > 0 && fn.Runner.WorkQueueURL != "" {
			log.Warn(settings.MaxRate.Env + " without " + settings.ClaimsTable.Env + " paces each invocation on its own: the rate of a queued run is this many messages per second per concurrent invocation, not for the whole run")
		}
		if fn.RunState && fn.Runner.WorkQueueURL != "" {
			log.Info("no " + settings.ClaimsTable.Env + ": a queued run has no failure budget (" + settings.MaxFailures.Env + "), since its invocations cannot share its counts; a run sent in one invocation has its own")
		}
	} else {
		log.Info("each task and notified object version runs once", "claimsTable", fn.ClaimsTable)
	}
	fn.Runner.Logger = log
	runner, store, err := awssetup.NewRunner(ctx, s3c, sqsc, awssetup.RunnerConfig{Options: fn.Runner, ClaimsTable: fn.ClaimsTable, ClaimsTTL: fn.ClaimsTTL,
		RunState: fn.RunState, DynamoDB: dynamodb.NewFromConfig(cfg), Name: awssetup.Variable})
	var qe *engine.QueueError
	if errors.As(err, &qe) && fn.QueueVariable != nil {
		err = awssetup.QueueError(fn.QueueVariable(qe.Role), qe.Queue, qe.Err)
	}
	return runner, store, err
}
