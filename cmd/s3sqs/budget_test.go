package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestFailureBudgetWrongFormat sends CSV objects read as JSON Lines, as a
// mistyped -format would: every record fails. The run stops itself at its
// budget (exit 4, saying why and how to go on), having sent nothing and
// written nothing off; status says why; after `s3sqs resume` the same
// command with the right format sends each record once. The default
// budget (10%) stops such a run too; -max-failures off lets it write
// every record off, as before.
func TestFailureBudgetWrongFormat(t *testing.T) {
	_, table, _ := runsTable(t, nil)
	s3c, sqsc := standIns(t)
	const objects, rows = 4, 40
	want := map[string]bool{}
	for o := range objects {
		var b strings.Builder
		b.WriteString("id,name\n")
		for i := range rows {
			fmt.Fprintf(&b, "%d,row-%d-%d\n", i, o, i)
			want[fmt.Sprintf(`{"id":"%d","name":"row-%d-%d"}`, i, o, i)] = true
		}
		key := fmt.Sprintf("budget/part-%d.csv", o)
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	failures := filepath.Join(t.TempDir(), "failures.jsonl")
	const id = "budget-1"
	args := func(format string, more ...string) []string {
		return append([]string{"fanout", "-bucket", "lake", "-prefix", "budget/", "-target-queue-url", target, "-s3-path-style",
			"-concurrency", "1", "-claims-table", table, "-run-id", id, "-failure-file", failures, "-format", format}, more...)
	}

	code, out, errOut := runCLI(t, "", args("jsonl", "-max-failures", "10")...)
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	// The first task stops the run; the others, one at a time
	// (-concurrency 1), do not start.
	if code != exitBudgetSpent || rep.RecordsSent != 0 || rep.RecordsFailed != 0 || rep.RecordsRead != rows+1 || rep.TasksCancelled != objects ||
		!strings.Contains(rep.StopReason, "past maxFailures 10 (UnreadableRecord ") {
		t.Errorf("wrong format: exit %d, want %d; report %+v\n%s", code, exitBudgetSpent, rep.Stats, errOut)
	}
	if !strings.Contains(errOut, "stopped itself: failure budget spent") || !strings.Contains(errOut, "s3sqs resume -run-id "+id+" -claims-table "+table) {
		t.Errorf("stderr does not say why the run stopped and how to go on:\n%s", errOut)
	}
	if b, _ := os.ReadFile(failures); len(b) > 0 {
		t.Errorf("records were written off past the budget:\n%s", b)
	}
	if n := len(localaws.Drain(t, sqsc, target, 500*time.Millisecond)); n != 0 {
		t.Errorf("%d messages sent by the stopped run", n)
	}
	code, out, errOut = runCLI(t, "", "status", "-run-id", id, "-claims-table", table)
	if code != 0 || !strings.Contains(out, ": stopped itself\n") ||
		!strings.Contains(out, "stopped    failure budget spent: 41 of the 41 records read failed, past maxFailures 10 (UnreadableRecord 41)") {
		t.Errorf("status: exit %d, want why the run stopped\n%s%s", code, out, errOut)
	}

	if code, out, errOut := runCLI(t, "", "resume", "-run-id", id, "-claims-table", table); code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", args("csv", "-max-failures", "10")...)
	rep = engine.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.RecordsSent != objects*rows {
		t.Errorf("after the fix: exit %d, %v, report %+v\n%s", code, err, rep.Stats, errOut)
	}
	got := localaws.Bodies(localaws.Drain(t, sqsc, target, time.Second))
	seen := map[string]int{}
	for _, b := range got {
		seen[b]++
		if !want[b] || seen[b] > 1 {
			t.Errorf("message %s: %d times, expected: %v", b, seen[b], want[b])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct records arrived, want %d", len(seen), len(want))
	}

	// The dry run says so before anything is sent; the default budget
	// stops the run; without one, every record is written off.
	code, _, errOut = runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "budget/", "-target-queue-url", target, "-s3-path-style", "-format", "jsonl", "-dry-run")
	if code != 0 || !strings.Contains(errOut, "budget:   the run would stop itself: 164 of its 164 records would fail, past maxFailures 10% (UnreadableRecord 164)") {
		t.Errorf("dry run: exit %d\n%s", code, errOut)
	}
	rep = engine.Report{}
	code, out, errOut = runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "budget/", "-target-queue-url", target, "-s3-path-style", "-format", "jsonl", "-failure-file", failures)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitBudgetSpent || !strings.Contains(rep.StopReason, "past maxFailures 10%") {
		t.Errorf("the default budget: exit %d, %v, report %+v\n%s", code, err, rep.Stats, errOut)
	}
	rep = engine.Report{}
	code, out, errOut = runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "budget/", "-target-queue-url", target, "-s3-path-style", "-format", "jsonl", "-failure-file", failures, "-max-failures", "off")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.StopReason != "" || rep.RecordsFailed != objects*(rows+1) {
		t.Errorf("no budget: exit %d, %v, report %+v\n%s", code, err, rep.Stats, errOut)
	}
}

