package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

const redriveUsage = `usage: s3sqs redrive SOURCE [flags]

Sends failed work again, from one SOURCE:
  -report s3://bucket/prefix/RUNID/ (or -report-s3-uri s3://bucket/prefix -run-id RUNID)
      a fanout run report: its failed tasks go back to -work-queue-url from
      their first failed record, or only their failed records are read again
      and sent to -target-queue-url from here
  -from-queue URL | -from-s3 s3://bucket/prefix | -from-file PATH
      the failure output (-from-file: the local file fanout writes by
      default, s3sqs-failures-RUNID.jsonl): its records go to -target-queue-url (the target, or
      another queue); bodies cut short or absent are read again from their
      object, at the version they failed at
  -dlq URL [-to URL]
      a dead-letter queue: its messages move back to -to, by default the one
      queue whose RedrivePolicy names it, at -rate messages/s

What was sent is deleted from its queue, or recorded in a marker object
next to its file, only after SQS accepted it, so that running the command
again does not send it again. Prints the summary as JSON on stdout; exits 0
when everything selected was sent (or skipped, with the reason), 1 when
something failed, 2 when the command line is wrong.`

// redriveCmd is the command line of s3sqs redrive: its one source, the
// redriver's options, and how the command shows its progress.
type redriveCmd struct {
	flags                      *cmdFlags
	opts                       redrive.Options
	report, reportURI, runID   string
	fromQueue, fromS3, dlq, to string
	fromFile                   string
	native                     bool
	useIngest                  bool
	pathStyle                  bool
	interval                   time.Duration
	// source is the flag of the source, without its dash.
	source string
	set    map[string]bool
}

// runRedrive sends failed work again: a run report's failed tasks, the
// failure output's records, or a DLQ's messages.
func runRedrive(ctx context.Context, args []string, s streams) int {
	stdout, stderr, tty := s.stdout, s.stderr, s.tty
	c := newRedriveCmd(stderr)
	bad := usageError("redrive", stderr)
	if code, ok := c.parse(args, bad); !ok {
		return code
	}
	stderr, tty, done := c.flags.stderr(stderr, tty)
	defer done()
	bad = usageError("redrive", stderr)
	// The run has started: from here on, stdout gets a summary, empty
	// when the run fails before it finds anything.
	r, err := c.start(ctx, stderr)
	if err != nil {
		printJSON(stdout, redrive.Summary{From: cmp.Or(c.report, c.fromQueue, c.fromS3, c.fromFile, c.dlq), To: cmp.Or(c.opts.TargetQueueURL, c.opts.WorkQueueURL, c.to), Items: []redrive.Item{}})
		fmt.Fprintf(stderr, "s3sqs redrive: %v\n", c.queueError(err))
		return 1
	}
	start := time.Now()
	sum, err := c.send(ctx, r, stderr, tty)
	printJSON(stdout, sum)
	writeSummary(stderr, sum, c.source == "dlq", time.Since(start))
	var noSource *redrive.SourceError
	switch {
	case errors.As(err, &noSource) && noSource.Err == nil:
		return bad("%v: name the queue to move them to with -to", err)
	case err != nil:
		fmt.Fprintf(stderr, "s3sqs redrive: %v\n", c.queueError(err))
		return 1
	case sum.Failed > 0:
		return 1
	}
	return 0
}

