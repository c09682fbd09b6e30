package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestEndToEndPausedRun runs, under aws-lambda-rie with a claims table on
// moto_server, a queued run paced by MAX_RATE, and pauses it while an
// invocation sends: that invocation's tasks stop part-way and go back on
// the work queue, as do those of the next one; the invocations succeed
// (nothing counts toward the work queue's dead-letter queue). Resumed,
// the copies that come back after the hold delay finish the run: every
// record arrives once, and the run's counters say so.
func TestEndToEndPausedRun(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	client, table := localaws.ClaimsTable(t)
	runs := runstate.NewTable(client, table, runstate.TableOptions{})
	want := map[string]bool{}
	for o := range 4 {
		var b strings.Builder
		for i := range 200 {
			v := fmt.Sprintf("o%d-r%03d", o, i)
			fmt.Fprintf(&b, `{"value":%q}`+"\n", v)
			want[v] = true
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("paced/%d.jsonl", o)), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		"AWS_ENDPOINT_URL_DYNAMODB="+localaws.Endpoint(t, localaws.EnvMoto), settings.ClaimsTable.Env+"="+table,
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.MaxRate.Env+"=100",
		settings.ChunkSize.Env+"=1KiB", settings.InlineMaxBytes.Env+"=1KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")
	const id = "paced-e2e"
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "paced/", "runId": id})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil || !rep.Queued {
		t.Fatalf("report %s (%v): want the run queued", out, err)
	}
	invoke := func(msgs []types.Message) {
		t.Helper()
		out, err := fn.Invoke(t.Context(), esm.Event(msgs, workARN))
		if err != nil {
			t.Fatalf("tasks: %v", err)
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("tasks answered %s (%v)", out, err)
		}
	}
	tasks := drainTasks(t, sqsc, work, int(rep.TasksQueued))
	if len(tasks) < 8 {
		t.Fatalf("%d tasks queued, want 8 or more", len(tasks))
	}
	// The first batch sends at 100 messages a second, some 3 s of work; the
	// run is paused a second in.
	first := make(chan struct{})
	go func() {
		defer close(first)
		invoke(tasks[:6])
	}()
	time.Sleep(time.Second)
	if _, err := runs.SetState(t.Context(), id, runstate.StatePaused); err != nil {
		t.Fatal(err)
	}
	<-first
	invoke(tasks[6:])
	paused, err := runs.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if paused.TasksHeld < int64(len(tasks)-6) || paused.RecordsSent == 0 || paused.RecordsSent >= int64(len(want)) {
		t.Fatalf("paused run %+v: want the later tasks held, and some records sent", paused.Counters)
	}
	if _, err := runs.SetState(t.Context(), id, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	// The held tasks come back after the hold delay (10 s).
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		r, err := runs.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.TasksDone == r.TasksPlanned {
			break
		}
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		for i := 0; i < len(msgs); i += 10 {
			invoke(msgs[i:min(i+10, len(msgs))])
		}
	}
	got := map[string]int{}
	for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
		got[aws.ToString(m.Body)]++
	}
	bad := 0
	for v := range want {
		if got[v] != 1 {
			bad++
		}
	}
	end, err := runs.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 || len(got) != len(want) {
		t.Errorf("%d of %d records did not arrive exactly once (%d distinct arrived)", bad, len(want), len(got))
	}
	if end.TasksDone != end.TasksPlanned || end.RecordsSent != int64(len(want)) || end.Messages != int64(len(want)) {
		t.Errorf("run at the end %+v: want every task done and %d records sent", end.Counters, len(want))
	}
	if !strings.Contains(fn.Logs(), `"tasksHeld"`) || !strings.Contains(fn.Logs(), `"TasksHeld"`) {
		t.Errorf("no tasksHeld in the summaries, or no TasksHeld metric:\n%.3000s", fn.Logs())
	}
	t.Logf("paused at %d records sent, %d tasks held; at the end %+v", paused.RecordsSent, paused.TasksHeld, end.Counters)
}

// drainTasks receives the n messages of the work queue at url. fauxqs now
// and then loses a receive's answer, whose messages then come back only
// after the queue's visibility timeout (30 s): it waits for them, and
// keeps the last receipt of a message received twice.
func drainTasks(t *testing.T, c *sqs.Client, url string, n int) []types.Message {
	t.Helper()
	var tasks []types.Message
	seen := map[string]int{}
	for deadline := time.Now().Add(45 * time.Second); len(tasks) < n && time.Now().Before(deadline); {
		for _, m := range localaws.Drain(t, c, url, time.Second) {
			if i, ok := seen[aws.ToString(m.MessageId)]; ok {
				tasks[i] = m
				continue
			}
			seen[aws.ToString(m.MessageId)] = len(tasks)
			tasks = append(tasks, m)
		}
	}
	return tasks
}
