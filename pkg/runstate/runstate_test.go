package runstate_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

func TestSetStateGet(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123).UTC()
	tab, _ := newTable(t, runstate.TableOptions{Now: func() time.Time { return now }})
	ctx := t.Context()

	if _, err := tab.Get(ctx, "r1"); !errors.Is(err, runstate.ErrNoRun) {
		t.Fatalf("Get of a run never written: %v, want ErrNoRun", err)
	}
	run, err := tab.SetState(ctx, "r1", runstate.StatePaused)
	if err != nil {
		t.Fatal(err)
	}
	want := runstate.Run{ID: "r1", State: runstate.StatePaused, Started: now, Updated: now}
	if !reflect.DeepEqual(run, want) {
		t.Errorf("SetState = %+v, want %+v", run, want)
	}

	started := now
	now = now.Add(time.Minute)
	run, err = tab.SetMaxRate(ctx, "r1", 300)
	if err != nil {
		t.Fatal(err)
	}
	want = runstate.Run{ID: "r1", State: runstate.StatePaused, MaxRate: 300, Started: started, Updated: now}
	if !reflect.DeepEqual(run, want) {
		t.Errorf("SetMaxRate = %+v, want %+v", run, want)
	}
	if got, err := tab.Get(ctx, "r1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, want)
	}
	if run, err := tab.SetState(ctx, "r1", runstate.StateRunning); err != nil || run.State != runstate.StateRunning || run.MaxRate != 300 {
		t.Errorf("SetState(running) = %+v, %v; want running at rate 300", run, err)
	}

	if _, err := tab.SetState(ctx, "r1", "stopped"); err == nil {
		t.Error("SetState(stopped) took a state that is none")
	}
	if _, err := tab.SetMaxRate(ctx, "r1", -1); err == nil {
		t.Error("SetMaxRate(-1) took a rate below 0")
	}
}

