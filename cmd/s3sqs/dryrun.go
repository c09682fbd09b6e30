package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

// dryRunCmd is what fanout's -dry-run and its estimate's flags give.
type dryRunCmd struct {
	on   bool
	opts engine.DryRunOptions
}

// dryRunFlagNames are the flags that only a dry run reads.
var dryRunFlagNames = []string{"sample-chunks", "invocations", "memory-mb", "records-per-second", "sqs-price", "lambda-price"}

// dryRunFlags defines -dry-run and the flags of its sample and estimate.
func dryRunFlags(fs *cmdFlags, d *dryRunCmd) {
	o := &d.opts
	fs.BoolVar(&d.on, "dry-run", false, "plan the run and count what it would send, sending and writing nothing; prints the counts and an estimate of its time and cost")
	fs.IntVar(&o.SampleChunks, "sample-chunks", engine.DefaultSampleChunks, "with -dry-run: chunks to read; a dataset of at most `n` chunks is counted exactly, a larger one estimated from n chosen at random")
	fs.IntVar(&o.Invocations, "invocations", engine.DefaultInvocations, "with -dry-run: `n` concurrent invocations of the function that would send a run queued on the work queue")
	fs.IntVar(&o.MemoryMB, "memory-mb", engine.DefaultMemoryMB, "with -dry-run: the function's memory in `MB`, for its share of a vCPU and its GB-seconds")
	fs.Float64Var(&o.RecordsPerSecond, "records-per-second", 0, "with -dry-run: `records` a second one invocation of one vCPU sends (default: the measured rate of the mode, 34100 record, 105689 chunk)")
	fs.Float64Var(&o.SQSPrice, "sqs-price", 0, "with -dry-run: your SQS `price` per million requests, to price the run")
	fs.Float64Var(&o.LambdaPrice, "lambda-price", 0, "with -dry-run: your Lambda `price` per GB-second, to price the run")
}

// check refuses a dry run's flags without -dry-run and options out of
// their range, naming the flag.
func (d *dryRunCmd) check(given map[string]bool) (string, bool) {
	if !d.on {
		for _, name := range dryRunFlagNames {
			if given[name] {
				return fmt.Sprintf("-%s applies with -dry-run", name), true
			}
		}
		return "", false
	}
	if err := d.opts.Validate(); err != nil {
		// dryRunOptions.memoryMB: ... names the flag instead.
		field, reason, _ := strings.Cut(strings.TrimPrefix(err.Error(), "dryRunOptions."), ": ")
		flags := map[string]string{"sampleChunks": "sample-chunks", "invocations": "invocations", "memoryMB": "memory-mb",
			"recordsPerSecond": "records-per-second", "sqsPrice": "sqs-price", "lambdaPrice": "lambda-price"}
		return fmt.Sprintf("-%s: %s", flags[field], reason), true
	}
	return "", false
}

// dryRun runs a dry run of the request, prints its report as JSON on
// stdout and a summary on stderr, and returns the exit code.
func (c *fanoutCmd) dryRun(ctx context.Context, runner *engine.Runner, stdout, stderr io.Writer, tty bool) int {
	stop := showProgress(stderr, func(elapsed time.Duration, bar bool) string { return dryRunLine(c.opts.Progress, elapsed, bar) }, tty, c.interval)
	o := c.dry.opts
	o.Queue = c.queue()
	rep, err := runner.DryRun(ctx, c.req, o)
	stop()
	if d := rep.DryRun; d != nil && !d.Queued {
		// Sent from this process, the run uses no function: its estimate
		// has no invocations, Lambda time or Lambda cost.
		e := &d.Estimate
		e.Invocations, e.MemoryMB, e.InvocationSeconds, e.GBSeconds, e.LambdaCost = 0, 0, 0, 0, 0
	}
	printJSON(stdout, rep)
	if c.refused(stderr, rep, err) {
		return 1
	}
	fmt.Fprint(stderr, dryRunSummary(rep, c.dry.opts))
	return 0
}

// dryRunLine describes a dry run's progress: planning, then the chunks
// read.
func dryRunLine(p *engine.Progress, elapsed time.Duration, bar bool) string {
	objs, chunks, planned, recs := p.ObjectsPlanned.Load(), p.TasksPlanned.Load(), p.BytesPlanned.Load(), p.RecordsRead.Load()
	if !bar {
		return fmt.Sprintf("dry_run objects=%d planned_mb=%.1f tasks=%d records_read=%d elapsed=%s", objs, float64(planned)/1e6, chunks, recs, elapsed.Round(time.Second))
	}
	return fmt.Sprintf("dry run: %d objects, %.1f MB, %d tasks planned; %d records read ", objs, float64(planned)/1e6, chunks, recs)
}

