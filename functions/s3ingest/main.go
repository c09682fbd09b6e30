// Command s3ingest is the s3ingest Lambda function. It consumes S3 event
// notifications from an SQS queue (S3→SNS→SQS wrapped or raw, S3→SQS,
// EventBridge→SQS), reads exactly the notified version of each new object,
// and sends its records, with the Hive partition values of the key and a
// _file object, to OUTPUT_QUEUE_URL. It answers with a partial batch
// response, so that only the messages that failed come back. See README.md
// for its configuration.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
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
	// The SDK reads no setting for path-style addressing, which stand-ins
	// such as moto need; S3_FORCE_PATH_STYLE turns it on.
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.s3PathStyle
		// Ranged GETs come back without a whole-object checksum; the SDK
		// would log that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	sqsc := sqs.NewFromConfig(awsCfg)
	cfg.send.Logger = log
	// The queues are resolved once, at init, so that a wrong URL or a
	// missing permission fails here with the variable's name.
	output, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: cfg.outputQueueURL}, cfg.send)
	if err != nil {
		log.Error("bad config", "err", lambdaenv.QueueError(envOutputQueueURL, cfg.outputQueueURL, err))
		os.Exit(1)
	}
	var handoff *sqsbatch.Sender
	if cfg.handoffBytes > 0 {
		if handoff, err = sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: cfg.fanoutWorkQueueURL}, cfg.send); err != nil {
			log.Error("bad config", "err", lambdaenv.QueueError(envFanoutWorkQueueURL, cfg.fanoutWorkQueueURL, err))
			os.Exit(1)
		}
	}
	lambda.Start(newHandler(cfg, s3c, output, handoff, log, os.Stdout).Invoke)
}
