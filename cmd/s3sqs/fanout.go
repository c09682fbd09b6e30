package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// fanoutCmd is the command line of s3sqs fanout: the request and the
// runner's options it gives, and what the command does around the run.
type fanoutCmd struct {
	flags       *cmdFlags
	req         engine.Request
	opts        engine.Options
	keys        string
	chunkSize   *string
	maxMsgSize  int64
	failureFile string
	pathStyle   bool
	allowEmpty  bool
	interval    time.Duration
	dry         dryRunCmd
	// maxRate and maxBacklog are -max-rate and -target-max-backlog as
	// written; claimsTable is -claims-table.
	maxRate, maxBacklog, claimsTable string
	// maxFailures and maxFailedObjects are the failure budget's flags.
	maxFailures, maxFailedObjects string
	// restore, with -restore-manifest, lists the archived objects.
	restore *restoreManifest
}

// runFanout sends a dataset with the fanout logic, in this process.
func runFanout(ctx context.Context, args []string, s streams) int {
	stdout, stderr, tty := s.stdout, s.stderr, s.tty
	c := newFanoutCmd(stderr)
	if code, ok := c.parse(args, usageError("fanout", stderr)); !ok {
		return code
	}
	stderr, tty, done := c.flags.stderr(stderr, tty)
	defer done()
	// The run has started: from here on, stdout gets a report, of zeros
	// when the run fails before it reads anything (docs/cli.md).
	runner, failures, err := c.start(ctx, stderr)
	if failures != nil {
		defer failures.Close()
	}
	if c.restore != nil {
		defer c.restore.close(stderr)
	}
	if err != nil {
		printJSON(stdout, engine.Report{RunID: c.req.RunID, Queued: c.queue() && !c.dry.on})
		fmt.Fprintf(stderr, "s3sqs fanout: %v\n", c.queueError(err))
		return 1
	}
	if c.dry.on {
		return c.dryRun(ctx, runner, stdout, stderr, tty)
	}
	start := time.Now()
	rep, err := c.send(ctx, runner, stderr, tty)
	printJSON(stdout, rep)
	code := c.finish(stderr, rep, err, failures, time.Since(start))
	switch {
	case ctx.Err() != nil:
		return c.interrupted(stderr, rep)
	case rep.StopReason != "":
		return c.budgetSpent(stderr, rep)
	case rep.Cancelled && !c.queue():
		return c.cancelled(stderr, rep)
	}
	return code
}

