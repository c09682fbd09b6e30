package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// runFanout sends a dataset with the fanout logic, in this process.
func runFanout(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	fs := newFlags("fanout", "usage: s3sqs fanout [flags]\n\n"+
		"Sends the records of an S3 dataset to an SQS queue with the fanout function's\n"+
		"logic, in this process: name the dataset with -bucket and one of -key, -prefix\n"+
		"or -keys, or with -manifest, and the queue with -target-queue-url or\n"+
		"-target-queue-name. Prints the run's report as JSON when done.", stderr)
	var (
		req          fanout.Request
		keys         string
		opts         fanout.Options
		format, mode string
		chunkSize    string
		maxMsgSize   string
		failureFile  string
		offload      string
		pathStyle    bool
		allowEmpty   bool
		interval     time.Duration
	)
	fs.StringVar(&req.Bucket, "bucket", "", "the dataset's `bucket`")
	fs.StringVar(&req.Key, "key", "", "one object `key`")
	fs.StringVar(&req.Prefix, "prefix", "", "every object under `prefix`")
	fs.StringVar(&keys, "keys", "", "comma-separated object `keys`")
	fs.StringVar(&req.Manifest, "manifest", "", "`s3://bucket/key` of a Batch Operations CSV or Inventory manifest.json")
	fs.BoolVar(&req.All, "all", false, "every object in the bucket (must be said explicitly)")
	fs.StringVar(&req.Suffix, "suffix", "", "keep keys ending with `suffix`")
	fs.StringVar(&req.Glob, "glob", "", "keep keys matching `pattern` (path.Match)")
	fs.BoolVar(&req.IncludeHidden, "include-hidden", false, "keep _SUCCESS, _* and .* objects")
	fs.BoolVar(&allowEmpty, "allow-empty", false, "exit 0 when the dataset holds no object (default: that is an error, as a mistyped -prefix would be)")
	fs.StringVar(&req.RunID, "run-id", "", "name the run (default: a new id)")
	fs.StringVar(&format, "format", "auto", "`format`: auto, jsonl, csv, text or parquet")
	fs.StringVar(&mode, "mode", "record", "`mode`: record (a record per message) or chunk (many per message)")
	fs.StringVar(&opts.Target.URL, "target-queue-url", "", "target queue `URL`")
	fs.StringVar(&opts.Target.Name, "target-queue-name", "", "target queue `name`, resolved with GetQueueUrl")
	fs.StringVar(&opts.Target.OwnerAccountID, "target-queue-owner", "", "`account` that owns the queue named by -target-queue-name")
	fs.StringVar(&maxMsgSize, "target-max-message-size", "", "the target's MaximumMessageSize (`size`), to skip GetQueueAttributes")
	fs.StringVar(&opts.WorkQueueURL, "work-queue-url", "", "plan the dataset here and queue its chunk tasks on this `URL` for the deployed function, instead of sending it in-process")
	fs.StringVar(&opts.FailureQueueURL, "failure-queue-url", "", "send refused records to this queue `URL`")
	fs.StringVar(&opts.FailureS3URI, "failure-s3-uri", "", "write refused records under `s3://bucket/prefix`")
	fs.StringVar(&opts.ReportS3URI, "report-s3-uri", "", "write the run report (manifest and failed ranges) under `s3://bucket/prefix`")
	fs.StringVar(&opts.OffloadS3URI, "offload-s3-uri", "", "write records too large for the target under `s3://bucket/prefix` and send SQS Extended Client pointers")
	fs.StringVar(&offload, "offload", "large", "`which` records to offload: large (over the queue's limit) or always")
	fs.StringVar(&opts.OffloadKMSKeyID, "offload-kms-key-id", "", "encrypt offloaded records with this KMS `key` (default SSE-S3)")
	fs.StringVar(&failureFile, "failure-file", "", "write refused records as JSON Lines to `path` (default: with no other failure output, s3sqs-failures-RUNID.jsonl)")
	fs.StringVar(&opts.Mapping.BodyField, "body-field", "", "record `field` sent as the body (default value)")
	fs.StringVar(&opts.Mapping.AttributesField, "attributes-field", "", "record `field` of message attributes (default msg_attributes)")
	fs.StringVar(&opts.Mapping.GroupIDField, "group-id-field", "", "record `field` of the FIFO group (default group_id)")
	fs.StringVar(&opts.Mapping.DedupIDField, "dedup-id-field", "", "record `field` of the FIFO deduplication id")
	fs.StringVar(&chunkSize, "chunk-size", "8MiB", "chunk `size`")
	fs.BoolVar(&opts.Plan.CSV.NoQuotedNewlines, "csv-no-quoted-newlines", false, "promise that CSV objects can be split at line boundaries")
	fs.IntVar(&opts.Send.MaxInFlight, "max-in-flight", sqsbatch.DefaultMaxInFlight, "SendMessageBatch `requests` in flight per chunk")
	fs.IntVar(&opts.Send.MaxAttempts, "max-attempts", sqsbatch.DefaultMaxAttempts, "`attempts` per entry")
	fs.IntVar(&opts.ChunkConcurrency, "concurrency", fanout.DefaultChunkConcurrency, "`chunks` read at once")
	fs.BoolVar(&pathStyle, "s3-path-style", false, "path-style S3 addressing, for S3 stand-ins")
	fs.DurationVar(&interval, "progress-interval", 0, "`interval` of progress lines (default: live bar on a terminal, 5s lines otherwise)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	bad := usageError("fanout", stderr)
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	if keys != "" {
		req.Keys = strings.Split(keys, ",")
	}
	if opts.Target.URL == "" && opts.Target.Name == "" {
		return bad("name the target queue: -target-queue-url or -target-queue-name")
	}
	// Each flag goes through the check of the request field and the
	// environment variable of the same setting.
	checks := []check{
		{"-format", func() (err error) { opts.Plan.Format, err = dataset.ParseFormat(format); return }()},
		{"-mode", func() (err error) { opts.Mode, err = fanout.ParseMode(mode); return }()},
		{"-chunk-size", func() (err error) { opts.Plan.ChunkSize, err = fanout.ParseChunkSize(chunkSize); return }()},
		{"-max-in-flight", fanout.CheckMaxInFlight(int64(opts.Send.MaxInFlight))},
		{"-max-attempts", fanout.CheckMaxAttempts(int64(opts.Send.MaxAttempts))},
		{"-concurrency", fanout.CheckChunkConcurrency(int64(opts.ChunkConcurrency))},
		{"-run-id", fanout.CheckRunID(req.RunID)},
		{"-offload", func() (err error) { opts.OffloadMode, err = sqsextended.ParseMode(offload); return }()},
	}
	if opts.OffloadS3URI != "" {
		checks = append(checks, check{"-offload-s3-uri", func() error {
			_, prefix, err := dataset.ParseS3URI(opts.OffloadS3URI)
			if err != nil {
				return err
			}
			return sqsextended.CheckPrefix(prefix)
		}()})
	}
	if maxMsgSize != "" {
		n, err := fanout.ParseMessageSize(maxMsgSize)
		opts.Target.MaxMessageSize = int(n)
		checks = append(checks, check{"-target-max-message-size", err})
	}
	for _, q := range []struct{ flag, url string }{
		{"-target-queue-url", opts.Target.URL}, {"-work-queue-url", opts.WorkQueueURL}, {"-failure-queue-url", opts.FailureQueueURL},
	} {
		if q.url != "" {
			checks = append(checks, check{q.flag, fanout.CheckQueueURL(q.url)})
		}
	}
	if msg, ok := firstBad(checks); ok {
		return bad("%s", msg)
	}
	if err := req.Source.Validate(); err != nil {
		return bad("%s (name the dataset with -bucket and one of -key, -prefix, -keys or -all, or with -manifest)", strings.TrimPrefix(err.Error(), "dataset: "))
	}
	if req.RunID == "" {
		req.RunID = fanout.NewRunID()
	}
	if failureFile == "" && opts.FailureQueueURL == "" && opts.FailureS3URI == "" {
		failureFile = "s3sqs-failures-" + req.RunID + ".jsonl"
	}
	// With no work queue, the whole dataset is sent here, however large;
	// with one, all of it goes there (Runner.Queue).
	opts.InlineMaxBytes = 1 << 62
	queue := opts.WorkQueueURL != ""

	// The run has started: from here on, stdout gets a report, of zeros
	// when the run fails before it reads anything (docs/cli.md).
	flags := map[string]string{fanout.RoleTarget: "-target-queue-url", fanout.RoleWork: "-work-queue-url", fanout.RoleFailure: "-failure-queue-url"}
	if opts.Target.URL == "" {
		flags[fanout.RoleTarget] = "-target-queue-name"
	}
	failed := func(err error) int {
		printJSON(stdout, fanout.Report{RunID: req.RunID, Queued: queue})
		fmt.Fprintf(stderr, "s3sqs fanout: %v\n", queueFlagError(err, flags, "-target-max-message-size"))
		return 1
	}
	s3c, sqsc, err := lambdaenv.Clients(ctx, pathStyle)
	if err != nil {
		return failed(err)
	}
	var failures *lazyFile
	if failureFile != "" {
		failures = &lazyFile{path: failureFile}
		defer failures.Close()
		opts.FailureWriter = failures
	}
	opts.Progress = &fanout.Progress{}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.IngestEncoder = ingesthandler.EncodeRecords
	runner, err := fanout.New(ctx, s3c, sqsc, opts)
	if err != nil {
		return failed(err)
	}
	if queue {
		// The deployed function sends the tasks: they carry the target and
		// the settings given here, as a request's overrides would.
		target, err := runner.Target(ctx)
		if err != nil {
			return failed(err)
		}
		req.Overrides = queuedOverrides(fs, target.QueueURL(), opts, chunkSize)
	}
	done := make(chan struct{})
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		line := progressLine
		if queue {
			line = planningLine
		}
		showProgress(stderr, func(elapsed time.Duration, bar bool) string { return line(opts.Progress, elapsed, bar) }, tty, interval, done)
	}()
	start := time.Now()
	run := runner.Run
	if queue {
		run = runner.Queue
	}
	rep, err := run(ctx, req)
	close(done)
	<-shown
	printJSON(stdout, rep)
	if queue {
		fmt.Fprintf(stderr, "s3sqs fanout: %d objects (%.1f MB) planned, %d chunk tasks queued on %s in %s\n",
			rep.Objects, float64(rep.BytesPlanned)/1e6, rep.TasksQueued, opts.WorkQueueURL, time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprintf(stderr, "s3sqs fanout: %d records read, %d sent, %d failed in %s\n",
			rep.RecordsRead, rep.RecordsSent, rep.RecordsFailed, time.Since(start).Round(time.Millisecond))
	}
	if failures != nil && failures.f != nil {
		fmt.Fprintf(stderr, "s3sqs fanout: failed records are in %s\n", failures.path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs fanout: %v\n", queueFlagError(err, flags, "-target-max-message-size"))
		return 1
	}
	if rep.Objects == 0 && !allowEmpty {
		fmt.Fprintf(stderr, "s3sqs fanout: %s: nothing to send; check the names, or pass -allow-empty to accept an empty dataset\n", noObject(req.Source))
		return 1
	}
	if rep.RecordsFailed > 0 {
		return 1
	}
	return 0
}

// noObject says which dataset held no object: where it was looked for and
// the filters that may have kept every key out.
func noObject(src dataset.Source) string {
	var where string
	switch {
	case src.Manifest != "":
		where = "the manifest " + src.Manifest + " names no object"
	case src.Key != "":
		where = fmt.Sprintf("no object s3://%s/%s", src.Bucket, src.Key)
	case len(src.Keys) > 0:
		where = fmt.Sprintf("none of the %d -keys is an object in bucket %s", len(src.Keys), src.Bucket)
	case src.All:
		where = "no object in bucket " + src.Bucket
	default:
		where = fmt.Sprintf("no object under s3://%s/%s (-bucket %s -prefix %s)", src.Bucket, src.Prefix, src.Bucket, src.Prefix)
	}
	var filters []string
	if src.Suffix != "" {
		filters = append(filters, fmt.Sprintf("-suffix %q", src.Suffix))
	}
	if src.Glob != "" {
		filters = append(filters, fmt.Sprintf("-glob %q", src.Glob))
	}
	if len(filters) > 0 {
		where += ", filtered by " + strings.Join(filters, ", ")
	}
	if (src.Prefix != "" || src.All) && !src.IncludeHidden {
		where += " (keys whose name starts with _ or . are skipped without -include-hidden)"
	}
	return where
}

// queuedOverrides are the overrides that the tasks of -work-queue-url
// carry: the target queue, and the settings whose flags were given (the
// function's own settings stand for the others). The failure output, the
// offload bucket and the run report are the function's.
func queuedOverrides(fs *flag.FlagSet, targetURL string, opts fanout.Options, chunkSize string) fanout.Overrides {
	ov := fanout.Overrides{TargetQueueURL: targetURL}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "format":
			ov.Format = opts.Plan.Format
		case "mode":
			ov.Mode = opts.Mode
		case "chunk-size":
			ov.ChunkSize = fanout.Setting(chunkSize)
		case "max-in-flight":
			ov.MaxInFlight = fanout.Setting(strconv.Itoa(opts.Send.MaxInFlight))
		case "max-attempts":
			ov.MaxAttempts = fanout.Setting(strconv.Itoa(opts.Send.MaxAttempts))
		case "body-field", "attributes-field", "group-id-field", "dedup-id-field":
			ov.Mapping = opts.Mapping
		}
	})
	return ov
}

