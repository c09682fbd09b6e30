package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// t0 is when the runs of the tests below started.
var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// TestViewOf holds the derived fields to the counters: what is in
// progress, the steps left, when a run is done, the rate and over what it
// is measured, and the time left.
func TestViewOf(t *testing.T) {
	run := runstate.Run{ID: "r", State: runstate.StateRunning, Started: t0, Updated: t0.Add(50 * time.Second),
		Parked: 3, Unparked: 1, Counters: runstate.Counters{
			TasksPlanned: 20, TasksDone: 10, TasksFailed: 1, TasksSkipped: 2, TasksHeld: 4,
			StepsQueued: 5, StepsDone: 3, BytesPlanned: 10_000_000, BytesRead: 4_000_000, Messages: 6000,
		}}
	v := viewOf(run, nil, t0.Add(60*time.Second))
	// 20 - 10 - (3 parked - 1 put back); failed, skipped and held
	// deliveries are of tasks still in progress or done.
	if v.TasksInProgress != 8 || v.TasksParkedNow != 2 || v.StepsLeft != 2 || v.Done {
		t.Errorf("in progress %d, parked now %d, steps left %d, done %v; want 8, 2, 2, false", v.TasksInProgress, v.TasksParkedNow, v.StepsLeft, v.Done)
	}
	// A running run's average runs to now, not to its last write.
	if v.RateOver != rateSinceStart || v.Over != time.Minute || v.MessagesPerSecond != 100 || v.BytesPerSecond != 4_000_000.0/60 {
		t.Errorf("rate %v msg/s, %v B/s over %s (%s); want 100 and 66,667 over 1m since the start", v.MessagesPerSecond, v.BytesPerSecond, v.Over, v.RateOver)
	}
	if v.SecondsLeft == nil || *v.SecondsLeft != 90 {
		t.Errorf("seconds left %v; want 90 (6 MB at 66,667 B/s)", v.SecondsLeft)
	}

	// A later read of a watch: the rate is since the earlier one.
	next := run
	next.Messages, next.BytesRead = 7000, 7_000_000
	w := viewOf(next, &v, v.ReadAt.Add(10*time.Second))
	if w.RateOver != rateRecent || w.Over != 10*time.Second || w.MessagesPerSecond != 100 || w.BytesPerSecond != 300_000 || *w.SecondsLeft != 10 {
		t.Errorf("watch: %v msg/s, %v B/s over %s (%s), %v s left; want 100, 300,000 over the 10s since the earlier read, 10 s", w.MessagesPerSecond, w.BytesPerSecond, w.Over, w.RateOver, *w.SecondsLeft)
	}
	// Nothing read since: no estimate.
	if still := viewOf(next, &w, w.ReadAt.Add(5*time.Second)); still.SecondsLeft != nil || still.BytesPerSecond != 0 {
		t.Errorf("nothing moved: %v B/s, %v s left; want 0 and unknown", still.BytesPerSecond, still.SecondsLeft)
	}

	for _, tc := range []struct {
		name string
		edit func(*runstate.Run)
		done bool
	}{
		{"all done", func(r *runstate.Run) { r.TasksDone, r.StepsDone, r.Parked, r.Unparked = 20, 5, 0, 0 }, true},
		{"one failed, not yet done", func(r *runstate.Run) { r.TasksDone, r.StepsDone, r.Parked, r.Unparked = 19, 5, 0, 0 }, false},
		{"stopped by a cancel", func(r *runstate.Run) { r.TasksDone, r.TasksStopped, r.StepsDone, r.Parked = 9, 11, 5, 0 }, false},
		{"more done than planned (counts cut at 0)", func(r *runstate.Run) { r.TasksDone, r.StepsDone, r.Parked = 30, 5, 0 }, true},
		{"a step left", func(r *runstate.Run) { r.TasksDone, r.StepsDone, r.Parked, r.Unparked = 20, 4, 0, 0 }, false},
		{"tasks parked", func(r *runstate.Run) { r.TasksDone, r.StepsDone, r.Parked, r.Unparked = 18, 5, 2, 0 }, false},
		{"nothing planned yet", func(r *runstate.Run) { r.Counters, r.Parked, r.Unparked = runstate.Counters{}, 0, 0 }, false},
	} {
		r := run
		tc.edit(&r)
		v := viewOf(r, nil, t0.Add(time.Hour))
		if v.Done != tc.done || v.TasksInProgress < 0 {
			t.Errorf("%s: done %v, in progress %d; want done %v", tc.name, v.Done, v.TasksInProgress, tc.done)
		}
		if tc.done && (v.SecondsLeft == nil || *v.SecondsLeft != 0 || v.Over != 50*time.Second) {
			t.Errorf("%s: %v s left, rate over %s; want 0, and the average over the 50 s to the last write", tc.name, v.SecondsLeft, v.Over)
		}
	}

	// A paused run has no estimate, and its state defaults to running.
	paused := run
	paused.State = runstate.StatePaused
	if v := viewOf(paused, nil, t0.Add(time.Hour)); v.SecondsLeft != nil || v.Over != 50*time.Second {
		t.Errorf("paused: %v s left, over %s; want unknown, over the time to its last write", v.SecondsLeft, v.Over)
	}
	if v := viewOf(runstate.Run{ID: "r"}, nil, t0); v.State != runstate.StateRunning || v.Over != 0 || v.SecondsLeft != nil {
		t.Errorf("empty run: state %q, over %s, %v s left", v.State, v.Over, v.SecondsLeft)
	}
}

