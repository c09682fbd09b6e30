package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// runsTable points the CLI's DynamoDB client at moto_server, as
// AWS_ENDPOINT_URL_DYNAMODB does for a user, and returns a claims table
// there, its name, and the runs it keeps, whose writes are made as if at
// now(): the engine's tasks write them with the same calls.
func runsTable(t *testing.T, now func() time.Time) (*dynamodb.Client, string, *runstate.Table) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", localaws.Endpoint(t, localaws.EnvMoto))
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ddb, name := localaws.ClaimsTable(t)
	return ddb, name, runstate.NewTable(ddb, name, runstate.TableOptions{Now: now})
}

// add adds c to the run's counters, failing the test on an error.
func add(t *testing.T, runs *runstate.Table, runID string, c runstate.Counters) {
	t.Helper()
	if err := runs.Add(t.Context(), runID, c); err != nil {
		t.Fatal(err)
	}
}

// statusJSON is what status -json prints, as a script reads it.
type statusJSON struct {
	runstate.Run
	ReadAt            time.Time `json:"readAt"`
	TasksInProgress   int64     `json:"tasksInProgress"`
	TasksParkedNow    int64     `json:"tasksParkedNow"`
	StepsLeft         int64     `json:"stepsLeft"`
	Done              bool      `json:"done"`
	MessagesPerSecond float64   `json:"messagesPerSecond"`
	BytesPerSecond    float64   `json:"bytesPerSecond"`
	RateOver          string    `json:"rateOver"`
	SecondsLeft       *float64  `json:"secondsLeft"`
	Failures          struct {
		QueueURL string `json:"failureQueueUrl"`
		Report   string `json:"report"`
	} `json:"failures"`
}