// TestAdd checks that counters added at once by many writers add up, and
// that a run written only by Add reads as running.
func TestAdd(t *testing.T) {
	tab, client := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				errs <- tab.Add(ctx, "r", runstate.Counters{TasksDone: 1, RecordsSent: 7, BytesRead: int64(g*10 + i)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	before := client.calls.Load()
	if err := tab.Add(ctx, "r", runstate.Counters{}); err != nil || client.calls.Load() != before {
		t.Errorf("Add of nothing: %v, and %d calls, want none", err, client.calls.Load()-before)
	}
	run, err := tab.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := runstate.Counters{TasksDone: 80, RecordsSent: 560, BytesRead: 79 * 80 / 2}
	if !reflect.DeepEqual(run.Counters, want) || run.State != runstate.StateRunning || run.Started.IsZero() {
		t.Errorf("Get = %+v, want counters %+v, running, a start time", run, want)
	}
}

func TestTake(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	at := time.Unix(1_700_000_000, 500_000_000)
	for i, want := range []int64{4, 4, 2, 0} {
		if got, err := tab.Take(ctx, "r", at, 4, 10); err != nil || got != want {
			t.Errorf("Take %d of 4 with limit 10 = %d, %v; want %d", i+1, got, err, want)
		}
	}
	if got, err := tab.Take(ctx, "r", at.Add(time.Second), 15, 10); err != nil || got != 10 {
		t.Errorf("Take of 15 with limit 10 in the next second = %d, %v; want 10", got, err)
	}
	if got, err := tab.Take(ctx, "other", at, 3, 10); err != nil || got != 3 {
		t.Errorf("Take of another run = %d, %v; want 3", got, err)
	}
}

// TestTakeConcurrent checks that takers at once get the window's limit
// between them, no more and no less.
func TestTakeConcurrent(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	at := time.Unix(1_700_000_000, 0)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		fail  error
	)
	for range 8 {
		wg.Go(func() {
			for {
				got, err := tab.Take(ctx, "r", at, 3, 50)
				mu.Lock()
				total += got
				fail = errors.Join(fail, err)
				mu.Unlock()
				if got == 0 || err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if fail != nil || total != 50 {
		t.Errorf("8 takers of 3 from a limit of 50 took %d (%v), want 50", total, fail)
	}
}

func TestParkUnpark(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	if n, err := tab.Unpark(ctx, "r", nil); n != 0 || err != nil {
		t.Fatalf("Unpark of a run never written = %d, %v; want 0, nil", n, err)
	}
	for _, b := range []string{"a", "b", "c"} {
		if err := tab.Park(ctx, "r", b); err != nil {
			t.Fatal(err)
		}
	}

	var put []string
	errQueue := errors.New("queue unavailable")
	calls := 0
	failSecond := func(_ context.Context, _ int64, body string) error {
		if calls++; calls == 2 {
			return errQueue
		}
		put = append(put, body)
		return nil
	}
	collect := func(_ context.Context, _ int64, body string) error {
		put = append(put, body)
		return nil
	}

	if n, err := tab.Unpark(ctx, "r", failSecond); n != 1 || !errors.Is(err, errQueue) {
		t.Fatalf("Unpark whose put fails the second time = %d, %v; want 1 and the put's error", n, err)
	}
	if n, err := tab.Unpark(ctx, "r", collect); n != 2 || err != nil {
		t.Fatalf("Unpark after one cut short = %d, %v; want the 2 left", n, err)
	}
	if n, err := tab.Unpark(ctx, "r", collect); n != 0 || err != nil {
		t.Fatalf("Unpark after a complete one = %d, %v; want 0", n, err)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(put, want) {
		t.Errorf("put %q, want %q", put, want)
	}

	if err := tab.Park(ctx, "r", "d"); err != nil {
		t.Fatal(err)
	}
	if n, err := tab.Unpark(ctx, "r", collect); n != 1 || err != nil || put[len(put)-1] != "d" {
		t.Errorf("Unpark after a later Park = %d, %v, put %q; want d alone", n, err, put)
	}
	if run, err := tab.Get(ctx, "r"); err != nil || run.Parked != 4 || run.Unparked != 4 {
		t.Errorf("Get = %+v, %v; want 4 parked, 4 unparked", run, err)
	}
}

// hooked calls before ahead of each UpdateItem, so that a test can order
// a Park's write and an Unpark's against each other.
type hooked struct {
	runstate.API
	before func(in *dynamodb.UpdateItemInput)
}

func (h *hooked) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	h.before(in)
	return h.API.UpdateItem(ctx, in, opts...)
}

// TestParkWrittenDuringUnpark orders a slow Park's message write (a
// throttled table) against a resume's Unpark, both ways: the message is
// either put back, or refused to its Park (ErrPassedOver) so that its
// task runs again; it is never recorded as put back and lost.
func TestParkWrittenDuringUnpark(t *testing.T) {
	client, name := localaws.ClaimsTable(t)
	// waitFor waits for ch, or fails the test rather than hang when the
	// write it waits for never comes.
	waitFor := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("no %s after 10 s", what)
		}
	}
	isBodyWrite := func(in *dynamodb.UpdateItemInput) bool {
		return strings.Contains(aws.ToString(in.UpdateExpression), "#body = :body")
	}
	isPassOver := func(in *dynamodb.UpdateItemInput) bool {
		return strings.Contains(aws.ToString(in.UpdateExpression), "#passed = :true")
	}
	collect := func(put *[]string) func(context.Context, int64, string) error {
		return func(_ context.Context, _ int64, body string) error { *put = append(*put, body); return nil }
	}

	t.Run("the resume passes over it first", func(t *testing.T) {
		release, parking := make(chan struct{}), make(chan struct{})
		h := &hooked{API: client, before: func(in *dynamodb.UpdateItemInput) {
			if isBodyWrite(in) {
				close(parking)
				waitFor(release, "release of the park's write")
			}
		}}
		tab := runstate.NewTable(h, name, runstate.TableOptions{})
		parked := make(chan error, 1)
		go func() { parked <- tab.Park(context.Background(), "first", "task") }()
		waitFor(parking, "park")
		var put []string
		n, err := tab.Unpark(t.Context(), "first", collect(&put))
		close(release)
		if perr := <-parked; !errors.Is(perr, runstate.ErrPassedOver) {
			t.Errorf("Park written after Unpark passed over it: %v, want ErrPassedOver", perr)
		}
		if n != 0 || err != nil || len(put) != 0 {
			t.Errorf("Unpark = %d, %v, put %q; want nothing put back", n, err, put)
		}
	})

	t.Run("the park is written just before the resume passes over it", func(t *testing.T) {
		release, parking, written := make(chan struct{}), make(chan struct{}), make(chan struct{})
		h := &hooked{API: client}
		h.before = func(in *dynamodb.UpdateItemInput) {
			switch {
			case isBodyWrite(in):
				close(parking)
				waitFor(release, "pass-over write of the resume")
			case isPassOver(in):
				// Unpark read the number without its message; the Park's
				// write lands now, before Unpark's.
				close(release)
				waitFor(written, "write of the park")
			}
		}
		tab := runstate.NewTable(h, name, runstate.TableOptions{})
		parked := make(chan error, 1)
		go func() {
			err := tab.Park(context.Background(), "second", "task")
			close(written)
			parked <- err
		}()
		waitFor(parking, "park")
		var put []string
		n, err := tab.Unpark(t.Context(), "second", collect(&put))
		if perr := <-parked; perr != nil {
			t.Errorf("Park: %v", perr)
		}
		if n != 1 || err != nil || len(put) != 1 || put[0] != "task" {
			t.Errorf("Unpark = %d, %v, put %q; want the task put back", n, err, put)
		}
	})
}

// TestAddOnce adds a planning's counts under its key once, however often
// the planning is made again, and another key's beside.
func TestAddOnce(t *testing.T) {
	ctx := t.Context()
	tab, _ := newTable(t, runstate.TableOptions{})
	if note, added, err := tab.Once(ctx, "r", "plan-a"); note != "" || added || err != nil {
		t.Errorf("Once before = %q, %v, %v; want nothing added", note, added, err)
	}
	for i, k := range []string{"plan-a", "plan-a", "plan-b", "plan-a"} {
		added, err := tab.AddOnce(ctx, "r", k, runstate.Counters{TasksPlanned: 5, StepsDone: 1}, fmt.Sprintf("note %d", i))
		if want := i == 0 || i == 2; added != want || err != nil {
			t.Errorf("AddOnce #%d (%s) = %v, %v; want %v", i+1, k, added, err, want)
		}
	}
	if note, added, err := tab.Once(ctx, "r", "plan-a"); note != "note 0" || !added || err != nil {
		t.Errorf("Once = %q, %v, %v; want the first AddOnce's note", note, added, err)
	}
	run, err := tab.Get(ctx, "r")
	if err != nil || run.TasksPlanned != 10 || run.StepsDone != 2 {
		t.Errorf("Get = %+v, %v; want 10 planned, 2 steps done", run.Counters, err)
	}
}

// TestTallyStop counts failures by code as counters are added, and stops a
// running run once, with its reason, which a state set by an operator
// clears; a paused run is not stopped.
func TestTallyStop(t *testing.T) {
	tab, _ := newTable(t, runstate.TableOptions{})
	ctx := t.Context()
	if _, err := tab.Tally(ctx, "r", runstate.Counters{RecordsRead: 10, RecordsFailed: 3}, map[string]int64{"BadRecord": 2, "AWS.SimpleQueueService.InvalidCharacters": 1}); err != nil {
		t.Fatal(err)
	}
	run, err := tab.Tally(ctx, "r", runstate.Counters{RecordsRead: 5, RecordsFailed: 5, ObjectsFailed: 1}, map[string]int64{"BadRecord": 5})
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := map[string]int64{"BadRecord": 7, "AWS.SimpleQueueService.InvalidCharacters": 1}
	if run.RecordsRead != 15 || run.RecordsFailed != 8 || run.ObjectsFailed != 1 || !reflect.DeepEqual(run.FailureCodes, wantCodes) {
		t.Errorf("Tally returned %+v, want 15 read, 8 failed, 1 object failed, failures %v", run, wantCodes)
	}
	if got, err := tab.Get(ctx, "r"); err != nil || !reflect.DeepEqual(got.FailureCodes, wantCodes) {
		t.Errorf("Get: failures %v, %v; want %v", got.FailureCodes, err, wantCodes)
	}

	for i, want := range []bool{true, false} {
		ok, err := tab.Stop(ctx, "r", fmt.Sprintf("reason %d", i))
		if err != nil || ok != want {
			t.Errorf("Stop %d = %v, %v; want %v", i, ok, err, want)
		}
	}
	if got, _ := tab.Get(ctx, "r"); got.State != runstate.StateCancelled || got.Reason != "reason 0" {
		t.Errorf("after Stop: %s %q, want cancelled with the first reason", got.State, got.Reason)
	}
	if got, err := tab.SetState(ctx, "r", runstate.StateRunning); err != nil || got.Reason != "" || got.State != runstate.StateRunning {
		t.Errorf("SetState running = %s %q, %v; want running, no reason", got.State, got.Reason, err)
	}
	if _, err := tab.SetState(ctx, "r", runstate.StatePaused); err != nil {
		t.Fatal(err)
	}
	if ok, err := tab.Stop(ctx, "r", "late"); ok || err != nil {
		t.Errorf("Stop of a paused run = %v, %v; want false", ok, err)
	}
	if ok, err := tab.Stop(ctx, "new", "first write"); !ok || err != nil {
		t.Errorf("Stop of a run with no record = %v, %v; want true", ok, err)
	}
}
