// Command fanout is the fanout Lambda function: it splits S3 datasets into
// chunks and sends their records to SQS in parallel batches. Its logic is
// package fanouthandler's, over the engine (package engine); README.md has its
// configuration.
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

func main() {
	cfg, err := loadConfig(os.Getenv)
	fn := lambdaenv.Function{Runner: cfg.runner, S3PathStyle: cfg.s3PathStyle, ClaimsTable: cfg.claimsTable, ClaimsTTL: cfg.claimsTTL, RunState: true, Name: "fanout", Tracing: cfg.tracing, QueueVariable: cfg.queueVariable}
	lambdaenv.Start(fn, err, func(r *engine.Runner, s3c *s3.Client, log *slog.Logger) func(context.Context, json.RawMessage) (any, error) {
		cfg.handler.Logger, cfg.handler.Out = log, os.Stdout
		// Lambda's own variable, as the runtime's memory limit reads it.
		cfg.handler.MemoryMB = lambdaenv.MemoryMB(os.Getenv)
		cfg.handler.Reconcile.S3, cfg.handler.Reconcile.Region = s3c, s3c.Options().Region
		return fanouthandler.New(r, s3c, cfg.handler).Invoke
	})
}