// TestResumeRebudget resumes a run that its failure budget stopped with a
// higher one: the parked task and planning step go back on the work queue
// carrying it, their other overrides kept.
func TestResumeRebudget(t *testing.T) {
	_, table, runs := runsTable(t, nil)
	_, sqsc := standIns(t)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	const id = "rebudget-1"
	ov := &worktask.Overrides{MaxFailures: worktask.LimitOf("10"), MaxRate: worktask.SettingOf("300")}
	task, err := worktask.Task{RunID: id, Chunk: chunkOf(0), Overrides: ov}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	step, err := worktask.Plan{RunID: id, Source: dataset.Source{Bucket: "lake", Prefix: "in/"}, Step: 2, Overrides: ov}.Entry(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{task, step.Body} {
		if err := runs.Park(t.Context(), id, body); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := runs.Stop(t.Context(), id, "failure budget spent: 11 of the 11 records read failed, past maxFailures 10 (UnreadableRecord 11)"); !ok || err != nil {
		t.Fatalf("stop: %v, %v", ok, err)
	}
	code, out, errOut := runCLI(t, "", "resume", "-run-id", id, "-claims-table", table, "-work-queue-url", work, "-max-failures", "50%")
	if code != 0 || !strings.Contains(out, "2 parked tasks put back") {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	got := localaws.Bodies(localaws.Drain(t, sqsc, work, time.Second))
	if len(got) != 2 {
		t.Fatalf("work queue holds %d messages, want 2: %q", len(got), got)
	}
	pt, err := worktask.Parse(got[0])
	if err != nil || pt.Overrides == nil || pt.Overrides.MaxFailures.String() != "50%" || pt.Overrides.MaxRate.String() != "300" || pt.Chunk.Key != "in/part-0.jsonl" {
		t.Errorf("the parked task went back as %s (%v)", got[0], err)
	}
	pp, err := worktask.ParsePlan(got[1])
	if err != nil || pp.Overrides == nil || pp.Overrides.MaxFailures.String() != "50%" || pp.Step != 2 {
		t.Errorf("the parked step went back as %s (%v)", got[1], err)
	}
	if run, err := runs.Get(t.Context(), id); err != nil || run.State != runstate.StateRunning || run.Reason != "" || run.MaxFailures != "50%" || run.MaxFailedObjects != "" {
		t.Errorf("run after resume: %+v, %v; want running, no reason, the budget 50%% in its record for the tasks not parked", run, err)
	}
	if code, out, _ := runCLI(t, "", "status", "-run-id", id, "-claims-table", table); code != 0 || !strings.Contains(out, "max failures 50%") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
}

// TestFailureBudgetObjects stops a run whose objects cannot be read (gzip
// cut short, as an upload that died would leave it) past
// -max-failed-objects, and lets one with none go on.
func TestFailureBudgetObjects(t *testing.T) {
	s3c, sqsc := standIns(t)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for i := range 2000 {
		fmt.Fprintf(zw, `{"id":%d,"pad":"%s"}`+"\n", i, strings.Repeat("x", 40))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	cut := b.Bytes()[:b.Len()/2]
	for o := range 3 {
		key := fmt.Sprintf("cut/part-%d.jsonl.gz", o)
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: bytes.NewReader(cut)}); err != nil {
			t.Fatal(err)
		}
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	failures := filepath.Join(t.TempDir(), "failures.jsonl")
	args := []string{"fanout", "-bucket", "lake", "-prefix", "cut/", "-target-queue-url", target, "-s3-path-style", "-concurrency", "1", "-failure-file", failures}
	code, out, errOut := runCLI(t, "", append(args, "-max-failed-objects", "0")...)
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitBudgetSpent ||
		!strings.Contains(rep.StopReason, "1 of the 3 chunks planned could not be read, past maxFailedObjects 0") {
		t.Errorf("cut objects: exit %d, %v, report %+v\n%s", code, err, rep.Stats, errOut)
	}
	code, out, errOut = runCLI(t, "", append(args, "-max-failed-objects", "off", "-max-failures", "off")...)
	rep = engine.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.StopReason != "" || rep.ObjectsFailed != 3 {
		t.Errorf("no budget: exit %d, %v, report %+v\n%s", code, err, rep.Stats, errOut)
	}
}