// TestRecent: a watch measures its rate from the last read a minute or
// more ago, or from its first read before a minute has passed.
func TestRecent(t *testing.T) {
	var reads []runView
	for i := range 20 {
		reads = append(reads, runView{ReadAt: t0.Add(time.Duration(i) * 5 * time.Second)})
	}
	for _, tc := range []struct {
		name  string
		reads []runView
		now   time.Time
		first time.Time
	}{
		{"none", nil, t0, time.Time{}},
		{"one, long ago", reads[:1], t0.Add(time.Hour), t0},
		{"within the minute", reads[:5], t0.Add(25 * time.Second), t0},
		{"past the minute", reads, t0.Add(100 * time.Second), t0.Add(40 * time.Second)},
		{"exactly a minute", reads, t0.Add(105 * time.Second), t0.Add(45 * time.Second)},
	} {
		got := recent(tc.reads, tc.now)
		switch {
		case len(tc.reads) == 0 && len(got) != 0:
			t.Errorf("%s: %d reads", tc.name, len(got))
		case len(tc.reads) > 0 && (len(got) == 0 || !got[0].ReadAt.Equal(tc.first)):
			t.Errorf("%s: from %v; want %s", tc.name, got, tc.first)
		}
	}
}

func TestTimeLeft(t *testing.T) {
	secs := func(f float64) *float64 { return &f }
	base := runView{Run: runstate.Run{State: runstate.StateRunning, Counters: runstate.Counters{BytesPlanned: 10_000_000, BytesRead: 4_000_000}}, BytesPerSecond: 50_000, Over: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*runView)
		want string
	}{
		{"estimate", func(v *runView) { v.SecondsLeft = secs(120.4) }, "about 2m0s (6.0 MB left at 50.0 kB/s)"},
		{"planning goes on", func(v *runView) { v.SecondsLeft, v.StepsLeft = secs(3), 2 }, "about 3s (6.0 MB left at 50.0 kB/s); planning goes on, so more may come"},
		{"done", func(v *runView) { v.Done, v.SecondsLeft = true, secs(0) }, "none: the run is done"},
		{"paused", func(v *runView) { v.State = runstate.StatePaused }, "unknown: the run is paused"},
		{"nothing read", func(v *runView) { v.RateOver = rateSinceStart }, "unknown: nothing was read yet"},
		{"nothing since", func(v *runView) { v.RateOver = rateRecent }, "unknown: nothing was read in the last 1s"},
	} {
		v := base
		tc.edit(&v)
		if got := timeLeft(v); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFailureLines(t *testing.T) {
	v := runView{Run: runstate.Run{ID: "r1"}}
	if got := failureLines(v); len(got) != 1 || got[0] != "none" {
		t.Errorf("no failures: %q", got)
	}
	v.RecordsFailed, v.TasksFailed = 3, 1
	got := strings.Join(failureLines(v), "\n")
	for _, want := range []string{"3 records and 1 task deliveries failed", "FAILURE_QUEUE_URL or FAILURE_S3_URI", "REPORT_S3_URI/r1/failed/", "-failure-queue-url, -failure-s3-uri and -report-s3-uri"} {
		if !strings.Contains(got, want) {
			t.Errorf("none named: lacks %q:\n%s", want, got)
		}
	}
	v.Failures = failureOutput{QueueURL: "http://q/failures", Report: "s3://reports/fanout/r1/"}
	got = strings.Join(failureLines(v), "\n")
	for _, want := range []string{"on the failure queue http://q/failures (s3sqs redrive -from-queue http://q/failures)",
		"the run report's s3://reports/fanout/r1/failed/", "s3sqs redrive -report s3://reports/fanout/r1/"} {
		if !strings.Contains(got, want) {
			t.Errorf("named: lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "FAILURE_S3_URI") || strings.Contains(got, "-failure-s3-uri") {
		t.Errorf("named: says what was not asked:\n%s", got)
	}
}

// TestWriteStatus holds the text to the view, line by line.
func TestWriteStatus(t *testing.T) {
	run := runstate.Run{ID: "r1", State: runstate.StateRunning, MaxRate: 500, Started: t0, Updated: t0.Add(time.Minute),
		Parked: 1, Counters: runstate.Counters{TasksPlanned: 12, TasksDone: 8, TasksHeld: 2, StepsQueued: 3, StepsDone: 2,
			Objects: 4, BytesPlanned: 12_000_000, BytesRead: 6_000_000, RecordsRead: 60000, RecordsSent: 59990, RecordsFailed: 10,
			RecordsOffloaded: 2, Messages: 59990, Requests: 6000}}
	var b bytes.Buffer
	writeStatus(&b, viewOf(run, nil, t0.Add(time.Minute)))
	want := `run r1 at 2026-12-02T14:01:00Z: in progress
  state      running, max rate 500 messages/s
  tasks      12 planned: 8 done, 3 in progress, 1 parked by a cancel
  deliveries 0 failed, 0 skipped (done before), 2 held (put back)
  planning   1 steps left (3 queued, 2 done)
  records    60000 read, 59990 sent, 10 failed, 2 offloaded (59990 messages in 6000 requests)
  bytes      6.0 MB read of 12.0 MB planned (50%), 4 objects
  rate       1000 messages/s, 100.0 kB/s (average since the run started, over 1m0s)
  time left  about 1m0s (6.0 MB left at 100.0 kB/s); planning goes on, so more may come
  failures   10 records and 0 task deliveries failed (a failed delivery comes back until the work queue's maxReceiveCount, then waits in its DLQ)
             refused records are in the functions' failure output (FAILURE_QUEUE_URL or FAILURE_S3_URI), and with REPORT_S3_URI
             the run report REPORT_S3_URI/r1/failed/ names the failed ranges: -failure-queue-url, -failure-s3-uri and -report-s3-uri name them here
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestWriteStatusDone: a finished run says done on its state line, not the
// control's "running", and bytes read again by retried tasks are named as
// such, not counted past 100% of the plan.
func TestWriteStatusDone(t *testing.T) {
	run := runstate.Run{ID: "r1", State: runstate.StateRunning, Started: t0, Updated: t0.Add(time.Minute),
		Counters: runstate.Counters{TasksPlanned: 4, TasksDone: 4, StepsQueued: 1, StepsDone: 1, Objects: 2,
			BytesPlanned: 10_000_000, BytesRead: 12_500_000, RecordsRead: 10, RecordsSent: 10, Messages: 10, Requests: 1}}
	var b bytes.Buffer
	writeStatus(&b, viewOf(run, nil, t0.Add(time.Minute)))
	for _, want := range []string{": done\n", "  state      done\n", "(100%, and 2.5 MB read again by retried tasks)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "running") || strings.Contains(b.String(), "125%") {
		t.Errorf("says running or more than 100%%:\n%s", b.String())
	}
}
