package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

const statusUsage = `usage: s3sqs status -run-id RUN -claims-table TABLE [flags]

Shows how far a fanout run is, from what its functions keep in the claims
table: its state, tasks planned, done, in progress and failed, planning
steps left, records and bytes, the current rate, an estimate of the time
left, and where its failures are. Works for runs started by a request, the
CLI or a driver, whenever their functions have CLAIMS_TABLE. -watch shows
it again every -every until the run is done or cancelled (or Ctrl-C);
-json prints it as a JSON object (with -watch, one line per refresh).`

// statusCmd is the command line of s3sqs status.
type statusCmd struct {
	flags *cmdFlags
	run   runFlags
	// out is where the run's failures go, as the flags say.
	out         failureOutput
	jsonOut     bool
	watch       bool
	every       time.Duration
	reportS3URI string
}

// runStatus shows a run's status: it reads the run, once or every -every
// with -watch.
func runStatus(ctx context.Context, args []string, s streams) int {
	stdout, stderr := s.stdout, s.stderr
	c := newStatusCmd(stderr)
	if code, ok := c.parse(args, usageError("status", stderr)); !ok {
		return code
	}
	runs, err := c.run.open(ctx)
	if err == nil {
		err = c.show(ctx, runs, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs status: %v\n", err)
		return 1
	}
	return 0
}

// newStatusCmd defines status's flags.
func newStatusCmd(stderr io.Writer) *statusCmd {
	c := &statusCmd{flags: newCmdFlags("status", statusUsage, stderr)}
	fs := c.flags
	c.run.define(fs, "show")
	fs.BoolVar(&c.jsonOut, "json", false, "print the status as a JSON object (with -watch, JSON Lines)")
	fs.BoolVar(&c.watch, "watch", false, "show it again every -every until the run is done or cancelled")
	fs.DurationVar(&c.every, "every", 5*time.Second, "with -watch: the `interval` between reads")
	fs.text(settings.FailureQueueURL, &c.out.QueueURL, "the run's failure queue `URL` (the function's FAILURE_QUEUE_URL), to say where refused records are")
	fs.text(settings.FailureS3URI, &c.out.S3URI, "the run's failure output `s3://bucket/prefix` (FAILURE_S3_URI), to say where refused records are")
	fs.text(settings.ReportS3URI, &c.reportS3URI, "the run reports' `s3://bucket/prefix` (REPORT_S3_URI), to say where the failed ranges are")
	return c
}

// parse reads the command line and checks it; it returns the exit code
// when the command cannot go on.
func (c *statusCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	if code, ok := c.run.parse(c.flags, args, bad); !ok {
		return code, false
	}
	switch {
	case c.flags.given()["every"] && !c.watch:
		return bad("-every applies with -watch only"), false
	case c.every <= 0:
		return bad("-every: %s is not a positive interval", c.every), false
	}
	if c.reportS3URI != "" {
		c.out.Report = redrive.ReportURI(c.reportS3URI, c.run.runID)
	}
	return 0, true
}

// rateWindow is how far back a watch measures the current rate: the
// tasks add their counts as they settle, a chunk at a time, so that the
// counts move in steps that one refresh to the next would show as bursts
// and stops.
const rateWindow = time.Minute

// show reads the run and prints its status, again every c.every with
// -watch until the run is done or cancelled, or ctx ends (which is not an
// error: it is how a watch is stopped).
func (c *statusCmd) show(ctx context.Context, runs *runstate.Table, w io.Writer) error {
	// reads are the earlier reads of a watch within rateWindow, oldest
	// first, and the last one before them.
	var reads []runView
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		run, err := c.run.get(ctx, runs)
		if err != nil {
			if len(reads) > 0 && ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Now()
		reads = recent(reads, now)
		var since *runView
		if len(reads) > 0 {
			since = &reads[0]
		}
		v := viewOf(run, since, now)
		v.Failures = c.out
		c.print(w, v)
		if !c.watch || v.Done || v.State == runstate.StateCancelled {
			return nil
		}
		reads = append(reads, v)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// print writes one refresh: a block of text lines, or a JSON object
// (one line of JSON Lines with -watch).
func (c *statusCmd) print(w io.Writer, v runView) {
	switch {
	case c.jsonOut && c.watch:
		line, _ := json.Marshal(v)
		fmt.Fprintf(w, "%s\n", line)
	case c.jsonOut:
		printJSON(w, v)
	default:
		writeStatus(w, v)
		if c.watch {
			fmt.Fprintln(w)
		}
	}
}

// failureOutput says where a run's failures are, as the command line
// names them.
type failureOutput struct {
	// QueueURL and S3URI are the failure output's, which holds the refused
	// records.
	QueueURL string `json:"failureQueueUrl,omitempty"`
	S3URI    string `json:"failureS3Uri,omitempty"`
	// Report is the run's report, s3://bucket/prefix/RUNID/, whose
	// failed/ objects name the failed ranges.
	Report string `json:"report,omitempty"`
}

// Where a run's rate is measured.
const (
	rateSinceStart = "sinceStart"
	rateRecent     = "recent"
)

// runView is a run as status shows it: the record the functions keep, and
// what follows from it. It is JSON as -json prints it.
type runView struct {
	runstate.Run
	// ReadAt is when the record was read.
	ReadAt time.Time `json:"readAt"`
	// TasksInProgress are the planned tasks (chunks) not done nor parked:
	// running, on the work queue (held ones too), failed and to be
	// delivered again, or in the work DLQ. The claims store makes each
	// chunk done once, however often its task is delivered.
	TasksInProgress int64 `json:"tasksInProgress"`
	// TasksParkedNow are the tasks a cancel parked that no resume has put
	// back yet.
	TasksParkedNow int64 `json:"tasksParkedNow"`
	// StepsLeft are the planning steps queued and not done.
	StepsLeft int64 `json:"stepsLeft"`
	// Done reports that the run has planned tasks, and every one is done,
	// none parked, and no planning step is left.
	Done bool `json:"done"`
	// MessagesPerSecond and BytesPerSecond are the run's rates over
	// RateOver: since an earlier read of a watch, up to rateWindow ago
	// (rateRecent), or on average since the run started (rateSinceStart).
	MessagesPerSecond float64 `json:"messagesPerSecond"`
	BytesPerSecond    float64 `json:"bytesPerSecond"`
	RateOver          string  `json:"rateOver"`
	// Over is how long RateOver lasted.
	Over time.Duration `json:"-"`
	// SecondsLeft estimates the time left from the bytes left at
	// BytesPerSecond; nil when it cannot be estimated.
	SecondsLeft *float64 `json:"secondsLeft"`
	// Failures says where the run's failures are.
	Failures failureOutput `json:"failures"`
}

// recent returns reads, the earlier reads of a watch oldest first, from
// the last one read rateWindow or more before now.
func recent(reads []runView, now time.Time) []runView {
	for len(reads) > 1 && now.Sub(reads[1].ReadAt) >= rateWindow {
		reads = reads[1:]
	}
	return reads
}

// viewOf derives what status shows of run, read at now; since is the
// earlier read of a watch to measure the rate from, nil for the first.
func viewOf(run runstate.Run, since *runView, now time.Time) runView {
	run.State = cmp.Or(run.State, runstate.StateRunning)
	v := runView{Run: run, ReadAt: now}
	v.TasksParkedNow = max(run.Parked-run.Unparked, 0)
	v.TasksInProgress = max(run.TasksPlanned-run.TasksDone-v.TasksParkedNow, 0)
	v.StepsLeft = max(run.StepsQueued-run.StepsDone, 0)
	v.Done = run.TasksPlanned > 0 && v.TasksInProgress == 0 && v.TasksParkedNow == 0 && v.StepsLeft == 0

	msgs, bytes := run.Messages, run.BytesRead
	v.RateOver = rateSinceStart
	from, to := run.Started, now
	if v.Done || run.State != runstate.StateRunning {
		// Nothing moves after the run's last write: the average is over
		// the time it ran.
		to = run.Updated
	}
	if since != nil {
		v.RateOver = rateRecent
		from, to = since.ReadAt, now
		msgs, bytes = run.Messages-since.Messages, run.BytesRead-since.BytesRead
	}
	if !from.IsZero() && to.After(from) {
		v.Over = to.Sub(from)
		v.MessagesPerSecond = float64(max(msgs, 0)) / v.Over.Seconds()
		v.BytesPerSecond = float64(max(bytes, 0)) / v.Over.Seconds()
	}

	left := max(run.BytesPlanned-run.BytesRead, 0)
	switch {
	case v.Done:
		v.SecondsLeft = new(float64)
	case run.State == runstate.StateRunning && v.BytesPerSecond > 0:
		s := float64(left) / v.BytesPerSecond
		v.SecondsLeft = &s
	}
	return v
}

// writeStatus writes v as a block of lines, the first naming the run and
// where it stands.
func writeStatus(w io.Writer, v runView) {
	fmt.Fprintf(w, "run %s at %s: %s\n", v.ID, v.ReadAt.UTC().Format(time.RFC3339), phase(v))
	state := string(v.State)
	if v.Done && v.State == runstate.StateRunning {
		// Running is the run's control (not paused, not cancelled), which
		// a finished run keeps: it is done.
		state = "done"
	}
	if v.MaxRate > 0 {
		state += fmt.Sprintf(", max rate %d messages/s", v.MaxRate)
	}
	if v.MaxFailures != "" {
		state += ", max failures " + v.MaxFailures
	}
	if v.MaxFailedObjects != "" {
		state += ", max failed objects " + v.MaxFailedObjects
	}
	fmt.Fprintf(w, "  state      %s\n", state)
	if v.Reason != "" {
		fmt.Fprintf(w, "  stopped    %s; fix the setting (or raise -max-failures), then s3sqs resume\n", v.Reason)
	}
	if len(v.FailureCodes) > 0 {
		fmt.Fprintf(w, "  failed by  %s\n", engine.FailureCodes(v.FailureCodes, 0))
	}
	fmt.Fprintf(w, "  tasks      %d planned: %d done, %d in progress, %d parked by a cancel\n", v.TasksPlanned, v.TasksDone, v.TasksInProgress, v.TasksParkedNow)
	fmt.Fprintf(w, "  deliveries %d failed, %d skipped (done before), %d held (put back)", v.TasksFailed, v.TasksSkipped, v.TasksHeld)
	if v.TasksStopped > 0 {
		fmt.Fprintf(w, ", %d stopped by a cancel or the failure budget (not parked: the run had no work queue)", v.TasksStopped)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  planning   %d steps left (%d queued, %d done)\n", v.StepsLeft, v.StepsQueued, v.StepsDone)
	fmt.Fprintf(w, "  records    %d read, %d sent, %d failed, %d offloaded (%d messages in %d requests)\n",
		v.RecordsRead, v.RecordsSent, v.RecordsFailed, v.RecordsOffloaded, v.Messages, v.Requests)
	fmt.Fprintf(w, "  bytes      %s read of %s planned (%s), %d objects\n", megabytes(v.BytesRead), megabytes(v.BytesPlanned), percent(v.BytesRead, v.BytesPlanned), v.Objects)
	if v.ObjectsFiltered > 0 {
		fmt.Fprintf(w, "  filtered   %d objects, %s, left out by the filters: %s\n", v.ObjectsFiltered, megabytes(v.BytesFiltered), filteredBy(v.FilteredBy))
	}
	if v.ObjectsArchived > 0 {
		fmt.Fprintf(w, "  archived   %d objects, %s, left out when planned (not read; restored, a new run sends them)\n", v.ObjectsArchived, megabytes(v.BytesArchived))
	}
	fmt.Fprintf(w, "  rate       %s\n", rateLine(v))
	fmt.Fprintf(w, "  time left  %s\n", timeLeft(v))
	for i, line := range failureLines(v) {
		label := "failures  "
		if i > 0 {
			label = "          "
		}
		fmt.Fprintf(w, "  %s %s\n", label, line)
	}
}

// phase says where the run stands in a word or two.
func phase(v runView) string {
	switch {
	case v.State == runstate.StateCancelled && v.Reason != "":
		return "stopped itself"
	case v.State == runstate.StateCancelled:
		return "cancelled"
	case v.State == runstate.StatePaused:
		return "paused"
	case v.Done:
		return "done"
	case v.TasksPlanned == 0:
		return "planning"
	}
	return "in progress"
}

// rateLine says the run's rate and what it was measured over.
func rateLine(v runView) string {
	rate := fmt.Sprintf("%.0f messages/s, %s/s", v.MessagesPerSecond, megabytes(int64(v.BytesPerSecond)))
	switch {
	case v.Over == 0:
		return rate + " (no time measured yet)"
	case v.RateOver == rateRecent:
		return rate + " (over the last " + rounded(v.Over) + ")"
	}
	return rate + " (average since the run started, over " + rounded(v.Over) + ")"
}

// timeLeft says the estimate of the time left, or why there is none.
func timeLeft(v runView) string {
	more := ""
	if v.StepsLeft > 0 {
		more = "; planning goes on, so more may come"
	}
	switch {
	case v.Done:
		return "none: the run is done"
	case v.State != runstate.StateRunning:
		return "unknown: the run is " + string(v.State)
	case v.SecondsLeft == nil && v.RateOver == rateRecent:
		return "unknown: nothing was read in the last " + rounded(v.Over) + more
	case v.SecondsLeft == nil:
		return "unknown: nothing was read yet" + more
	}
	left := time.Duration(*v.SecondsLeft * float64(time.Second))
	return fmt.Sprintf("about %s (%s left at %s/s)%s", rounded(left), megabytes(max(v.BytesPlanned-v.BytesRead, 0)), megabytes(int64(v.BytesPerSecond)), more)
}

// failureLines say how much failed and where it is: the failure output
// and the run report the command line names, or where the functions'
// settings put them.
func failureLines(v runView) []string {
	if v.TasksFailed == 0 && v.RecordsFailed == 0 {
		return []string{"none"}
	}
	lines := []string{fmt.Sprintf("%d records and %d task deliveries failed (a failed delivery comes back until the work queue's maxReceiveCount, then waits in its DLQ)", v.RecordsFailed, v.TasksFailed)}
	out := v.Failures
	if out.QueueURL != "" {
		lines = append(lines, "refused records: on the failure queue "+out.QueueURL+" (s3sqs redrive -from-queue "+out.QueueURL+")")
	}
	if out.S3URI != "" {
		lines = append(lines, "refused records: under "+out.S3URI+" (s3sqs redrive -from-s3 "+out.S3URI+")")
	}
	if out.Report != "" {
		lines = append(lines, "failed ranges: the run report's "+out.Report+"failed/ (TASKID-FROM.json per failed attempt; s3sqs redrive -report "+out.Report+")")
	}
	if out == (failureOutput{}) {
		lines = append(lines, "refused records are in the functions' failure output (FAILURE_QUEUE_URL or FAILURE_S3_URI), and with REPORT_S3_URI",
			"the run report REPORT_S3_URI/"+v.ID+"/failed/ names the failed ranges: -failure-queue-url, -failure-s3-uri and -report-s3-uri name them here")
	}
	return lines
}

// rounded writes d to the second, or to the millisecond below a second.
func rounded(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// megabytes writes n bytes in MB, as fanout's progress does, or in kB
// below a megabyte, so that a small run's bytes and rate do not read 0.0.
func megabytes(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// percent writes part's share of whole, "-" when whole is 0.
func percent(part, whole int64) string {
	switch {
	case whole <= 0:
		return "-"
	case part > whole:
		// Deliveries that read a chunk again (a retry, a redelivery, a
		// resumed task's overlap) count their bytes again.
		return "100%, and " + megabytes(part-whole) + " read again by retried tasks"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
}
