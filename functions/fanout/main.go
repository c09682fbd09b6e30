// Command fanout is the fanout Lambda function: it splits S3 datasets into
// chunks and sends their records to SQS in parallel batches. See README.md
// for its configuration.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/fanout"
)

func main() {
	log := lambdacontext.NewLogger()
	slog.SetDefault(log)
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		log.Error("bad config", "err", err)
		os.Exit(1)
	}
	ctx := context.Background()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("aws config", "err", err)
		os.Exit(1)
	}
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.s3PathStyle
		// Objects uploaded without a checksum are normal; do not log each.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	cfg.runner.Logger = log
	runner, err := fanout.New(ctx, s3c, sqs.NewFromConfig(awsCfg), cfg.runner)
	if err != nil {
		var qe *fanout.QueueError
		if errors.As(err, &qe) {
			err = lambdaenv.QueueError(queueVariable(qe.Role, cfg), qe.Queue, qe.Err)
		}
		log.Error("bad config", "err", err)
		os.Exit(1)
	}
	h := &handler{runner: runner, failOnError: cfg.failOnError, log: log, metrics: os.Stdout, now: time.Now}
	lambda.Start(h.Handle)
}