// lazyFile creates its file on the first write, so that a run without
// failures leaves no empty file behind.
type lazyFile struct {
	path string
	f    *os.File
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.f == nil {
		f, err := os.Create(l.path)
		if err != nil {
			return 0, err
		}
		l.f = f
	}
	return l.f.Write(p)
}

func (l *lazyFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

// showProgress draws a live bar on a terminal, or writes a line every
// interval otherwise, until done closes. line describes the progress after
// elapsed, as a bar or as key=value pairs.
func showProgress(w io.Writer, line func(elapsed time.Duration, bar bool) string, tty bool, interval time.Duration, done <-chan struct{}) {
	if interval <= 0 {
		interval = 5 * time.Second
		if tty {
			interval = 200 * time.Millisecond
		}
	}
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			if tty {
				fmt.Fprintf(w, "\r%s\n", line(time.Since(start), true))
			}
			return
		case <-t.C:
			if tty {
				fmt.Fprintf(w, "\r%s", line(time.Since(start), true))
			} else {
				fmt.Fprintf(w, "progress %s\n", line(time.Since(start), false))
			}
		}
	}
}

// progressLine describes the progress: a bar for a terminal, key=value
// pairs for logs.
func progressLine(p *fanout.Progress, elapsed time.Duration, bar bool) string {
	planned, read := p.BytesPlanned.Load(), p.BytesRead.Load()
	recs, msgs, failed := p.RecordsRead.Load(), p.Messages.Load(), p.RecordsFailed.Load()
	secs := max(elapsed.Seconds(), 0.001)
	frac, eta := progressOf(read, planned, elapsed)
	if !bar {
		return fmt.Sprintf("records=%d mb=%.1f planned_mb=%.1f messages=%d msgs_per_s=%.0f failed=%d eta=%s",
			recs, float64(read)/1e6, float64(planned)/1e6, msgs, float64(msgs)/secs, failed, eta)
	}
	return fmt.Sprintf("%s %s records %.1f/%.1f MB %.0f msg/s %d failed ETA %s ",
		progressBar(frac), strconv.FormatInt(recs, 10), float64(read)/1e6, float64(planned)/1e6, float64(msgs)/secs, failed, eta)
}

