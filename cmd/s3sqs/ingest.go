package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

// runIngest runs s3ingest's logic in this process, on a notification read
// from a file or stdin, or on one object named by -bucket and -key.
func runIngest(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("ingest", "usage: s3sqs ingest [flags] [FILE]\n\n"+
		"Runs the s3ingest function's logic in this process: reads FILE (or stdin), an\n"+
		"SQS message body holding an S3 notification or a whole Lambda SQS event, or the\n"+
		"object named by -bucket and -key, and sends the records of the objects it names\n"+
		"to -output-queue-url. Prints the partial batch response as JSON and the\n"+
		"invocation's summary; exits 1 when a message or a record failed.", stderr)
	var (
		opts        fanout.Options
		in          = ingesthandler.Options{FileMetadata: true}
		bucket, key string
		versionID   string
		format      string
		partitions  string
		eventTypes  string
		failureFile string
		pathStyle   bool
	)
	fs.StringVar(&opts.Target.URL, "output-queue-url", "", "the `URL` of the queue the records are sent to (required)")
	fs.StringVar(&bucket, "bucket", "", "ingest the object in `bucket` named by -key, instead of a notification")
	fs.StringVar(&key, "key", "", "the object `key`, with -bucket")
	fs.StringVar(&versionID, "version-id", "", "the object's `version` (default: the latest)")
	fs.StringVar(&opts.FailureQueueURL, "failure-queue-url", "", "send refused records to this queue `URL`")
	fs.StringVar(&opts.FailureS3URI, "failure-s3-uri", "", "write refused records under `s3://bucket/prefix`")
	fs.StringVar(&failureFile, "failure-file", "", "write refused records as JSON Lines to `path` (default: with no other failure output, s3sqs-ingest-failures.jsonl)")
	fs.StringVar(&format, "format", "auto", "`format`: auto, jsonl, csv, text or parquet")
	fs.StringVar(&partitions, "partitions", "true", "add the key's partition values: true, typed or false")
	fs.BoolVar(&in.FileMetadata, "file-metadata", true, "add the _file object")
	fs.StringVar(&eventTypes, "event-types", "", "comma-separated S3 event `types` to take (default ObjectCreated:*)")
	fs.StringVar(&in.Filter.Prefix, "key-prefix", "", "take only keys with this `prefix`")
	fs.StringVar(&in.Filter.Suffix, "key-suffix", "", "take only keys with this `suffix`")
	fs.BoolVar(&in.FailBadRecords, "fail-bad-records", false, "report a notification failed when a record cannot be read (ON_BAD_RECORD=fail)")
	fs.BoolVar(&pathStyle, "s3-path-style", false, "path-style S3 addressing, for S3 stand-ins")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	bad := usageError("ingest", stderr)
	switch {
	case opts.Target.URL == "":
		return bad("name the output queue: -output-queue-url")
	case (bucket == "") != (key == ""):
		return bad("-bucket and -key go together")
	case bucket != "" && fs.NArg() > 0:
		return bad("give -bucket and -key, or FILE, not both")
	case fs.NArg() > 1:
		return bad("want at most one FILE, got %d", fs.NArg())
	}
	checks := []check{
		{"-output-queue-url", fanout.CheckQueueURL(opts.Target.URL)},
		{"-format", func() (err error) { opts.Plan.Format, err = dataset.ParseFormat(format); return }()},
	}
	var err error
	if in.Partitions, err = ingesthandler.ParsePartitions(partitions); err != nil {
		checks = append(checks, check{"-partitions", err})
	}
	var typeErrs []error
	if in.Filter.EventTypes, typeErrs = lambdaenv.ParseEventTypes(eventTypes); len(typeErrs) > 0 {
		checks = append(checks, check{"-event-types", typeErrs[0]})
	}
	if msg, ok := firstBad(checks); ok {
		return bad("%s", msg)
	}
	// The run has started: from here on, stdout gets a partial batch
	// response, empty when the run fails before it reads anything.
	flags := map[string]string{fanout.RoleTarget: "-output-queue-url", fanout.RoleFailure: "-failure-queue-url"}
	failed := func(err error) int {
		printJSON(stdout, events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}})
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", queueFlagError(err, flags, ""))
		return 1
	}
	s3c, sqsc, err := lambdaenv.Clients(ctx, pathStyle)
	if err != nil {
		return failed(err)
	}
	var payload []byte
	if bucket != "" {
		obj, err := dataset.Head(ctx, s3c, bucket, key, versionID)
		if err != nil {
			return failed(err)
		}
		payload = ingesthandler.CreatedNotification(obj, time.Now())
	} else {
		src := stdin
		if fs.NArg() == 1 {
			f, err := os.Open(fs.Arg(0))
			if err != nil {
				return bad("%v", err)
			}
			defer f.Close()
			src = f
		}
		if payload, err = io.ReadAll(src); err != nil {
			return failed(fmt.Errorf("read: %w", err))
		}
	}
	ev, err := partialbatch.Decode(payload)
	if err != nil {
		// Not a Lambda SQS event: one message body.
		ev = events.SQSEvent{Records: []events.SQSMessage{{MessageId: "cli-1", EventSource: "aws:sqs", Body: string(payload)}}}
	}

	if failureFile == "" && opts.FailureQueueURL == "" && opts.FailureS3URI == "" {
		failureFile = "s3sqs-ingest-failures.jsonl"
	}
	var failures *lazyFile
	if failureFile != "" {
		failures = &lazyFile{path: failureFile}
		defer failures.Close()
		opts.FailureWriter = failures
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Logger = log
	opts.IngestEncoder = ingesthandler.EncodeRecords
	runner, err := fanout.New(ctx, s3c, sqsc, opts)
	if err != nil {
		return failed(err)
	}
	in.Logger = log
	resp, sum, err := ingesthandler.New(runner, in).HandleSummary(ctx, ev)
	printJSON(stdout, resp)
	fmt.Fprintf(stderr, "s3sqs ingest: %d messages (%d failed), %d objects, %d records read, %d sent, %d failed\n",
		sum.Messages, sum.FailedMessages, sum.Objects, sum.Records, sum.RecordsSent, sum.RecordsFailed)
	if failures != nil && failures.f != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: failed records are in %s\n", failures.path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", queueFlagError(err, flags, ""))
		return 1
	}
	if len(resp.BatchItemFailures) > 0 || sum.RecordsFailed > 0 {
		return 1
	}
	return 0
}