// newRedriveCmd defines redrive's flags.
func newRedriveCmd(stderr io.Writer) *redriveCmd {
	c := &redriveCmd{flags: newCmdFlags("redrive", redriveUsage, stderr)}
	fs, o := c.flags, &c.opts
	fs.StringVar(&c.report, "report", "", "redrive the run report at `s3://bucket/prefix/RUNID/`")
	fs.StringVar(&c.reportURI, "report-s3-uri", "", "the run reports' `s3://bucket/prefix` (REPORT_S3_URI), with -run-id")
	fs.StringVar(&c.runID, "run-id", "", "the `run` whose report -report-s3-uri holds")
	fs.StringVar(&c.fromQueue, "from-queue", "", "redrive the failure queue at `URL` (FAILURE_QUEUE_URL)")
	fs.StringVar(&c.fromS3, "from-s3", "", "redrive the failure output under `s3://bucket/prefix` (FAILURE_S3_URI), or one .jsonl file")
	fs.StringVar(&c.fromFile, "from-file", "", "redrive the local failure file at `path` (fanout's -failure-file, by default s3sqs-failures-RUNID.jsonl)")
	fs.StringVar(&c.dlq, "dlq", "", "move the messages of the dead-letter queue at `URL` back")
	fs.StringVar(&c.to, "to", "", "with -dlq: the queue `URL` to move them to (default: the queue whose RedrivePolicy names the DLQ)")
	fs.BoolVar(&c.native, "native", false, "with -dlq: have SQS move them (StartMessageMoveTask) instead of this process")
	fs.StringVar(&o.TargetQueueURL, "target-queue-url", "", "send records to the queue at `URL`: the failure output's, or a run report's in this process")
	fs.StringVar(&o.WorkQueueURL, "work-queue-url", "", "send a run report's failed tasks to fanout's work queue at `URL`")
	fs.StringVar(&o.RunID, "redrive-run-id", "", "name the `run` of a report's redriven tasks (default RUNID-redrive)")
	codes := fs.String("code", "", "send only the records that failed with these comma-separated `codes`")
	skipCodes := fs.String("skip-code", "", "send all records but those that failed with these comma-separated `codes`")
	fs.onCheck("code", func() (err error) { o.Codes.Only, err = c.codes(*codes, "code"); return })
	fs.onCheck("skip-code", func() (err error) { o.Codes.Skip, err = c.codes(*skipCodes, "skip-code"); return })
	fs.BoolVar(&o.DryRun, "dry-run", false, "send, delete and write nothing; list what would be sent")
	fs.BoolVar(&o.Delete, "delete", false, "with -from-s3 or -from-file: delete each failure file once all its records are sent (default: keep it, with a .redriven marker)")
	fs.BoolVar(&o.Reread, "reread", false, "read every failure output record again from its object, not only those without a whole body")
	fs.choice(settings.Format, "`format` of the objects records are read again from: auto, jsonl, csv, text or parquet", func(v string) { o.Plan.Format = dataset.Format(v) })
	fs.formatFlags(&o.Plan)
	mappingFlags(fs, &o.Mapping, "records read again: ", "record `field` sent as the body, as fanout's -body-field",
		"record `field` of message attributes", "record `field` of the FIFO group", "record `field` of the FIFO deduplication id")
	fs.BoolVar(&c.useIngest, "ingest", false, "the failure output is s3ingest's: records carry only the record id, and records read again are encoded as s3ingest does")
	ingestFlags(fs, &c.useIngest, o)
	fs.IntVar(&o.Rate, "rate", redrive.DefaultRate, "send at most `N` messages per second from the failure output or a DLQ (0: no limit)")
	fs.onCheck("rate", func() error { return checkRate(o.Rate, c.native) })
	fs.DurationVar(&o.Visibility, "visibility-timeout", redrive.DefaultVisibility, "how long a received message stays hidden while this run holds it (`duration`)")
	fs.onCheck("visibility-timeout", func() error { return checkVisibility(o.Visibility) })
	offloadFlags(fs, &o.Offload)
	fs.count(settings.MaxAttempts, &o.Send.MaxAttempts, "`attempts` per message")
	fs.boolean(settings.ReplaceInvalidCharacters, &o.Send.ReplaceInvalidCharacters, "")
	fs.boolean(settings.S3PathStyle, &c.pathStyle, "")
	fs.DurationVar(&c.interval, "progress-interval", 0, "`interval` of progress lines (default: live bar on a terminal, 5s lines otherwise)")
	fs.logFlag()
	return c
}