// newFanoutCmd defines fanout's flags.
func newFanoutCmd(stderr io.Writer) *fanoutCmd {
	c := &fanoutCmd{flags: newCmdFlags("fanout", "usage: s3sqs fanout [flags]\n\n"+
		"Sends the records of an S3 dataset to an SQS queue with the fanout function's\n"+
		"logic, in this process: name the dataset with -bucket and one of -key, -prefix\n"+
		"or -keys, or with -manifest, and the queue with -target-queue-url or\n"+
		"-target-queue-name. Prints the run's report as JSON when done. -dry-run counts\n"+
		"what the run would send, and estimates its time and cost, sending nothing.", stderr)}
	fs, req, o := c.flags, &c.req, &c.opts
	fs.StringVar(&req.Bucket, "bucket", "", "the dataset's `bucket`")
	fs.StringVar(&req.Key, "key", "", "one object `key`")
	fs.StringVar(&req.Prefix, "prefix", "", "every object under `prefix`")
	fs.StringVar(&c.keys, "keys", "", "comma-separated object `keys`")
	fs.StringVar(&req.Manifest, "manifest", "", "`s3://bucket/key` of a Batch Operations CSV or Inventory manifest.json")
	fs.BoolVar(&req.All, "all", false, "every object in the bucket (must be said explicitly)")
	fs.StringVar(&req.Suffix, "suffix", "", "keep keys ending with `suffix`")
	fs.StringVar(&req.Glob, "glob", "", "keep keys matching `pattern` (path.Match)")
	fs.BoolVar(&req.IncludeHidden, "include-hidden", false, "keep _SUCCESS, _* and .* objects")
	filterFlags(fs, &req.Filters)
	fs.BoolVar(&req.Versions, "versions", false, "every version of each key, oldest first, with -mode notification (on a FIFO queue in order, in the key's message group)")
	fs.BoolVar(&c.allowEmpty, "allow-empty", false, "exit 0 when the dataset holds no object (default: that is an error, as a mistyped -prefix would be)")
	fs.text(settings.RunID, &req.RunID, "")
	fs.choice(settings.Format, "", func(v string) { o.Plan.Format = dataset.Format(v) })
	fs.choice(settings.Mode, "", func(v string) { o.Mode = worktask.Mode(v) })
	fs.choice(settings.NotificationFormat, "", func(v string) { o.Notification.Format = s3event.Format(v) })
	fs.text(settings.TargetQueueURL, &o.Target.URL, "")
	fs.text(settings.TargetQueueName, &o.Target.Name, "")
	fs.text(settings.TargetQueueOwner, &o.Target.OwnerAccountID, "")
	fs.size(settings.TargetMaxMessageSize, &c.maxMsgSize, "")
	fs.text(settings.WorkQueueURL, &o.WorkQueueURL, "")
	fs.text(settings.FailureQueueURL, &o.FailureQueueURL, "")
	fs.text(settings.FailureS3URI, &o.FailureS3URI, "")
	fs.text(settings.ReportS3URI, &o.ReportS3URI, "")
	fs.text(settings.ClaimsTable, &c.claimsTable, "")
	offloadFlags(fs, &o.Offload)
	fs.Func("restore-manifest", "list the objects left out as archived in the CSV file at `path`, a manifest for an S3 Batch Operations restore job", func(p string) error {
		c.restore, c.opts.Planning.OnArchived = newRestoreManifest(p), func(o dataset.Object) { c.restore.add(o) }
		return nil
	})
	fs.StringVar(&c.failureFile, "failure-file", "", "write refused records as JSON Lines to `path` (default: with no other failure output, s3sqs-failures-RUNID.jsonl)")
	mappingFlags(fs, &o.Mapping, "", "")
	fs.text(settings.GroupIDPartition, &o.Mapping.GroupIDPartition, "")
	c.chunkSize = fs.size(settings.ChunkSize, &o.Plan.ChunkSize, "")
	fs.formatFlags(&o.Plan)
	fs.count(settings.MaxInFlight, &o.Send.MaxInFlight, "")
	fs.boolean(settings.FixedInFlight, &o.Send.FixedInFlight, "")
	fs.count(settings.MaxAttempts, &o.Send.MaxAttempts, "")
	parsedText(fs, settings.MaxRate, &c.maxRate, "")
	parsedText(fs, settings.TargetMaxBacklog, &c.maxBacklog, "")
	parsedText(fs, settings.MaxFailures, &c.maxFailures, "")
	parsedText(fs, settings.MaxFailedObjects, &c.maxFailedObjects, "")
	fs.count(settings.ChunkConcurrency, &o.ChunkConcurrency, "")
	fs.boolean(settings.S3PathStyle, &c.pathStyle, "")
	fs.DurationVar(&c.interval, "progress-interval", 0, "`interval` of progress lines (default: live bar on a terminal, 5s lines otherwise)")
	fs.logFlag()
	dryRunFlags(fs, &c.dry)
	return c
}

// mappingFlags defines the flags of the record mapping, into m; the
// commands that read records again describe them with prefix and say the
// defaults with defaults.
func mappingFlags(fs *cmdFlags, m *worktask.Mapping, prefix string, defaults ...string) {
	rows := []settings.Text{settings.BodyField, settings.AttributesField, settings.GroupIDField, settings.DedupIDField}
	ps := []*string{&m.BodyField, &m.AttributesField, &m.GroupIDField, &m.DedupIDField}
	for i, row := range rows {
		usage := ""
		if prefix != "" {
			usage = prefix + defaults[i]
		}
		fs.text(row, ps[i], usage)
	}
}

