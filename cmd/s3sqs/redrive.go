package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
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

// runRedrive sends failed work again: a run report's failed tasks, the
// failure output's records, or a DLQ's messages.
func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	fs := newFlags("redrive", redriveUsage, stderr)
	var (
		report, reportURI, runID   string
		fromQueue, fromS3, dlq, to string
		fromFile                   string
		native                     bool
		opts                       redrive.Options
		redriveRunID               string
		codes, skipCodes           string
		format, partitions         string
		useIngest, fileMetadata    bool
		pathStyle                  bool
		interval                   time.Duration
		visibility                 time.Duration
		rate                       int
	)
	fs.StringVar(&report, "report", "", "redrive the run report at `s3://bucket/prefix/RUNID/`")
	fs.StringVar(&reportURI, "report-s3-uri", "", "the run reports' `s3://bucket/prefix` (REPORT_S3_URI), with -run-id")
	fs.StringVar(&runID, "run-id", "", "the `run` whose report -report-s3-uri holds")
	fs.StringVar(&fromQueue, "from-queue", "", "redrive the failure queue at `URL` (FAILURE_QUEUE_URL)")
	fs.StringVar(&fromS3, "from-s3", "", "redrive the failure output under `s3://bucket/prefix` (FAILURE_S3_URI), or one .jsonl file")
	fs.StringVar(&fromFile, "from-file", "", "redrive the local failure file at `path` (fanout's -failure-file, by default s3sqs-failures-RUNID.jsonl)")
	fs.StringVar(&dlq, "dlq", "", "move the messages of the dead-letter queue at `URL` back")
	fs.StringVar(&to, "to", "", "with -dlq: the queue `URL` to move them to (default: the queue whose RedrivePolicy names the DLQ)")
	fs.BoolVar(&native, "native", false, "with -dlq: have SQS move them (StartMessageMoveTask) instead of this process")
	fs.StringVar(&opts.TargetQueueURL, "target-queue-url", "", "send records to the queue at `URL`: the failure output's, or a run report's in this process")
	fs.StringVar(&opts.WorkQueueURL, "work-queue-url", "", "send a run report's failed tasks to fanout's work queue at `URL`")
	fs.StringVar(&redriveRunID, "redrive-run-id", "", "name the `run` of a report's redriven tasks (default RUNID-redrive)")
	fs.StringVar(&codes, "code", "", "send only the records that failed with these comma-separated `codes`")
	fs.StringVar(&skipCodes, "skip-code", "", "send all records but those that failed with these comma-separated `codes`")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "send, delete and write nothing; list what would be sent")
	fs.BoolVar(&opts.Delete, "delete", false, "with -from-s3 or -from-file: delete each failure file once all its records are sent (default: keep it, with a .redriven marker)")
	fs.BoolVar(&opts.Reread, "reread", false, "read every failure output record again from its object, not only those without a whole body")
	fs.StringVar(&format, "format", "auto", "`format` of the objects records are read again from: auto, jsonl, csv, text or parquet")
	fs.StringVar(&opts.Mapping.BodyField, "body-field", "", "records read again: record `field` sent as the body, as fanout's -body-field")
	fs.StringVar(&opts.Mapping.AttributesField, "attributes-field", "", "records read again: record `field` of message attributes")
	fs.StringVar(&opts.Mapping.GroupIDField, "group-id-field", "", "records read again: record `field` of the FIFO group")
	fs.StringVar(&opts.Mapping.DedupIDField, "dedup-id-field", "", "records read again: record `field` of the FIFO deduplication id")
	fs.BoolVar(&useIngest, "ingest", false, "the failure output is s3ingest's: records carry only the record id, and records read again are encoded as s3ingest does")
	fs.StringVar(&partitions, "partitions", "true", "with -ingest: add the key's partition values: true, typed or false")
	fs.BoolVar(&fileMetadata, "file-metadata", true, "with -ingest: add the _file object")
	fs.IntVar(&rate, "rate", redrive.DefaultRate, "send at most `N` messages per second from the failure output or a DLQ (0: no limit)")
	fs.DurationVar(&visibility, "visibility-timeout", redrive.DefaultVisibility, "how long a received message stays hidden while this run holds it (`duration`)")
	fs.IntVar(&opts.Send.MaxAttempts, "max-attempts", sqsbatch.DefaultMaxAttempts, "`attempts` per message")
	fs.BoolVar(&opts.Send.ReplaceInvalidCharacters, "replace-invalid-characters", false, "replace the characters SQS rejects with U+FFFD, for records refused with InvalidCharacters")
	fs.BoolVar(&pathStyle, "s3-path-style", false, "path-style S3 addressing, for S3 stand-ins")
	fs.DurationVar(&interval, "progress-interval", 0, "`interval` of progress lines (default: live bar on a terminal, 5s lines otherwise)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	bad := usageError("redrive", stderr)
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// One source, and only the flags that apply to it.
	var sources []string
	for _, s := range []string{"report", "report-s3-uri", "from-queue", "from-s3", "from-file", "dlq"} {
		if set[s] {
			sources = append(sources, "-"+s)
		}
	}
	switch {
	case len(sources) == 0:
		return bad("name what to redrive: -report, -report-s3-uri with -run-id, -from-queue, -from-s3, -from-file or -dlq")
	case len(sources) > 1:
		return bad("name one source to redrive, not %s", strings.Join(sources, " and "))
	}
	source := strings.TrimPrefix(sources[0], "-")
	isReport := source == "report" || source == "report-s3-uri"
	isFailures := source == "from-queue" || source == "from-s3" || source == "from-file"
	only := func(flags []string, applies bool, where string) (int, bool) {
		for _, f := range flags {
			if set[f] && !applies {
				return bad("-%s applies %s only", f, where), false
			}
		}
		return 0, true
	}
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
		{[]string{"partitions", "file-metadata"}, useIngest, "with -ingest"},
		{[]string{"rate"}, !isReport, "to the failure output and a DLQ"},
		{[]string{"visibility-timeout"}, source == "from-queue" || source == "dlq" && !native, "to a queue received here (-from-queue, -dlq)"},
	} {
		if code, ok := only(rule.flags, rule.applies, rule.where); !ok {
			return code
		}
	}
	switch {
	case source == "report-s3-uri" && runID == "":
		return bad("-report-s3-uri needs -run-id: the run whose report to redrive")
	case isReport && (opts.WorkQueueURL == "") == (opts.TargetQueueURL == ""):
		return bad("send a run report's failures to -work-queue-url (the deployed fanout runs the tasks) or to -target-queue-url (this process reads the failed records again), one of them")
	case isFailures && opts.TargetQueueURL == "":
		return bad("name the queue the failure output's records go to: -target-queue-url")
	case set["code"] && set["skip-code"]:
		return bad("give -code or -skip-code, not both")
	}

	// Each value goes through the check its setting has everywhere.
	var checks []check
	for _, q := range []struct{ flag, url string }{
		{"-from-queue", fromQueue}, {"-dlq", dlq}, {"-to", to}, {"-target-queue-url", opts.TargetQueueURL}, {"-work-queue-url", opts.WorkQueueURL},
	} {
		if q.url != "" {
			checks = append(checks, check{q.flag, fanout.CheckQueueURL(q.url)})
		}
	}
	switch source {
	case "report":
		checks = append(checks, check{"-report", func() error { _, _, _, err := redrive.ParseReportURI(report); return err }()})
	case "report-s3-uri":
		checks = append(checks, check{"-report-s3-uri", func() error { _, _, err := dataset.ParseS3URI(reportURI); return err }()},
			check{"-run-id", fanout.CheckRunID(runID)})
		report = redrive.ReportURI(reportURI, runID)
	case "from-s3":
		checks = append(checks, check{"-from-s3", func() error { _, _, err := dataset.ParseS3URI(fromS3); return err }()})
	}
	if redriveRunID != "" {
		checks = append(checks, check{"-redrive-run-id", fanout.CheckRunID(redriveRunID)})
		opts.RunID = redriveRunID
	}
	if codes != "" || set["code"] {
		checks = append(checks, check{"-code", func() (err error) { opts.Codes.Only, err = redrive.ParseCodes(codes); return }()})
	}
	if skipCodes != "" || set["skip-code"] {
		checks = append(checks, check{"-skip-code", func() (err error) { opts.Codes.Skip, err = redrive.ParseCodes(skipCodes); return }()})
	}
	checks = append(checks,
		check{"-format", func() (err error) { opts.Format, err = dataset.ParseFormat(format); return }()},
		check{"-max-attempts", fanout.CheckMaxAttempts(int64(opts.Send.MaxAttempts))},
		check{"-rate", checkRate(rate, native)},
		check{"-visibility-timeout", checkVisibility(visibility)},
	)
	if useIngest {
		enc := &fanout.IngestEncoding{FileMetadata: fileMetadata}
		checks = append(checks, check{"-partitions", func() (err error) { enc.Partitions, err = ingesthandler.ParsePartitions(partitions); return }()})
		opts.Ingest = enc
	}
	if msg, ok := firstBad(checks); ok {
		return bad("%s", msg)
	}
	opts.Rate, opts.Visibility = rate, visibility

	// The run has started: from here on, stdout gets a summary, empty
	// when the run fails before it finds anything.
	flags := map[string]string{fanout.RoleTarget: "-target-queue-url", fanout.RoleWork: "-work-queue-url", fanout.RoleFailure: "-from-queue", fanout.RoleDeadLetter: "-dlq"}
	if source == "dlq" {
		flags[fanout.RoleTarget] = "-to"
		if to == "" {
			flags[fanout.RoleTarget] = "the queue whose RedrivePolicy names -dlq"
		}
	}
	failed := func(err error) int {
		printJSON(stdout, redrive.Summary{From: cmp.Or(report, fromQueue, fromS3, fromFile, dlq), To: cmp.Or(opts.TargetQueueURL, opts.WorkQueueURL, to), Items: []redrive.Item{}})
		fmt.Fprintf(stderr, "s3sqs redrive: %v\n", queueFlagError(err, flags, ""))
		return 1
	}
	s3c, sqsc, err := lambdaenv.Clients(ctx, pathStyle)
	if err != nil {
		return failed(err)
	}
	opts.Progress = &redrive.Progress{}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Send.Logger = nil
	opts.IngestEncoder = ingesthandler.EncodeRecords
	r, err := redrive.New(ctx, s3c, sqsc, opts)
	if err != nil {
		return failed(err)
	}

	done := make(chan struct{})
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		showProgress(stderr, func(elapsed time.Duration, bar bool) string { return redriveLine(opts.Progress, elapsed, bar) }, tty, interval, done)
	}()
	start := time.Now()
	var sum *redrive.Summary
	switch source {
	case "report", "report-s3-uri":
		sum, err = r.Report(ctx, report)
	case "from-queue":
		sum, err = r.FailureQueue(ctx, fromQueue)
	case "from-s3":
		sum, err = r.FailureS3(ctx, fromS3)
	case "from-file":
		sum, err = r.FailureFile(ctx, fromFile)
	case "dlq":
		sum, err = r.DLQ(ctx, dlq, to, native)
	}
	close(done)
	<-shown
	printJSON(stdout, sum)
	writeSummary(stderr, sum, source == "dlq", time.Since(start))
	var noSource *redrive.SourceError
	switch {
	case errors.As(err, &noSource) && noSource.Err == nil:
		return bad("%v: name the queue to move them to with -to", err)
	case err != nil:
		fmt.Fprintf(stderr, "s3sqs redrive: %v\n", queueFlagError(err, flags, ""))
		return 1
	case sum.Failed > 0:
		return 1
	}
	return 0
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
		fmt.Fprintf(w, "s3sqs redrive: dry run: %d %s from %s%s: %d would be sent, %d skipped\n", s.Total, what, s.From, to, s.WouldSend, s.Skipped)
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