// planningLine describes the progress of planning for -work-queue-url:
// objects listed and planned, their size, and the chunk tasks handed to the
// work queue. The listing's length is not known ahead, so there is no bar.
func planningLine(p *fanout.Progress, elapsed time.Duration, bar bool) string {
	objs, tasks, planned := p.ObjectsPlanned.Load(), p.TasksPlanned.Load(), p.BytesPlanned.Load()
	rate := float64(objs) / max(elapsed.Seconds(), 0.001)
	if !bar {
		return fmt.Sprintf("objects=%d planned_mb=%.1f tasks=%d objects_per_s=%.0f", objs, float64(planned)/1e6, tasks, rate)
	}
	return fmt.Sprintf("planning: %d objects, %.1f MB, %d chunk tasks queued, %.0f objects/s ", objs, float64(planned)/1e6, tasks, rate)
}

// progressOf returns done's share of total, from 0 to 1, and the time
// left at the pace so far ("?" before any progress).
func progressOf(done, total int64, elapsed time.Duration) (float64, string) {
	frac := 0.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	switch {
	case frac >= 1:
		return frac, "0s"
	case frac > 0:
		return frac, (time.Duration(float64(elapsed) * (1 - frac) / frac)).Round(time.Second).String()
	}
	return frac, "?"
}

// progressBar draws frac as a bar and a percentage.
func progressBar(frac float64) string {
	const width = 24
	n := int(frac * width)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100)
}
