// Command s3ingest is the s3ingest Lambda function. It consumes S3 event
// notifications from an SQS queue (S3→SNS→SQS wrapped or raw, S3→SQS,
// EventBridge→SQS), reads exactly the notified version of each new object,
// and sends its records, with the Hive partition values of the key and a
// _file object, to OUTPUT_QUEUE_URL. Its logic is package ingest's;
// README.md has its configuration.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
)

func main() {
	cfg, err := loadConfig(os.Getenv)
	fn := lambdaenv.Function{Runner: cfg.runner, S3PathStyle: cfg.s3PathStyle, ClaimsTable: cfg.claimsTable, ClaimsTTL: cfg.claimsTTL, Name: "s3ingest", Tracing: cfg.tracing, QueueVariable: queueVariable}
	lambdaenv.Start(fn, err, func(p lambdaenv.Parts) func(context.Context, json.RawMessage) (any, error) {
		cfg.ingest.Logger, cfg.ingest.Out = p.Logger, os.Stdout
		h := ingesthandler.New(p.Runner, cfg.ingest)
		return func(ctx context.Context, payload json.RawMessage) (any, error) { return h.Invoke(ctx, payload) }
	})
}
