package fanout_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/esm"
	"github.com/s3sqs/s3sqs/internal/localaws"
	"github.com/s3sqs/s3sqs/internal/s3fault"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// claimsObject puts n JSON Lines records of 17 bytes each and returns
// their values and the task that reads them whole.
func (st *stack) claimsObject(t *testing.T, key string, n int) ([]string, string) {
	t.Helper()
	var b strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%03d"}`+"\n", i)
		want = append(want, fmt.Sprintf("r%03d", i))
	}
	st.put(t, key, b.String())
	task := fmt.Sprintf(`{"runId":"r","chunk":{"bucket":"lake","key":%q,"size":%d,"index":0,"count":1,"start":0,"end":%d,"format":"jsonl"}}`, key, b.Len(), b.Len())
	return want, task
}

func claimsStore(t *testing.T) *claims.Table {
	client, name := localaws.ClaimsTable(t)
	return claims.NewTable(client, name, claims.TableOptions{})
}

func taskMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs"}
}

// TestClaimsRunTaskOnce delivers one task twice in one batch, and later
// the second copy again and a third: its records are sent once. The copy
// that met the claim held fails, to come back; every later copy succeeds.
func TestClaimsRunTaskOnce(t *testing.T) {
	st := newStack(t, "")
	want, task := st.claimsObject(t, "once.jsonl", 50)
	h, logs := st.handler(t, fanout.Options{Claims: claimsStore(t)}, nil)
	resp := invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task), taskMessage("t2", task)}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "t2"}}) {
		t.Fatalf("failures %v, want the copy that found the task held", resp.BatchItemFailures)
	}
	resp = invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t2", task), taskMessage("t3", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got, _ := received(localaws.Drain(t, st.sqs, st.target, 2*time.Second))
	slices.Sort(got)
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
	st := newStack(t, "")
	want, task := st.claimsObject(t, "resume.jsonl", 300)
	broken := &s3fault.CutAt{S3API: st.s3, At: 300 * 17 / 2}
	st.s3api = broken
	h, logs := st.handler(t, fanout.Options{Claims: claimsStore(t)}, nil)
	resp := invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	cont := localaws.Drain(t, st.sqs, st.work, time.Second)
	if len(cont) != 1 {
		t.Fatalf("%d continuations, want 1", len(cont))
	}
	broken.Heal()
	resp = invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), "task resumes where an earlier attempt stopped") {
		t.Error("the second delivery did not resume from the claim")
	}
	resp = invoke[events.SQSEventResponse](t, h, t.Context(), esm.Event(cont, workARN))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("continuation failed: %v", resp.BatchItemFailures)
	}
	got, _ := received(localaws.Drain(t, st.sqs, st.target, 2*time.Second))
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records over three deliveries (-want +got):\n%s", diff)
	}
}

// TestClaimsTakeOver leaves a claim held by an invocation that died (its
// lease over): the next delivery takes the task over and runs it.
func TestClaimsTakeOver(t *testing.T) {
	st := newStack(t, "")
	want, task := st.claimsObject(t, "dead.jsonl", 20)
	store := claimsStore(t)
	parsed, err := worktask.Parse(task)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Acquire(t.Context(), fanout.ClaimKey(parsed), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	h, logs := st.handler(t, fanout.Options{Claims: store}, nil)
	resp := invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got, _ := received(localaws.Drain(t, st.sqs, st.target, 2*time.Second))
	slices.Sort(got)
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
	st := newStack(t, "")
	_, task := st.claimsObject(t, "held.jsonl", 20)
	store := claimsStore(t)
	parsed, err := worktask.Parse(task)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := store.Acquire(t.Context(), fanout.ClaimKey(parsed), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := st.handler(t, fanout.Options{Claims: store}, nil)
	resp := invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if !cmp.Equal(resp.BatchItemFailures, []events.SQSBatchItemFailure{{ItemIdentifier: "t1"}}) {
		t.Errorf("failures %v, want the held task's message", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), "is being run by another delivery") {
		t.Errorf("the log does not say why:\n%s", logs)
	}
	if err := store.Done(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	resp = invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %v after the holder finished", resp.BatchItemFailures)
	}
	if msgs := localaws.Drain(t, st.sqs, st.target, 2*time.Second); len(msgs) != 0 {
		t.Errorf("%d records sent; the holder sends them", len(msgs))
	}
}
