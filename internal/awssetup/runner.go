package awssetup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// RunnerConfig is what NewRunner builds a Runner from: the engine's
// options as a function's variables or a command's flags give them, and
// the claims table.
type RunnerConfig struct {
	// Options are the engine's. NewRunner sets Claims and Runs from the
	// claims table, and Notification.Region, when empty, to the S3
	// client's.
	Options engine.Options
	// ClaimsTable, when set, is the DynamoDB table of the claims store.
	ClaimsTable string
	// ClaimsTTL is how long a claim is kept; zero means claims.DefaultTTL.
	ClaimsTTL time.Duration
	// RunState keeps the runs' shared state (engine.Options.Control.Runs) in the
	// claims table too: their control, rate budget, counters and parked
	// tasks.
	RunState bool
	// DynamoDB reads the claims table; nil means a client from the SDK's
	// standard configuration.
	DynamoDB *dynamodb.Client
	// Name is how the caller's user names a setting, for errors: a
	// function's variable or a command's flag.
	Name func(settings.Row) string
}

// S3API is the part of the S3 client NewRunner uses: the engine's,
// HeadBucket for its check of the outputs' buckets, and Options for the
// region. An *s3.Client is one; a test may wrap one to inject faults.
type S3API interface {
	engine.S3API
	HeadBucketAPI
	Options() s3.Options
}

// NewRunner is the one way the functions, the commands and the tests'
// stacks build a Runner.
// Before a record is read, it asks S3 for the buckets of the failure
// output, the run report and the offload, and reads the claims table once,
// so that a mistyped name fails here, named by its setting, rather than
// when the first record needs it. It returns the claims store too (nil
// without a table), for what else reads the table, such as s3ingest's
// ingested markers. A queue that cannot be used is an *engine.QueueError,
// which the caller words with its own setting (QueueError, FlagQueueError).
func NewRunner(ctx context.Context, s3c S3API, sqsc sqsbatch.API, rc RunnerConfig) (*engine.Runner, *claims.Table, error) {
	o := rc.Options
	if err := CheckBuckets(ctx, s3c, S3Output{Setting: rc.Name(settings.FailureS3URI.Row), URI: o.FailureS3URI},
		S3Output{Setting: rc.Name(settings.ReportS3URI.Row), URI: o.ReportS3URI},
		S3Output{Setting: rc.Name(settings.OffloadS3URI.Row), URI: o.Offload.S3URI}); err != nil {
		return nil, nil, err
	}
	var store *claims.Table
	if rc.ClaimsTable != "" {
		ddb := rc.DynamoDB
		if ddb == nil {
			var err error
			if ddb, err = DynamoDB(ctx); err != nil {
				return nil, nil, err
			}
		}
		store = claims.NewTable(ddb, rc.ClaimsTable, claims.TableOptions{TTL: rc.ClaimsTTL})
		if err := store.Check(ctx); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", rc.Name(settings.ClaimsTable.Row), err)
		}
		o.Claims = store
		if rc.RunState {
			o.Control.Runs = runstate.NewTable(ddb, rc.ClaimsTable, runstate.TableOptions{})
		}
	}
	// Notification mode names the region the runner runs in, its
	// buckets'.
	o.Notification.Region = cmp.Or(o.Notification.Region, s3c.Options().Region)
	runner, err := engine.New(ctx, s3c, sqsc, o)
	if err != nil {
		return nil, nil, err
	}
	return runner, store, nil
}

// Variable names a setting by its environment variable, as a function's
// errors do.
func Variable(r settings.Row) string { return r.Env }

// Flag names a setting by its flag, with its dash, as a command's errors
// do.
func Flag(r settings.Row) string { return "-" + r.Flag }