// ingestFlags defines the flags of s3ingest's encoding, which o gets when
// -ingest is given.
func ingestFlags(fs *cmdFlags, useIngest *bool, o *redrive.Options) {
	enc := &worktask.IngestEncoding{}
	fs.choice(settings.PartitionColumns, "with -ingest: add the key's partition values: true, typed or false", func(v string) { enc.Partitions = recordjson.PartitionMode(v) })
	fs.boolean(settings.FileMetadata, &enc.FileMetadata, "with -ingest: add the _file object")
	fs.onCheck("ingest", func() error {
		if *useIngest {
			o.Ingest = enc
		}
		return nil
	})
}

// codes reads the codes of -code or -skip-code, when flag is given.
func (c *redriveCmd) codes(list, flag string) ([]string, error) {
	if list == "" && !c.set[flag] {
		return nil, nil
	}
	return redrive.ParseCodes(list)
}

// parse reads the command line and checks it: one source, only the flags
// that apply to it, and each value through its setting's check. It returns
// the exit code when the command cannot go on.
func (c *redriveCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	fs := c.flags
	if code, ok := parseFlags(fs.FlagSet, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0)), false
	}
	c.set = fs.given()
	if msg := c.pickSource(); msg != "" {
		return bad("%s", msg), false
	}
	if msg := c.misplaced(); msg != "" {
		return bad("%s", msg), false
	}
	if msg, ok := firstBad(c.sourceChecks()); ok {
		return bad("%s", msg), false
	}
	if msg, ok := fs.firstBad(); ok {
		return bad("%s", msg), false
	}
	return 0, true
}

// pickSource sets the one source the command line names, or says what is
// wrong with its sources.
func (c *redriveCmd) pickSource() string {
	var sources []string
	for _, s := range []string{"report", "report-s3-uri", "from-queue", "from-s3", "from-file", "dlq"} {
		if c.set[s] {
			sources = append(sources, "-"+s)
		}
	}
	switch {
	case len(sources) == 0:
		return "name what to redrive: -report, -report-s3-uri with -run-id, -from-queue, -from-s3, -from-file or -dlq"
	case len(sources) > 1:
		return "name one source to redrive, not " + strings.Join(sources, " and ")
	}
	c.source = strings.TrimPrefix(sources[0], "-")
	return ""
}

// misplaced says which flag does not apply to the source, or which the
// source lacks; "" when the command line is whole.
func (c *redriveCmd) misplaced() string {
	source, set, o := c.source, c.set, &c.opts
	isReport := source == "report" || source == "report-s3-uri"
	isFailures := source == "from-queue" || source == "from-s3" || source == "from-file"
	for _, rule := range []struct {
		flags   []string
		applies bool
		where   string
	}{
		{[]string{"run-id"}, source == "report-s3-uri", "with -report-s3-uri"},
		{[]string{"work-queue-url", "redrive-run-id"}, isReport, "to a run report (-report, -report-s3-uri)"},
		{[]string{"to", "native"}, source == "dlq", "with -dlq"},
		{[]string{"target-queue-url"}, !(source == "dlq"), "to a run report or the failure output; with -dlq name the queue with -to"},
		{[]string{"code", "skip-code"}, isReport || isFailures, "to a run report or the failure output, whose records have codes"},
		{[]string{"delete"}, source == "from-s3" || source == "from-file", "with -from-s3 and -from-file"},
		{[]string{"reread", "format", "body-field", "attributes-field", "group-id-field", "dedup-id-field", "ingest"}, isFailures, "to the failure output (-from-queue, -from-s3, -from-file)"},
		{[]string{"partitions", "file-metadata"}, c.useIngest, "with -ingest"},
		{[]string{"rate"}, !isReport, "to the failure output and a DLQ"},
		{[]string{"visibility-timeout"}, source == "from-queue" || source == "dlq" && !c.native, "to a queue received here (-from-queue, -dlq)"},
	} {
		for _, f := range rule.flags {
			if set[f] && !rule.applies {
				return fmt.Sprintf("-%s applies %s only", f, rule.where)
			}
		}
	}
	switch {
	case source == "report-s3-uri" && c.runID == "":
		return "-report-s3-uri needs -run-id: the run whose report to redrive"
	case isReport && (o.WorkQueueURL == "") == (o.TargetQueueURL == ""):
		return "send a run report's failures to -work-queue-url (the deployed fanout runs the tasks) or to -target-queue-url (this process reads the failed records again), one of them"
	case isFailures && o.TargetQueueURL == "":
		return "name the queue the failure output's records go to: -target-queue-url"
	case set["code"] && set["skip-code"]:
		return "give -code or -skip-code, not both"
	}
	return ""
}

