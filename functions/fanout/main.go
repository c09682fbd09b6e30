// Command fanout is the fanout Lambda function: it splits S3 datasets into
// chunks and sends their records to SQS in parallel batches. Its logic is
// package fanouthandler's, over the engine (package engine); README.md has its
// configuration.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
)

func main() {
	cfg, err := loadConfig(os.Getenv)
	fn := lambdaenv.Function{Runner: cfg.runner, S3PathStyle: cfg.s3PathStyle, ClaimsTable: cfg.claimsTable, ClaimsTTL: cfg.claimsTTL, RunState: true, Name: "fanout", Tracing: cfg.tracing, QueueVariable: cfg.queueVariable}
	lambdaenv.Start(fn, err, func(p lambdaenv.Parts) func(context.Context, json.RawMessage) (any, error) {
		cfg.handler.Logger, cfg.handler.Out = p.Logger, os.Stdout
		// Lambda's own variable, as the runtime's memory limit reads it.
		cfg.handler.MemoryMB = lambdaenv.MemoryMB(os.Getenv)
		rec := &cfg.handler.Reconcile
		rec.S3, rec.SQS, rec.Region = p.S3, p.SQS, p.S3.Options().Region
		if p.Claims != nil {
			rec.Ingested = p.Claims
		}
		return fanouthandler.New(p.Runner, p.S3, cfg.handler).Invoke
	})
}
