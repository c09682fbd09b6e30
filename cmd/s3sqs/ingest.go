package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/internal/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/ingest"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
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
		in          = ingest.Options{FileMetadata: true}
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
	switch strings.ToLower(partitions) {
	case "true":
		in.Partitions = recordjson.PartitionsString
	case "typed":
		in.Partitions = recordjson.PartitionsTyped
	case "false":
		in.Partitions = recordjson.PartitionsOff
	default:
		checks = append(checks, check{"-partitions", fmt.Errorf("%q is not true, typed or false", partitions)})
	}
	for t := range strings.SplitSeq(eventTypes, ",") {
		if t = strings.TrimSpace(t); t != "" {
			checks = append(checks, check{"-event-types", s3event.CheckEventType(t)})
			in.Filter.EventTypes = append(in.Filter.EventTypes, t)
		}
	}
	if msg, ok := firstBad(checks); ok {
		return bad("%s", msg)
	}
	// A notification read from a file is as old as the file: no age limit.
	in.Filter.MaxFileAge = -1

	s3c, sqsc, err := lambdaenv.Clients(ctx, pathStyle)
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", err)
		return 1
	}
	var payload []byte
	if bucket != "" {
		obj, err := dataset.Head(ctx, s3c, bucket, key, versionID)
		if err != nil {
			fmt.Fprintf(stderr, "s3sqs ingest: %v\n", err)
			return 1
		}
		payload = notificationOf(obj)
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
			fmt.Fprintf(stderr, "s3sqs ingest: read: %v\n", err)
			return 1
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
	runner, err := fanout.New(ctx, s3c, sqsc, opts)
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", err)
		return 1
	}
	in.Logger = log
	resp, sum, err := ingest.New(runner, in).HandleSummary(ctx, ev)
	out, _ := json.MarshalIndent(resp, "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	fmt.Fprintf(stderr, "s3sqs ingest: %d messages (%d failed), %d objects, %d records read, %d sent, %d failed\n",
		sum.Messages, sum.FailedMessages, sum.Objects, sum.Records, sum.RecordsSent, sum.RecordsFailed)
	if failures != nil && failures.f != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: failed records are in %s\n", failures.path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", err)
		return 1
	}
	if len(resp.BatchItemFailures) > 0 || sum.RecordsFailed > 0 {
		return 1
	}
	return 0
}

// notificationOf writes the S3 event notification that S3 sends when obj
// is created, as an SQS message body.
func notificationOf(obj dataset.Object) []byte {
	type object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size"`
		ETag      string `json:"eTag,omitempty"`
		VersionID string `json:"versionId,omitempty"`
	}
	rec := map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
		"eventTime": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"s3": map[string]any{
			"bucket": map[string]string{"name": obj.Bucket},
			// Keys in notifications are form-URL-encoded.
			"object": object{Key: strings.ReplaceAll(url.QueryEscape(obj.Key), "%2F", "/"), Size: obj.Size, ETag: obj.ETag, VersionID: obj.VersionID},
		},
	}
	b, _ := json.Marshal(map[string]any{"Records": []any{rec}})
	return b
}