// sourceChecks checks the queues and the source's URI, and sets the
// report's URI for -report-s3-uri.
func (c *redriveCmd) sourceChecks() []check {
	var checks []check
	for _, q := range []struct{ flag, url string }{
		{"-from-queue", c.fromQueue}, {"-dlq", c.dlq}, {"-to", c.to}, {"-target-queue-url", c.opts.TargetQueueURL}, {"-work-queue-url", c.opts.WorkQueueURL},
	} {
		if q.url != "" {
			checks = append(checks, check{q.flag, settings.CheckQueueURL(q.url)})
		}
	}
	switch c.source {
	case "report":
		_, _, _, err := redrive.ParseReportURI(c.report)
		checks = append(checks, check{"-report", err})
	case "report-s3-uri":
		_, _, err := dataset.ParseS3URI(c.reportURI)
		checks = append(checks, check{"-report-s3-uri", err}, check{"-run-id", settings.CheckRunID(c.runID)})
		c.report = redrive.ReportURI(c.reportURI, c.runID)
	case "from-s3":
		_, _, err := dataset.ParseS3URI(c.fromS3)
		checks = append(checks, check{"-from-s3", err})
	}
	return append(checks, check{"-redrive-run-id", settings.CheckRunID(c.opts.RunID)})
}

// queueError names the flag of a queue that cannot be used.
func (c *redriveCmd) queueError(err error) error {
	flags := map[string]string{engine.RoleTarget: "-target-queue-url", engine.RoleWork: "-work-queue-url", engine.RoleFailure: "-from-queue", engine.RoleDeadLetter: "-dlq"}
	if c.source == "dlq" {
		flags[engine.RoleTarget] = "-to"
		if c.to == "" {
			flags[engine.RoleTarget] = "the queue whose RedrivePolicy names -dlq"
		}
	}
	return queueFlagError(err, flags, "")
}

// start builds the clients and the redriver.
func (c *redriveCmd) start(ctx context.Context, stderr io.Writer) (*redrive.Redriver, error) {
	s3c, sqsc, err := awssetup.Clients(ctx, c.pathStyle)
	if err != nil {
		return nil, err
	}
	if err := awssetup.CheckBuckets(ctx, s3c, awssetup.S3Output{Setting: "-offload-s3-uri", URI: c.opts.Offload.S3URI}); err != nil {
		return nil, err
	}
	c.opts.Progress = &redrive.Progress{}
	c.opts.Logger = c.flags.logger(stderr)
	c.opts.Send.Logger = nil
	return redrive.New(ctx, s3c, sqsc, c.opts)
}

// send redrives the source, showing its progress.
func (c *redriveCmd) send(ctx context.Context, r *redrive.Redriver, stderr io.Writer, tty bool) (sum *redrive.Summary, err error) {
	defer showProgress(stderr, func(elapsed time.Duration, bar bool) string { return redriveLine(c.opts.Progress, elapsed, bar) }, tty, c.interval)()
	switch c.source {
	case "report", "report-s3-uri":
		sum, err = r.Report(ctx, c.report)
	case "from-queue":
		sum, err = r.FailureQueue(ctx, c.fromQueue)
	case "from-s3":
		sum, err = r.FailureS3(ctx, c.fromS3)
	case "from-file":
		sum, err = r.FailureFile(ctx, c.fromFile)
	case "dlq":
		sum, err = r.DLQ(ctx, c.dlq, c.to, c.native)
	}
	return sum, err
}

