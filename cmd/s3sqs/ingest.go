package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// ingestCmd is the command line of s3sqs ingest.
type ingestCmd struct {
	flags                  *cmdFlags
	opts                   engine.Options
	send                   engine.NotifiedOptions
	bucket, key, versionID string
	failureFile            string
	pathStyle              bool
}

// runIngest runs s3ingest's logic in this process, on a notification read
// from a file or stdin, or on one object named by -bucket and -key.
func runIngest(ctx context.Context, args []string, s streams) int {
	stdin, stdout, stderr := s.stdin, s.stdout, s.stderr
	c := newIngestCmd(stderr)
	bad := usageError("ingest", stderr)
	if code, ok := c.parse(args, bad); !ok {
		return code
	}
	stderr, _, done := c.flags.stderr(stderr, false)
	defer done()
	bad = usageError("ingest", stderr)
	// The run has started: from here on, stdout gets a partial batch
	// response, empty when the run fails before it reads anything.
	failed := func(err error) int {
		printJSON(stdout, events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}})
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", c.queueError(err))
		return 1
	}
	s3c, sqsc, err := awssetup.Clients(ctx, c.pathStyle)
	if err != nil {
		return failed(err)
	}
	ev, err := c.event(ctx, s3c, stdin)
	var open *os.PathError
	switch {
	case errors.As(err, &open) && open.Op == "open":
		return bad("%v", err)
	case err != nil:
		return failed(err)
	}
	failures := failureFile(c.failureFile, &c.opts)
	if failures != nil {
		defer failures.Close()
	}
	c.opts.Logger = c.flags.logger(stderr)
	c.opts.ChunkConcurrency = c.send.Concurrency // as s3ingest's config does
	runner, _, err := awssetup.NewRunner(ctx, s3c, sqsc, awssetup.RunnerConfig{Options: c.opts, Name: awssetup.Flag})
	if err != nil {
		return failed(err)
	}
	resp, tally, err := c.ingest(ctx, runner, ev)
	printJSON(stdout, resp)
	return c.finish(stderr, resp, tally, err, failures)
}

// ingestTally is what an ingest did, as its last line says.
type ingestTally struct {
	partialbatch.Result
	objects                   int
	read, sent, recordsFailed int64
}

// ingest sends the objects of ev's notifications as s3ingest does, and
// answers as it would (see engine.Runner.RunNotified): a message fails,
// with its reason logged, when it is not a notification, a record of it
// cannot be read or one of its objects was not delivered (on a FIFO queue,
// with the later messages of the batch).
func (c *ingestCmd) ingest(ctx context.Context, runner *engine.Runner, ev events.SQSEvent) (events.SQSEventResponse, ingestTally, error) {
	var t ingestTally
	resp, res, err := partialbatch.New(partialbatch.Options{}).Process(ctx, ev, func(ctx context.Context, msgs []events.SQSMessage) []error {
		in := make([]s3event.Message, len(msgs))
		for i, m := range msgs {
			in[i] = s3event.Message{ID: m.MessageId, Body: m.Body}
		}
		o := c.send
		if partialbatch.IsFIFO(msgs) {
			o.Concurrency = 1 // a FIFO message's objects, in order
		}
		errs := make([]error, len(msgs))
		for i, m := range runner.RunNotified(ctx, in, o).Messages {
			errs[i] = m.Err
			for _, r := range m.Objects {
				t.objects++
				if !r.HandedOff {
					t.read, t.sent, t.recordsFailed = t.read+r.RecordsRead, t.sent+r.RecordsSent, t.recordsFailed+r.RecordsFailed
				}
			}
		}
		return errs
	})
	for _, f := range res.Failures {
		c.opts.Logger.WarnContext(ctx, "message reported as failed", "messageId", f.MessageID, "reason", f.Reason, "err", f.Err)
	}
	t.Result = res
	return resp, t, err
}