// parse reads the command line and checks it; it returns the exit code
// when the command cannot go on.
func (c *fanoutCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	fs, req, o := c.flags, &c.req, &c.opts
	if code, ok := parseFlags(fs.FlagSet, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0)), false
	}
	if c.keys != "" {
		req.Keys = strings.Split(c.keys, ",")
	}
	if o.Target.URL == "" && o.Target.Name == "" {
		return bad("name the target queue: -target-queue-url or -target-queue-name"), false
	}
	if msg, ok := fs.firstBad(); ok {
		return bad("%s", msg), false
	}
	if msg, ok := c.dry.check(fs.given()); ok {
		return bad("%s", msg), false
	}
	if o.Send.FixedInFlight && o.WorkQueueURL != "" {
		// The function's workers send a queued run, with their own
		// FIXED_IN_FLIGHT; a request cannot carry it.
		return bad("-fixed-in-flight applies to sends made here, and with -work-queue-url the deployed function sends (set its FIXED_IN_FLIGHT)"), false
	}
	if req.Versions && o.Mode != worktask.ModeNotification {
		// Record and chunk mode read an object's current version.
		return bad("-versions replays every version of each key as notifications: give -mode notification"), false
	}
	o.Target.MaxMessageSize = int(c.maxMsgSize)
	if err := req.Source.Validate(); err != nil {
		return bad("%s (name the dataset with -bucket and one of -key, -prefix, -keys or -all, or with -manifest)", strings.TrimPrefix(err.Error(), "dataset: ")), false
	}
	if req.RunID == "" {
		req.RunID = engine.NewRunID()
	}
	if c.failureFile == "" && o.FailureQueueURL == "" && o.FailureS3URI == "" {
		c.failureFile = "s3sqs-failures-" + req.RunID + ".jsonl"
	}
	// With no work queue, the whole dataset is sent here, however large;
	// with one, all of it goes there (Request.Queue).
	o.Planning.InlineMaxBytes = 1 << 62
	return 0, true
}

// queue says whether the dataset is planned here for the work queue.
func (c *fanoutCmd) queue() bool { return c.opts.WorkQueueURL != "" }

// queueError names the flag of a queue that cannot be used.
func (c *fanoutCmd) queueError(err error) error {
	flags := map[string]string{engine.RoleTarget: "-target-queue-url", engine.RoleWork: "-work-queue-url", engine.RoleFailure: "-failure-queue-url"}
	if c.opts.Target.URL == "" {
		flags[engine.RoleTarget] = "-target-queue-name"
	}
	return queueFlagError(err, flags, "-target-max-message-size")
}

// start builds the clients, the failure file and the runner; with a work
// queue, the request's overrides carry the target and the settings given.
func (c *fanoutCmd) start(ctx context.Context, stderr io.Writer) (*engine.Runner, *lazyFile, error) {
	s3c, sqsc, err := awssetup.Clients(ctx, c.pathStyle)
	if err != nil {
		return nil, nil, err
	}
	failures := failureFile(c.failureFile, &c.opts)
	c.opts.Progress = &engine.Progress{}
	c.opts.Logger = c.flags.logger(stderr)
	runner, _, err := awssetup.NewRunner(ctx, s3c, sqsc, awssetup.RunnerConfig{Options: c.opts, ClaimsTable: c.claimsTable, RunState: true, Name: awssetup.Flag})
	if err != nil {
		return nil, failures, err
	}
	if c.queue() {
		// The deployed function sends the tasks: they carry the target (the
		// engine names it) and the settings given here, as a request's
		// overrides would.
		c.req.Queue = true
		c.req.Overrides = queuedOverrides(c.flags.FlagSet, c.opts, *c.chunkSize)
	}
	// The run-wide pace is the request's, in-process as queued.
	c.req.MaxRate, c.req.TargetMaxBacklog = worktask.SettingOf(c.maxRate), worktask.SettingOf(c.maxBacklog)
	c.req.MaxFailures, c.req.MaxFailedObjects = worktask.LimitOf(c.maxFailures), worktask.LimitOf(c.maxFailedObjects)
	return runner, failures, nil
}

// send runs or queues the request, showing its progress.
func (c *fanoutCmd) send(ctx context.Context, runner *engine.Runner, stderr io.Writer, tty bool) (engine.Report, error) {
	line := progressLine
	if c.queue() {
		line = planningLine
	}
	stop := showProgress(stderr, func(elapsed time.Duration, bar bool) string { return line(c.opts.Progress, elapsed, bar) }, tty, c.interval)
	defer stop()
	return runner.Run(ctx, c.req)
}