// checkRate reports a rate outside 0 (no limit) to 10,000 messages per
// second, or above StartMessageMoveTask's 500 with -native.
func checkRate(n int, native bool) error {
	switch {
	case n < 0 || n > 10000:
		return fmt.Errorf("%d is not a whole number from 0 (no limit) to 10000", n)
	case native && n > redrive.MaxNativeRate:
		return fmt.Errorf("%d is above the %d messages per second StartMessageMoveTask allows (-native)", n, redrive.MaxNativeRate)
	}
	return nil
}

// checkVisibility reports a visibility timeout SQS would refuse: from 1s
// to 12h, in whole seconds.
func checkVisibility(d time.Duration) error {
	if d < time.Second || d > 12*time.Hour || d%time.Second != 0 {
		return fmt.Errorf("%s is not a whole number of seconds from 1s to 12h, as SQS's VisibilityTimeout", d)
	}
	return nil
}

// redriveLine describes a redrive's progress: a bar for a terminal,
// key=value pairs for logs.
func redriveLine(p *redrive.Progress, elapsed time.Duration, bar bool) string {
	total, done := p.Total.Load(), p.Done.Load()
	sent, skipped, failed := p.Sent.Load(), p.Skipped.Load(), p.Failed.Load()
	secs := max(elapsed.Seconds(), 0.001)
	frac, eta := progressOf(done, total, elapsed)
	if !bar {
		return fmt.Sprintf("total=%d done=%d sent=%d skipped=%d failed=%d msgs_per_s=%.0f eta=%s",
			total, done, sent, skipped, failed, float64(sent)/secs, eta)
	}
	return fmt.Sprintf("%s %d/%d sent %d skipped %d failed %d %.0f msg/s ETA %s ",
		progressBar(frac), done, total, sent, skipped, failed, float64(sent)/secs, eta)
}

// maxListed bounds the items not sent that the summary lists on stderr;
// stdout's JSON lists them all.
const maxListed = 20

// writeSummary writes the one-line account of a redrive and the items not
// sent, with their reasons.
func writeSummary(w io.Writer, s *redrive.Summary, messages bool, took time.Duration) {
	what := "records"
	if messages {
		what = "messages"
	}
	to := ""
	if s.To != "" {
		to = " to " + s.To
	}
	if s.DryRun {
		fmt.Fprintf(w, "s3sqs redrive: dry run: %d %s from %s%s: %d would be sent, %d skipped, %d would fail\n", s.Total, what, s.From, to, s.WouldSend, s.Skipped, s.Failed)
	} else {
		fmt.Fprintf(w, "s3sqs redrive: %d %s from %s%s: %d sent, %d skipped, %d failed in %s\n", s.Total, what, s.From, to, s.Sent, s.Skipped, s.Failed, took.Round(time.Millisecond))
	}
	if s.TasksQueued > 0 {
		fmt.Fprintf(w, "s3sqs redrive: %d tasks queued\n", s.TasksQueued)
	}
	if s.Left != nil {
		fmt.Fprintf(w, "s3sqs redrive: %s holds about %d messages now\n", s.From, *s.Left)
	}
	listed := 0
	for _, it := range s.Items {
		if it.Outcome != redrive.Skipped && it.Outcome != redrive.Failed {
			continue
		}
		if listed++; listed > maxListed {
			fmt.Fprintf(w, "  ... and more: the JSON on stdout lists them all\n")
			break
		}
		at := it.From
		if it.Source != "" && it.Offset != nil {
			at += fmt.Sprintf(" (%s offset %d", it.Source, *it.Offset)
			if it.Code != "" {
				at += ", " + it.Code
			}
			at += ")"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", it.Outcome, at, it.Reason)
	}
}