// TestStatus shows a run built up as its planning steps and tasks would
// write it, 100 s after its first write: as text, and as JSON whose
// derived fields follow from the counters.
func TestStatus(t *testing.T) {
	started := time.Now().Add(-100 * time.Second)
	clock := started
	_, table, runs := runsTable(t, func() time.Time { return clock })
	const id = "status-1"
	// Planning: two steps queued, one done, which planned 10 tasks.
	add(t, runs, id, runstate.Counters{StepsQueued: 2})
	add(t, runs, id, runstate.Counters{StepsDone: 1, TasksPlanned: 10, Objects: 5, BytesPlanned: 50_000_000})
	clock = time.Now()
	// Six tasks settled: 4 done, 1 failed, 1 skipped; one was held and
	// one parked by a cancel.
	add(t, runs, id, runstate.Counters{TasksDone: 4, TasksFailed: 1, TasksSkipped: 1, TasksHeld: 1,
		BytesRead: 20_000_000, RecordsRead: 10_003, RecordsSent: 10_000, RecordsFailed: 3, RecordsOffloaded: 2, Messages: 10_000, Requests: 1000})
	if err := runs.Park(t.Context(), id, `{"chunk":"parked"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.SetMaxRate(t.Context(), id, 500); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "", "status", "-run-id", id, "-claims-table", table,
		"-failure-queue-url", "http://127.0.0.1:1/000000000000/failures", "-report-s3-uri", "s3://reports/fanout")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"run status-1 at ", ": in progress\n",
		"  state      running, max rate 500 messages/s\n",
		// 10 - 4 done - 1 parked; failed and skipped deliveries are of
		// tasks in progress or done.
		"  tasks      10 planned: 4 done, 5 in progress, 1 parked by a cancel\n",
		"  deliveries 1 failed, 1 skipped (done before), 1 held (put back)\n",
		"  planning   1 steps left (2 queued, 1 done)\n",
		"  records    10003 read, 10000 sent, 3 failed, 2 offloaded (10000 messages in 1000 requests)\n",
		"  bytes      20.0 MB read of 50.0 MB planned (40%), 5 objects\n",
		// 10,000 messages and 20 MB over the 100 s since the first write,
		// and the time the test has taken since, which moves the byte
		// rate's decimal and may add a second or two to the durations
		// (30 MB left take 1.5 times the time 20 MB took).
		"  rate       100 messages/s, 19", " kB/s (average since the run started, over 1m4",
		"  time left  about 2m3", " MB left at ", " kB/s); planning goes on, so more may come\n",
		"  failures   3 records and 1 task deliveries failed (a failed delivery comes back until the work queue's maxReceiveCount, then waits in its DLQ)\n",
		"refused records: on the failure queue http://127.0.0.1:1/000000000000/failures",
		"failed ranges: the run report's s3://reports/fanout/status-1/failed/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	t.Logf("status:\n%s", out)

	code, out, errOut = runCLI(t, "", "status", "-run-id", id, "-claims-table", table, "-json", "-report-s3-uri", "s3://reports/fanout/")
	var s statusJSON
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil {
		t.Fatalf("exit %d, stdout %s (%v)\n%s", code, out, err, errOut)
	}
	if s.ID != id || s.State != runstate.StateRunning || s.MaxRate != 500 || s.TasksPlanned != 10 || s.Parked != 1 || s.Messages != 10_000 ||
		s.TasksInProgress != 5 || s.TasksParkedNow != 1 || s.StepsLeft != 1 || s.Done || s.RateOver != rateSinceStart ||
		s.Failures.Report != "s3://reports/fanout/status-1/" || s.Failures.QueueURL != "" {
		t.Errorf("json %+v", s)
	}
	over := s.ReadAt.Sub(s.Started).Seconds()
	if math.Abs(over-100) > 5 || math.Abs(s.MessagesPerSecond-10_000/over) > 0.01 || math.Abs(s.BytesPerSecond-20e6/over) > 1 {
		t.Errorf("rate %v msg/s, %v B/s over %.1f s; want 10,000 messages and 20 MB over it", s.MessagesPerSecond, s.BytesPerSecond, over)
	}
	if s.SecondsLeft == nil || math.Abs(*s.SecondsLeft-30e6/s.BytesPerSecond) > 0.01 {
		t.Errorf("seconds left %v; want 30 MB at %v B/s", s.SecondsLeft, s.BytesPerSecond)
	}
	if !strings.Contains(out, `"tasksPlanned": 10`) || !strings.Contains(out, `"recordsOffloaded": 2`) {
		t.Errorf("the run's counters are not at the top level of the JSON:\n%s", out)
	}
}

// TestStatusWatch watches a run every 50 ms while its last tasks settle:
// it ends once the run is done, one block per refresh, the rate of each
// after the first measured since the first.
func TestStatusWatch(t *testing.T) {
	_, table, runs := runsTable(t, nil)
	const id = "watch-1"
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			runID := fmt.Sprintf("%s-%v", id, asJSON)
			add(t, runs, runID, runstate.Counters{StepsQueued: 1, StepsDone: 1, TasksPlanned: 3, BytesPlanned: 3_000_000})
			add(t, runs, runID, runstate.Counters{TasksDone: 1, BytesRead: 1_000_000, Messages: 100})
			settled := make(chan error, 1)
			go func() {
				// The last two tasks settle one after the other.
				time.Sleep(300 * time.Millisecond)
				err := runs.Add(t.Context(), runID, runstate.Counters{TasksDone: 1, BytesRead: 1_000_000, Messages: 100})
				if err == nil {
					time.Sleep(300 * time.Millisecond)
					err = runs.Add(t.Context(), runID, runstate.Counters{TasksDone: 1, BytesRead: 1_000_000, Messages: 100})
				}
				settled <- err
			}()
			args := []string{"status", "-run-id", runID, "-claims-table", table, "-watch", "-every", "50ms"}
			if asJSON {
				args = append(args, "-json")
			}
			// A watch that misses the end stops here, and fails below.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(ctx, args, strings.NewReader(""), &stdout, &stderr, false)
			out, errOut := stdout.String(), stderr.String()
			if err := <-settled; err != nil {
				t.Fatal(err)
			}
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errOut)
			}
			if took := time.Since(start); took < 600*time.Millisecond {
				t.Errorf("the watch ended after %s, before the run was done", took)
			}
			t.Logf("status -watch:\n%s", out)
			if !asJSON {
				blocks := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
				if len(blocks) < 3 || !strings.Contains(blocks[0], "(average since the run started") || !strings.Contains(blocks[1], "(over the last ") ||
					!strings.HasSuffix(strings.SplitN(blocks[len(blocks)-1], "\n", 2)[0], ": done") || strings.Contains(strings.Join(blocks[:len(blocks)-1], "\n"), ": done") {
					t.Errorf("%d blocks; want several, measured over the last refreshes after the first, the last one done:\n%s", len(blocks), out)
				}
				return
			}
			var lines []statusJSON
			sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
			for sc.Scan() {
				var s statusJSON
				if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				lines = append(lines, s)
			}
			first, last := lines[0], lines[len(lines)-1]
			if len(lines) < 3 || first.Done || lines[1].RateOver != rateRecent || !last.Done || last.TasksDone != 3 || *last.SecondsLeft != 0 {
				t.Fatalf("%d JSON lines, the last %+v; want several, the last one done", len(lines), last)
			}
			// Within a minute, the rate is measured from the first read.
			want := float64(last.Messages-first.Messages) / last.ReadAt.Sub(first.ReadAt).Seconds()
			if math.Abs(last.MessagesPerSecond-want) > want/1000 || last.MessagesPerSecond == 0 {
				t.Errorf("last rate %v msg/s; want %v, the 200 messages since the first read", last.MessagesPerSecond, want)
			}
		})
	}
}

// TestStatusErrors: a run the table does not hold, and a command line
// without a claims table, say what is wrong.
func TestStatusErrors(t *testing.T) {
	_, table, _ := runsTable(t, nil)
	code, out, errOut := runCLI(t, "", "status", "-run-id", "nope", "-claims-table", table)
	if code != 1 || out != "" || !strings.Contains(errOut, "s3sqs status: no run nope in table "+table+" (runs are kept 7 days after their last write") {
		t.Errorf("unknown run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-run-id", "r"}, "name the claims table with -claims-table (the functions' CLAIMS_TABLE): a run's state lives there, and without a claims table the functions keep none; the run report (REPORT_S3_URI) is then the record of a run"},
		{[]string{"status", "-claims-table", table}, "name the run with -run-id"},
		{[]string{"status", "-run-id", "r", "-claims-table", "t"}, `-claims-table: "t" is not a DynamoDB table name`},
		{[]string{"status", "-run-id", "a/b", "-claims-table", table}, `-run-id: runId: "a/b" may hold only`},
		{[]string{"status", "-run-id", "r", "-claims-table", table, "-every", "1s"}, "-every applies with -watch only"},
		{[]string{"status", "-run-id", "r", "-claims-table", table, "-watch", "-every", "0s"}, "-every: 0s is not a positive interval"},
		{[]string{"pause", "-run-id", "r"}, "name the claims table with -claims-table"},
		{[]string{"set", "-run-id", "r", "-claims-table", table}, "name the run's new rate with -max-rate"},
		{[]string{"set", "-run-id", "r", "-claims-table", table, "-max-rate", "0"}, "-max-rate: 0 is not a whole number from 1 to 10000000"},
		{[]string{"set", "-run-id", "r", "-claims-table", table, "-max-rate", "fast"}, `-max-rate: "fast" is not a whole number from 1 to 10000000`},
		{[]string{"resume", "-run-id", "r", "-claims-table", table, "-work-queue-url", "work"}, `-work-queue-url: "work" is not a queue URL`},
		{[]string{"cancel", "-run-id", "r", "-claims-table", table, "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runCLI(t, "", tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestControl pauses, cancels, re-paces and resumes a run: each changes
// its record, and resume puts the tasks a cancel parked onto the work
// queue once, refusing without a work queue to put them on.
func TestControl(t *testing.T) {
	_, table, runs := runsTable(t, nil)
	_, sqsc := standIns(t)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	const id = "control-1"
	add(t, runs, id, runstate.Counters{StepsQueued: 1, StepsDone: 1, TasksPlanned: 4})
	state := func(want runstate.State) runstate.Run {
		t.Helper()
		run, err := runs.Get(t.Context(), id)
		if err != nil || run.State != want {
			t.Fatalf("run %+v (%v); want %s", run, err, want)
		}
		return run
	}
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, "", append(args, "-run-id", id, "-claims-table", table)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", args, code, wantCode, out, errOut)
		}
		return out + errOut
	}

	if out := cli(0, "pause"); !strings.Contains(out, "run control-1 is paused: each of its tasks stops before it sends or at its next chunk boundary, and goes back on the work queue") {
		t.Errorf("pause says %q", out)
	}
	state(runstate.StatePaused)
	if out := cli(0, "set", "-max-rate", "250"); !strings.Contains(out, "run control-1: max rate 250 messages/s") {
		t.Errorf("set says %q", out)
	}
	if run := state(runstate.StatePaused); run.MaxRate != 250 {
		t.Errorf("max rate %d, want 250", run.MaxRate)
	}
	if out := cli(0, "cancel"); !strings.Contains(out, "counted as cancelled, and is parked in table "+table) {
		t.Errorf("cancel says %q", out)
	}
	state(runstate.StateCancelled)

	// Three tasks park as they see the cancel.
	var bodies []string
	for i := range 3 {
		body, err := worktask.Task{RunID: id, Chunk: chunkOf(i)}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := runs.Park(t.Context(), id, body); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	if out := cli(0, "status"); !strings.Contains(out, ": cancelled\n") || !strings.Contains(out, "4 planned: 0 done, 1 in progress, 3 parked by a cancel") {
		t.Errorf("status of the cancelled run:\n%s", out)
	}
	if out := cli(1, "resume"); !strings.Contains(out, "run control-1 has 3 parked tasks: name the work queue they go back on with -work-queue-url") {
		t.Errorf("resume without a work queue says %q", out)
	}
	state(runstate.StateCancelled)

	out := cli(0, "resume", "-work-queue-url", work)
	t.Logf("resume:\n%s", out)
	if !strings.Contains(out, "run control-1 is running") || !strings.Contains(out, "3 parked tasks put back on "+work) {
		t.Errorf("resume says %q", out)
	}
	if run := state(runstate.StateRunning); run.Parked != 3 || run.Unparked != 3 {
		t.Errorf("parked %d, unparked %d; want 3 and 3", run.Parked, run.Unparked)
	}
	if got := localaws.Bodies(localaws.Drain(t, sqsc, work, time.Second)); strings.Join(got, "\n") != strings.Join(bodies, "\n") {
		t.Errorf("work queue holds %q, want the parked tasks in order %q", got, bodies)
	}
	if out := cli(0, "resume", "-work-queue-url", work); !strings.Contains(out, "0 parked tasks put back") {
		t.Errorf("second resume says %q", out)
	}
	if n := len(localaws.Drain(t, sqsc, work, time.Second)); n != 0 {
		t.Errorf("the second resume put %d tasks back, want none", n)
	}

	// A run the table has no record of, most often a mistyped id, is
	// refused and left as it is; -force steers it (a run that has just
	// started), with a word on stderr.
	code, out, errOut := runCLI(t, "", "pause", "-run-id", "fresh", "-claims-table", table)
	if code != 1 || !strings.Contains(errOut, "no run fresh in table "+table) || !strings.Contains(errOut, "nothing was changed") || strings.Contains(out, "is paused") {
		t.Errorf("pause of a run with no record: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := runs.Get(t.Context(), "fresh"); !errors.Is(err, runstate.ErrNoRun) {
		t.Errorf("a refused pause wrote run fresh: %v", err)
	}
	code, out, errOut = runCLI(t, "", "pause", "-run-id", "fresh", "-claims-table", table, "-force")
	if code != 0 || !strings.Contains(errOut, "run fresh has written nothing to table "+table+" yet") || !strings.Contains(out, "run fresh is paused") {
		t.Errorf("pause -force of a run with no record: exit %d\n%s\n%s", code, out, errOut)
	}
	if run, err := runs.Get(t.Context(), "fresh"); err != nil || run.State != runstate.StatePaused {
		t.Errorf("run fresh %+v (%v); want paused", run, err)
	}
}

// chunkOf is the chunk of task i: the whole of an object.
func chunkOf(i int) dataset.Chunk {
	return dataset.Chunk{Object: dataset.Object{Bucket: "lake", Key: fmt.Sprintf("in/part-%d.jsonl", i), Size: 100}, Count: 1, End: 100, Format: dataset.FormatJSONL}
}

// TestFanoutRunFlags: -max-rate and -target-max-backlog travel with the
// queued tasks as they were written, and -claims-table makes an in-process
// run claim its tasks in the table.
func TestFanoutRunFlags(t *testing.T) {
	ddb, table, _ := runsTable(t, nil)
	s3c, sqsc := standIns(t)
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/a.jsonl"), Body: strings.NewReader(`{"value":"a"}` + "\n")}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	base := []string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, "-s3-path-style"}

	code, _, errOut := runCLI(t, "", append(base, "-work-queue-url", work, "-max-rate", "300", "-target-max-backlog", "5000")...)
	if code != 0 {
		t.Fatalf("queued: exit %d\n%s", code, errOut)
	}
	msgs := localaws.Drain(t, sqsc, work, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d tasks queued, want 1", len(msgs))
	}
	task, err := worktask.Parse(aws.ToString(msgs[0].Body))
	if err != nil || task.Overrides == nil || task.Overrides.MaxRate.Value() != 300 || task.Overrides.TargetMaxBacklog.Value() != 5000 {
		t.Fatalf("task %s (%v): want maxRate 300 and targetMaxBacklog 5000 in its overrides", aws.ToString(msgs[0].Body), err)
	}

	code, _, errOut = runCLI(t, "", append(base, "-claims-table", table, "-run-id", "claimed")...)
	if code != 0 {
		t.Fatalf("in-process: exit %d\n%s", code, errOut)
	}
	out, err := ddb.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, item := range out.Items {
		if k, ok := item[claims.KeyAttribute].(*ddbtypes.AttributeValueMemberS); ok {
			keys = append(keys, k.Value)
		}
	}
	if !strings.Contains(strings.Join(keys, " "), "claimed/") {
		t.Errorf("claims table holds %v; want the run's claims", keys)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-max-rate", "0"}, "-max-rate: 0 is not a whole number from 1 to 10000000"},
		{[]string{"-target-max-backlog", "-5"}, "-target-max-backlog: -5 is not a whole number from 1 to 1000000000"},
		{[]string{"-claims-table", "a/b"}, `-claims-table: "a/b" is not a DynamoDB table name`},
	} {
		if code, _, errOut := runCLI(t, "", append(base, tc.args...)...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestResumeTwiceFIFO cancels and resumes a run on a FIFO work queue
// twice within SQS's five-minute deduplication window: the task parked the
// second time has the body it had the first, and is put back all the
// same, where a deduplication id made of the body alone made SQS drop it
// while resume said it was put back.
func TestResumeTwiceFIFO(t *testing.T) {
	_, table, runs := runsTable(t, nil)
	_, sqsc := standIns(t)
	work := localaws.CreateQueue(t, sqsc, "-work.fifo", map[string]string{"FifoQueue": "true"})
	const id = "fifo-twice"
	add(t, runs, id, runstate.Counters{StepsQueued: 1, StepsDone: 1, TasksPlanned: 1})
	body, err := worktask.Task{RunID: id, Chunk: chunkOf(0)}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if code, out, errOut := runCLI(t, "", "cancel", "-run-id", id, "-claims-table", table); code != 0 {
			t.Fatalf("round %d: cancel: exit %d\n%s\n%s", round, code, out, errOut)
		}
		// The task sees the cancel and parks, the same body each time.
		if err := runs.Park(t.Context(), id, body); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(t, "", "resume", "-run-id", id, "-claims-table", table, "-work-queue-url", work)
		if code != 0 || !strings.Contains(out, "1 parked tasks put back") {
			t.Fatalf("round %d: resume: exit %d\n%s\n%s", round, code, out, errOut)
		}
		if got := localaws.Bodies(localaws.Drain(t, sqsc, work, time.Second)); len(got) != 1 || got[0] != body {
			t.Fatalf("round %d: the work queue holds %d messages after resume said 1 was put back", round, len(got))
		}
	}
}
