package engine_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestRunCountsTasksOnce delivers task messages as SQS does: again after
// a lost delete, again after a failure, while another delivery holds the
// task, and a second message of a done task (a run started again). The
// run counts each task done once, when the claims store makes it done, so
// that planned less done is what is still to do, whatever the number of
// deliveries; the deliveries that failed or were skipped are counted
// beside.
func TestRunCountsTasksOnce(t *testing.T) {
	ctx := t.Context()
	st := fanoutstack.New(t, "")
	client, table := localaws.ClaimsTable(t)
	db := &serialDB{c: client}
	store := claims.NewTable(db, table, claims.TableOptions{})
	runs := runstate.NewTable(db, table, runstate.TableOptions{})
	h, _ := st.Handler(t, engine.Options{Claims: store, Control: engine.Control{Runs: runs}}, nil)

	body := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d"} {
		_, body[k], _ = st.Records(t, k+".jsonl", 5)
	}
	// c's object is gone at first, so that its first delivery fails.
	if _, err := st.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String("c.jsonl")}); err != nil {
		t.Fatal(err)
	}
	deliver := func(ids ...string) (failed []string) {
		t.Helper()
		var ev events.SQSEvent
		for _, id := range ids {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: body[id[:1]], EventSourceARN: fanoutstack.WorkARN})
		}
		resp, err := h.HandleSQS(ctx, ev)
		if err != nil {
			t.Fatalf("deliver %v: %v", ids, err)
		}
		for _, f := range resp.BatchItemFailures {
			failed = append(failed, f.ItemIdentifier)
		}
		return failed
	}
	want := func(when string, w runstate.Counters) {
		t.Helper()
		r, err := runs.Get(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		got := runstate.Counters{TasksPlanned: r.TasksPlanned, TasksDone: r.TasksDone, TasksFailed: r.TasksFailed, TasksSkipped: r.TasksSkipped}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: tasks %+v; want %+v", when, got, w)
		}
	}
	// What planning adds for the first four messages.
	if err := runs.Add(ctx, "r", runstate.Counters{TasksPlanned: 4}); err != nil {
		t.Fatal(err)
	}

	if f := deliver("a1", "b1", "c1"); !slices.Equal(f, []string{"c1"}) {
		t.Fatalf("first delivery: %v failed; want c1", f)
	}
	want("a and b done, c failed", runstate.Counters{TasksPlanned: 4, TasksDone: 2, TasksFailed: 1})

	st.Records(t, "c.jsonl", 5)
	// a1's delete was lost: it comes again, with c1.
	if f := deliver("a1", "c1"); len(f) != 0 {
		t.Fatalf("second delivery: %v failed", f)
	}
	want("a1 again is skipped; c1 now done", runstate.Counters{TasksPlanned: 4, TasksDone: 3, TasksFailed: 1, TasksSkipped: 1})

	// Another delivery holds d: this one comes back, and is no outcome.
	var d worktask.Task
	d, err := worktask.Parse(body["d"])
	if err != nil {
		t.Fatal(err)
	}
	held, err := store.Acquire(ctx, engine.ClaimKey(d), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if f := deliver("d1"); !slices.Equal(f, []string{"d1"}) {
		t.Fatalf("held d: %v failed; want d1 back", f)
	}
	want("d held by another: no failure, it comes back", runstate.Counters{TasksPlanned: 4, TasksDone: 3, TasksFailed: 1, TasksSkipped: 1})
	if err := store.Release(ctx, held, 0); err != nil {
		t.Fatal(err)
	}
	if f := deliver("d1"); len(f) != 0 {
		t.Fatalf("d: %v failed", f)
	}
	want("all four done", runstate.Counters{TasksPlanned: 4, TasksDone: 4, TasksFailed: 1, TasksSkipped: 1})

	// The run started again queues a new message of a, which is done:
	// skipped, and a is not done twice.
	deliver("a2")
	deliver("a2")
	want("a2 skipped", runstate.Counters{TasksPlanned: 4, TasksDone: 4, TasksFailed: 1, TasksSkipped: 3})
}
