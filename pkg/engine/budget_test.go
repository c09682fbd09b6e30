package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestBudgetStopsQueuedRun runs a queued run whose workers map a field
// that is not an object of strings as the message attributes, as a wrong
// ATTRIBUTES_FIELD would: every record fails. Past its budget the run
// stops itself run-wide: its record says why, every task is parked,
// nothing is sent and nothing written off (a budget of 0: a count above
// it lets tasks that end at once each fit, and write their failures off). Workers with the mapping
// fixed, and a resume, send each record once, and the run finishes.
func TestBudgetStopsQueuedRun(t *testing.T) {
	c := newControlled(t, 2, engine.Options{Planning: engine.Planning{InlineMaxBytes: 1}})
	var want []string
	for o := range 6 {
		var b strings.Builder
		for i := range 30 {
			v := fmt.Sprintf("o%d-r%03d", o, i)
			fmt.Fprintf(&b, `{"value":%q,"msg_attributes":"none"}`+"\n", v)
			want = append(want, v)
		}
		c.st.Put(t, fmt.Sprintf("bud/%02d.jsonl", o), b.String())
	}
	const id = "budget-run"
	req := engine.Request{Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "bud/"}, RunID: id}
	req.MaxFailures = worktask.LimitOf("0")
	if rep, err := c.handlers[0].HandleRequest(t.Context(), req); err != nil || !rep.Queued {
		t.Fatalf("request: %+v, %v", rep, err)
	}
	ctx, stop := context.WithCancel(t.Context())
	wait := c.consume(ctx, t)
	stopped := c.waitFor(t, id, 30*time.Second, "the run to stop itself", func(r runstate.Run) bool { return r.Reason != "" })
	if !strings.Contains(stopped.Reason, "past maxFailures 0 (UnmappableRecord ") || stopped.State != runstate.StateCancelled {
		t.Errorf("stopped run: %s, %q", stopped.State, stopped.Reason)
	}
	c.waitFor(t, id, 30*time.Second, "every task parked", func(r runstate.Run) bool { return r.TasksPlanned > 0 && r.Parked >= r.TasksPlanned })
	stop()
	wait()
	parked := c.run(t, id)
	if parked.Parked != parked.TasksPlanned || parked.RecordsSent != 0 || parked.RecordsFailed != 0 {
		t.Errorf("after the stop: %d of %d tasks parked, %d records sent, %d failed; want all parked, none sent or failed",
			parked.Parked, parked.TasksPlanned, parked.RecordsSent, parked.RecordsFailed)
	}
	if n := depth(t, c.st.SQS, c.st.Target); n != 0 {
		t.Errorf("%d messages on the target from the stopped run", n)
	}
	if n := depth(t, c.st.SQS, c.st.Failure); n != 0 {
		t.Errorf("%d records written off past the budget", n)
	}

	// The fix: workers whose mapping takes no attributes. Then resume, as
	// `s3sqs resume` does.
	c.handlers, c.logs = nil, nil
	for range 2 {
		h, logs := c.st.Handler(t, engine.Options{WorkQueueURL: c.work, Claims: c.claims, Control: engine.Control{Runs: c.runs, ReadEvery: 100 * time.Millisecond},
			Plan: dataset.PlanOptions{ChunkSize: 1 << 10}, Mapping: worktask.Mapping{BodyField: "value"}}, nil)
		c.handlers, c.logs = append(c.handlers, h), append(c.logs, logs)
	}
	if _, err := c.runs.SetState(t.Context(), id, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	n, err := c.runs.Unpark(t.Context(), id, func(ctx context.Context, _ int64, body string) error {
		_, err := c.st.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(c.work), MessageBody: aws.String(body)})
		return err
	})
	if err != nil || n != parked.Parked {
		t.Fatalf("unparked %d of %d: %v", n, parked.Parked, err)
	}
	ctx, stop = context.WithCancel(t.Context())
	wait = c.consume(ctx, t)
	// Every task done: a task delivered twice counts skipped, and would
	// make the run look finished before the last one is.
	end := c.waitFor(t, id, 60*time.Second, "every task done", func(r runstate.Run) bool { return r.TasksPlanned > 0 && r.TasksDone >= r.TasksPlanned })
	stop()
	wait()
	checkDelivered(t, c.st, want)
	if end.RecordsSent != int64(len(want)) || end.RecordsFailed != 0 || end.Reason != "" {
		t.Errorf("run at the end %+v: want %d records sent, none failed, no reason", end, len(want))
	}
	t.Logf("run at the end: %+v", end.Counters)
}

// TestResumedBudgetReachesQueuedTasks queues a run whose every record
// fails with a budget of 0, then, before any task runs, sets the run's
// budget off as `s3sqs resume -max-failures off` does for the tasks it
// did not park. The queued tasks judge by the run's record: they write
// their failures off and the run ends, where their own budget would have
// stopped it.
func TestResumedBudgetReachesQueuedTasks(t *testing.T) {
	c := newControlled(t, 1, engine.Options{Planning: engine.Planning{InlineMaxBytes: 1}})
	for o := range 3 {
		var b strings.Builder
		for i := range 40 {
			fmt.Fprintf(&b, `{"value":"o%d-r%03d","msg_attributes":"none"}`+"\n", o, i)
		}
		c.st.Put(t, fmt.Sprintf("rebud/%02d.jsonl", o), b.String())
	}
	const id = "rebudget-queued"
	req := engine.Request{Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "rebud/"}, RunID: id}
	req.MaxFailures = worktask.LimitOf("0")
	if rep, err := c.handlers[0].HandleRequest(t.Context(), req); err != nil || !rep.Queued {
		t.Fatalf("request: %+v, %v", rep, err)
	}
	if _, err := c.runs.SetBudget(t.Context(), id, "off", ""); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	wait := c.consume(ctx, t)
	run := c.waitFor(t, id, 30*time.Second, "the run done", finished)
	stop()
	wait()
	if run.Reason != "" || run.State != runstate.StateRunning || run.RecordsFailed != 120 || run.Parked != 0 || run.MaxFailures != "off" {
		t.Errorf("run: %s %q, %d records failed, %d parked, budget %q; want it done with the 120 written off", run.State, run.Reason, run.RecordsFailed, run.Parked, run.MaxFailures)
	}
	if n := depth(t, c.st.SQS, c.st.Failure); n != 120 {
		t.Errorf("%d records on the failure queue, want 120", n)
	}
}