// failureShare says what share of the records would fail, and why, by
// the commonest codes of the sample: a wrong -format shows here before
// anything is sent.
func failureShare(d *engine.DryRun) string {
	if d.Failed == 0 || d.Records == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f%% of the records; in the chunks read: %s)", 100*float64(d.Failed)/float64(d.Records), engine.FailureCodes(d.FailureCodes, 3))
}

// dryRunSummary is a dry run's account for a person.
func dryRunSummary(rep engine.Report, o engine.DryRunOptions) string {
	d, e := rep.DryRun, rep.DryRun.Estimate
	var b strings.Builder
	fmt.Fprintf(&b, "s3sqs fanout: dry run of run %s: nothing was sent; counts %s\n", rep.RunID, d.Counted)
	how := "sent from here"
	if d.Queued {
		how = fmt.Sprintf("queued on the work queue in %d SendMessageBatch requests (%d billed)", d.WorkRequests, d.WorkBilledRequests)
	}
	fmt.Fprintf(&b, "  dataset:  %d objects, %s, %d chunks, %d tasks, %s\n", d.Objects, megabytes(d.Bytes), d.Chunks, d.Tasks, how)
	if rep.ObjectsFiltered > 0 {
		fmt.Fprintf(&b, "  filtered: %d objects, %s, left out by the filters: %s\n", rep.ObjectsFiltered, megabytes(rep.BytesFiltered), filteredBy(rep.FilteredBy))
	}
	if rep.ObjectsArchived > 0 {
		fmt.Fprintf(&b, "  archived: %d objects, %s, not read (GLACIER, DEEP_ARCHIVE or an archive tier): restore them, then send them in a new run\n", rep.ObjectsArchived, megabytes(rep.BytesArchived))
	}
	fmt.Fprintf(&b, "  target:   %d records in %d messages, %d SendMessageBatch requests, %d billed (64 KiB each)\n", d.Records, d.Messages, d.Requests, d.BilledRequests)
	fmt.Fprintf(&b, "  records:  %d offloaded to S3, %d to the failure output%s\n", d.Offloaded, d.Failed, failureShare(d))
	if d.WouldStop != "" {
		fmt.Fprintf(&b, "  budget:   the run would stop itself: %s; fix the setting, or set -max-failures\n", d.WouldStop)
	}
	took := (time.Duration(e.Seconds * float64(time.Second))).Round(time.Millisecond)
	if !d.Queued {
		// Sent from this process: no function runs, so no Lambda time.
		fmt.Fprintf(&b, "  estimate: %s sending from this process at about %.0f records/s (one vCPU); no Lambda time: the run does not use the function", took, e.RecordsPerSecond)
	} else {
		inv := "invocations"
		if e.Invocations == 1 {
			inv = "invocation"
		}
		fmt.Fprintf(&b, "  estimate: %s at %d %s of %d MB (%.0f records/s each): %.1f invocation-seconds, %.2f GB-s",
			took, e.Invocations, inv, e.MemoryMB, e.RecordsPerSecond, e.InvocationSeconds, e.GBSeconds)
	}
	if e.MaxRate > 0 {
		fmt.Fprintf(&b, ", paced at %d messages/s", e.MaxRate)
	}
	if e.PlanSeconds > 0 {
		fmt.Fprintf(&b, ", after %s of planning", (time.Duration(e.PlanSeconds * float64(time.Second))).Round(time.Millisecond))
	}
	b.WriteString("\n")
	switch {
	case !d.Queued && o.SQSPrice > 0:
		fmt.Fprintf(&b, "  cost:     SQS $%.6f (at $%g per million requests)\n", e.SQSCost, o.SQSPrice)
	case d.Queued && (o.SQSPrice > 0 || o.LambdaPrice > 0):
		fmt.Fprintf(&b, "  cost:     SQS $%.6f (at $%g per million requests), Lambda $%.6f (at $%g per GB-s)\n", e.SQSCost, o.SQSPrice, e.LambdaCost, o.LambdaPrice)
	}
	return b.String()
}
