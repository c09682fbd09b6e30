package simulate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// TestConformanceDynamo holds the DynamoDB model to moto_server on what
// runstate.Table does with it: the same script of control, counter,
// budget, parking and settling calls gives the same answers and the same
// records on both.
func TestConformanceDynamo(t *testing.T) {
	client, name := localaws.ClaimsTable(t)
	now := func() time.Time { return time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC) }
	real := runstate.NewTable(client, name, runstate.TableOptions{Now: now})
	model := runstate.NewTable(NewDynamoModel(nil), name, runstate.TableOptions{Now: now})
	got := make([][]string, 2)
	for i, tab := range []*runstate.Table{real, model} {
		got[i] = controlScript(t.Context(), tab, now())
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("moto_server (-) and the model (+) differ:\n%s", diff)
	}
}

// controlScript makes the calls of a run's life on tab and returns what
// each answered.
func controlScript(ctx context.Context, tab *runstate.Table, at time.Time) []string {
	var out []string
	note := func(what string, v ...any) { out = append(out, fmt.Sprintf(what, v...)) }
	_, err := tab.Get(ctx, "r")
	note("get before: %v", err)
	note("add: %v", tab.Add(ctx, "r", runstate.Counters{TasksPlanned: 5, BytesPlanned: 100}))
	for range 3 {
		n, err := tab.Take(ctx, "r", at, 4, 10)
		note("take: %d %v", n, err)
	}
	run, err := tab.SetState(ctx, "r", runstate.StatePaused)
	note("pause: %+v %v", run, err)
	run, err = tab.SetMaxRate(ctx, "r", 7)
	note("rate: %+v %v", run, err)
	for _, b := range []string{"a", "b", "c"} {
		note("park %s: %v", b, tab.Park(ctx, "r", b))
	}
	var put []string
	n, err := tab.Unpark(ctx, "r", func(_ context.Context, i int64, body string) error {
		put = append(put, fmt.Sprintf("%d=%s", i, body))
		return nil
	})
	note("unpark: %d %v %v", n, put, err)
	n, err = tab.Unpark(ctx, "r", func(context.Context, int64, string) error { return nil })
	note("unpark again: %d %v", n, err)
	for i := range 2 {
		added, err := tab.AddOnce(ctx, "r", "planned", runstate.Counters{StepsQueued: 1}, fmt.Sprint("extent ", i))
		note("add once: %v %v", added, err)
		text, added, err := tab.Once(ctx, "r", "planned")
		note("once: %q %v %v", text, added, err)
	}
	text, added, err := tab.Once(ctx, "r", "unplanned")
	note("once of another: %q %v %v", text, added, err)
	// A failure budget spent: the run stops itself once, while running;
	// a resume gives it a budget and runs it, which clears the reason.
	run, err = tab.Tally(ctx, "r", runstate.Counters{RecordsFailed: 3, ObjectsFiltered: 2, FilteredBy: map[string]int64{"minSize": 2}}, map[string]int64{"UnreadableRecord": 3})
	note("tally: %+v %v", run, err)
	run, err = tab.SetState(ctx, "r", runstate.StatePaused)
	note("pause: %+v %v", run, err)
	stopped, err := tab.Stop(ctx, "r", "failure budget spent")
	note("stop while paused: %v %v", stopped, err)
	run, err = tab.SetState(ctx, "r", runstate.StateRunning)
	note("run: %+v %v", run, err)
	stopped, err = tab.Stop(ctx, "r", "failure budget spent")
	note("stop: %v %v", stopped, err)
	stopped, err = tab.Stop(ctx, "r", "again")
	note("stop again: %v %v", stopped, err)
	run, err = tab.SetBudget(ctx, "r", "off", "")
	note("budget: %+v %v", run, err)
	run, err = tab.SetState(ctx, "r", runstate.StateRunning)
	note("resume: %+v %v", run, err)
	run, err = tab.Get(ctx, "r")
	note("get: %+v %v", run, err)
	return out
}