// newIngestCmd defines ingest's flags.
func newIngestCmd(stderr io.Writer) *ingestCmd {
	c := &ingestCmd{flags: newCmdFlags("ingest", "usage: s3sqs ingest [flags] [FILE]\n\n"+
		"Runs the s3ingest function's logic in this process: reads FILE (or stdin), an\n"+
		"SQS message body holding an S3 notification or a whole Lambda SQS event, or the\n"+
		"object named by -bucket and -key, and sends the records of the objects it names\n"+
		"to -output-queue-url. Prints the partial batch response as JSON and the\n"+
		"invocation's summary; exits 1 when a message or a record failed.", stderr)}
	fs, o := c.flags, &c.opts
	enc := &worktask.IngestEncoding{}
	c.send.Ingest = enc
	fs.text(settings.OutputQueueURL, &o.Target.URL, "")
	fs.StringVar(&c.bucket, "bucket", "", "ingest the object in `bucket` named by -key, instead of a notification")
	fs.StringVar(&c.key, "key", "", "the object `key`, with -bucket")
	fs.StringVar(&c.versionID, "version-id", "", "the object's `version` (default: the latest)")
	fs.text(settings.FailureQueueURL, &o.FailureQueueURL, "")
	fs.text(settings.FailureS3URI, &o.FailureS3URI, "")
	fs.StringVar(&c.failureFile, "failure-file", "", "write refused records as JSON Lines to `path` (default: with no other failure output, s3sqs-ingest-failures.jsonl)")
	fs.logFlag()
	fs.choice(settings.Format, "", func(v string) { o.Plan.Format = dataset.Format(v) })
	fs.formatFlags(&o.Plan)
	fs.choice(settings.PartitionColumns, "", func(v string) { enc.Partitions = recordjson.PartitionMode(v) })
	fs.boolean(settings.FileMetadata, &enc.FileMetadata, "")
	fs.text(settings.GroupIDPartition, &enc.GroupIDPartition, "")
	var eventTypes string
	fs.StringVar(&eventTypes, settings.EventTypes.Flag, settings.EventTypes.Default, settings.EventTypes.Doc)
	fs.onCheck(settings.EventTypes.Flag, func() error {
		var errs []error
		if c.send.Filter.EventTypes, errs = awssetup.ParseEventTypes(eventTypes); len(errs) > 0 {
			return errs[0]
		}
		return nil
	})
	fs.text(settings.KeyPrefix, &c.send.Filter.Prefix, "")
	fs.text(settings.KeySuffix, &c.send.Filter.Suffix, "")
	fs.count(settings.MaxInFlight, &o.Send.MaxInFlight, "")
	fs.boolean(settings.FixedInFlight, &o.Send.FixedInFlight, "")
	fs.count(settings.ReadConcurrency, &c.send.Concurrency, "")
	fs.BoolVar(&c.send.FailBadRecords, "fail-bad-records", false, "report a notification failed when a record cannot be read (ON_BAD_RECORD=fail)")
	fs.boolean(settings.S3PathStyle, &c.pathStyle, "")
	return c
}

// parse reads the command line and checks it; it returns the exit code
// when the command cannot go on.
func (c *ingestCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	fs := c.flags
	if code, ok := parseFlags(fs.FlagSet, args); !ok {
		return code, false
	}
	switch {
	case c.opts.Target.URL == "":
		return bad("name the output queue: -output-queue-url"), false
	case (c.bucket == "") != (c.key == ""):
		return bad("-bucket and -key go together"), false
	case c.bucket != "" && fs.NArg() > 0:
		return bad("give -bucket and -key, or FILE, not both"), false
	case fs.NArg() > 1:
		return bad("want at most one FILE, got %d", fs.NArg()), false
	}
	if msg, ok := fs.firstBad(); ok {
		return bad("%s", msg), false
	}
	if c.failureFile == "" && c.opts.FailureQueueURL == "" && c.opts.FailureS3URI == "" {
		c.failureFile = "s3sqs-ingest-failures.jsonl"
	}
	return 0, true
}

// queueError names the flag of a queue that cannot be used.
func (c *ingestCmd) queueError(err error) error {
	return queueFlagError(err, map[string]string{engine.RoleTarget: "-output-queue-url", engine.RoleFailure: "-failure-queue-url"}, "")
}

// event returns the Lambda SQS event to handle: the notification S3 would
// send for -bucket and -key, or FILE (or stdin), a whole event or one
// message body. A FILE that cannot be opened is an *os.PathError.
func (c *ingestCmd) event(ctx context.Context, s3c *s3.Client, stdin io.Reader) (events.SQSEvent, error) {
	var payload []byte
	if c.bucket != "" {
		obj, err := dataset.Head(ctx, s3c, c.bucket, c.key, c.versionID)
		if err != nil {
			return events.SQSEvent{}, err
		}
		if payload, err = (s3event.Encoder{}).Encode(obj.Created(time.Now())); err != nil {
			return events.SQSEvent{}, err
		}
	} else {
		src := stdin
		if c.flags.NArg() == 1 {
			f, err := os.Open(c.flags.Arg(0))
			if err != nil {
				return events.SQSEvent{}, err
			}
			defer f.Close()
			src = f
		}
		var err error
		if payload, err = io.ReadAll(src); err != nil {
			return events.SQSEvent{}, fmt.Errorf("read: %w", err)
		}
	}
	ev, err := partialbatch.Decode(payload)
	if err != nil {
		// Not a Lambda SQS event: one message body.
		ev = events.SQSEvent{Records: []events.SQSMessage{{MessageId: "cli-1", EventSource: "aws:sqs", Body: string(payload)}}}
	}
	return ev, nil
}

// failureFile returns the local failure file at path, when there is one,
// and makes it o's failure output.
func failureFile(path string, o *engine.Options) *lazyFile {
	if path == "" {
		return nil
	}
	f := &lazyFile{path: path}
	o.FailureWriter = f
	return f
}

// finish writes the invocation's account on stderr and returns the exit
// code.
func (c *ingestCmd) finish(stderr io.Writer, resp events.SQSEventResponse, t ingestTally, err error, failures *lazyFile) int {
	fmt.Fprintf(stderr, "s3sqs ingest: %d messages (%d failed), %d objects, %d records read, %d sent, %d failed\n",
		t.Messages, t.Failed, t.objects, t.read, t.sent, t.recordsFailed)
	if failures != nil && failures.f != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: failed records are in %s\n", failures.path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs ingest: %v\n", c.queueError(err))
		return 1
	}
	if len(resp.BatchItemFailures) > 0 || t.recordsFailed > 0 {
		return 1
	}
	return 0
}