// finish writes the run's account on stderr and returns the exit code.
func (c *fanoutCmd) finish(stderr io.Writer, rep engine.Report, err error, failures *lazyFile, took time.Duration) int {
	if c.queue() {
		fmt.Fprintf(stderr, "s3sqs fanout: %d objects (%.1f MB) planned, %d chunk tasks queued on %s in %s\n",
			rep.Objects, float64(rep.BytesPlanned)/1e6, rep.TasksQueued, c.opts.WorkQueueURL, took.Round(time.Millisecond))
	} else {
		cut := ""
		switch {
		case rep.RecordsCutOff > 0 && rep.StopReason != "":
			cut = fmt.Sprintf(", %d held back by the stop (not failed: read again when the run goes on)", rep.RecordsCutOff)
		case rep.RecordsCutOff > 0:
			cut = fmt.Sprintf(", %d cut off mid-send (not failed: the next run sends them)", rep.RecordsCutOff)
		}
		what := "records read"
		if cmp.Or(c.req.Overrides.Mode, c.opts.Mode) == worktask.ModeNotification {
			// Notification mode reads no object: each is announced.
			what = "objects announced (not read)"
		}
		fmt.Fprintf(stderr, "s3sqs fanout: %d %s, %d sent, %d failed%s in %s\n",
			rep.RecordsRead, what, rep.RecordsSent, rep.RecordsFailed, cut, took.Round(time.Millisecond))
	}
	if rep.RecordsMapped > 0 {
		// The mapping left fields out of the messages: say which, so that
		// none goes missing unnoticed.
		fmt.Fprintf(stderr, "s3sqs fanout: %d records sent as their %q field; fields left out of them: %s\n",
			rep.RecordsMapped, cmp.Or(c.req.Overrides.Mapping.BodyField, c.opts.Mapping.BodyField), cmp.Or(strings.Join(rep.FieldsLeftOut, ", "), "none"))
	}
	if failures != nil && failures.f != nil {
		fmt.Fprintf(stderr, "s3sqs fanout: failed records are in %s\n", failures.path)
	}
	writeLeftOut(stderr, rep.Stats)
	if c.refused(stderr, rep, err) || rep.RecordsFailed > 0 {
		return 1
	}
	return 0
}

// refused reports, and writes why, a run that failed or found no object
// where -allow-empty was not given.
func (c *fanoutCmd) refused(stderr io.Writer, rep engine.Report, err error) bool {
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "s3sqs fanout: %v\n", c.queueError(err))
		return true
	case rep.Objects == 0 && rep.ObjectsArchived == 0 && !c.allowEmpty:
		fmt.Fprintf(stderr, "s3sqs fanout: %s: nothing to send; check the names, or pass -allow-empty to accept an empty dataset\n", noObject(c.req.Source, rep.Stats))
		return true
	}
	return false
}

// queuedOverrides are the overrides that the tasks of -work-queue-url
// carry besides the target queue, which the engine adds: the settings
// whose flags were given (the function's own settings stand for the
// others). The failure output, the offload bucket and the run report are
// the function's.
func queuedOverrides(fs *flag.FlagSet, opts engine.Options, chunkSize string) worktask.Overrides {
	var ov worktask.Overrides
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "format":
			ov.Format = opts.Plan.Format
		case "mode":
			ov.Mode = opts.Mode
		case "notification-format":
			ov.NotificationFormat = string(opts.Notification.Format)
		case "chunk-size":
			ov.ChunkSize = worktask.SettingOf(chunkSize)
		case "max-in-flight":
			ov.MaxInFlight = worktask.SettingOf(strconv.Itoa(opts.Send.MaxInFlight))
		case "max-attempts":
			ov.MaxAttempts = worktask.SettingOf(strconv.Itoa(opts.Send.MaxAttempts))
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
// interval otherwise, until the function it returns is called, which
// returns once the last line is written. line describes the progress
// after elapsed, as a bar or as key=value pairs.
func showProgress(w io.Writer, line func(elapsed time.Duration, bar bool) string, tty bool, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = 5 * time.Second
		if tty {
			interval = 200 * time.Millisecond
		}
	}
	done, shown := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shown)
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
	}()
	return func() {
		close(done)
		<-shown
	}
}

// progressLine describes the progress: a bar for a terminal, key=value
// pairs for logs.
func progressLine(p *engine.Progress, elapsed time.Duration, bar bool) string {
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
func planningLine(p *engine.Progress, elapsed time.Duration, bar bool) string {
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
