package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// hold takes task's claim in store, until the given lease end, as
// another delivery would.
func hold(t *testing.T, store claims.Store, task string, until time.Time) claims.Claim {
	t.Helper()
	parsed, err := worktask.Parse(task)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Acquire(t.Context(), engine.ClaimKey(parsed), until)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func taskMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs"}
}

// TestClaimsRunTaskOnce delivers one task twice in one batch, and later
// the second copy again and a third: its records are sent once. The copy
// that met the claim held fails, to come back; every later copy succeeds.
func TestClaimsRunTaskOnce(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, task, _ := st.Records(t, "once.jsonl", 50)
	h, logs := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t)}, nil)
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task), taskMessage("t2", task)}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "t2"}}) {
		t.Fatalf("failures %v, want the copy that found the task held", resp.BatchItemFailures)
	}
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t2", task), taskMessage("t3", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got := st.Sent(t)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if n := strings.Count(logs.String(), `"tasksSkipped":2`); n != 1 {
		t.Errorf("%d summaries with tasksSkipped 2, want 1:\n%s", n, logs)
	}
}

// TestClaimsResume breaks a task's read part-way. Its continuation is
// queued; the original message is then delivered again (as when the
// invocation died before the message was deleted): it resumes where the
// first attempt stopped, and the continuation, run after it, does nothing.
func TestClaimsResume(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, task, _ := st.Records(t, "resume.jsonl", 300)
	broken := &s3fault.CutAt{S3API: st.S3, At: 300 * 17 / 2}
	st.S3API = broken
	h, logs := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t)}, nil)
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	cont := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(cont) != 1 {
		t.Fatalf("%d continuations, want 1", len(cont))
	}
	broken.Heal()
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), "task resumes where an earlier attempt stopped") {
		t.Error("the second delivery did not resume from the claim")
	}
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), esm.Event(cont, fanoutstack.WorkARN))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("continuation failed: %v", resp.BatchItemFailures)
	}
	got := st.Sent(t)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records over three deliveries (-want +got):\n%s", diff)
	}
}

// TestClaimsTakeOver leaves a claim held by an invocation that died (its
// lease over): the next delivery takes the task over and runs it.
func TestClaimsTakeOver(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, task, _ := st.Records(t, "dead.jsonl", 20)
	store := fanoutstack.ClaimsStore(t)
	hold(t, store, task, time.Now().Add(-time.Second))
	h, logs := st.Handler(t, engine.Options{Claims: store}, nil)
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got := st.Sent(t)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if strings.Contains(logs.String(), "tasksSkipped") {
		t.Errorf("the task was skipped, not taken over:\n%s", logs)
	}
}

// TestClaimsHeld delivers a task that another delivery holds: its message
// fails (the holder may still fail), sends nothing, and, once the holder
// has finished, succeeds without sending.
func TestClaimsHeld(t *testing.T) {
	st := fanoutstack.New(t, "")
	_, task, _ := st.Records(t, "held.jsonl", 20)
	store := fanoutstack.ClaimsStore(t)
	holder := hold(t, store, task, time.Now().Add(time.Minute))
	h, logs := st.Handler(t, engine.Options{Claims: store}, nil)
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "t1"}}) {
		t.Errorf("failures %v, want the held task's message", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), "is being run by another delivery") {
		t.Errorf("the log does not say why:\n%s", logs)
	}
	if err := store.Done(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	resp = fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %v after the holder finished", resp.BatchItemFailures)
	}
	if msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second); len(msgs) != 0 {
		t.Errorf("%d records sent; the holder sends them", len(msgs))
	}
}
