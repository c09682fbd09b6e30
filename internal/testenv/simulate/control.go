package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The control plane of a scenario (Settings.Control): the runs keep their
// state in a DynamoDB model, and an operator pauses, resumes, cancels and
// sets the rate of the requests' runs at steps drawn from the seed, while
// the faults last. Once they heal the operator resumes every run, putting
// back what a cancel parked, as one would before walking away. The oracle
// adds: no run is done, as `s3sqs status` says it, while a task of it
// waits on the work queue undone; and at the end each run that lost no
// write of its state counts every task it planned as settled, none
// failed, stopped or parked.

// Control is an action on a run.
type Control struct {
	Step int    // the drive's step it is taken at
	Run  int    // the request whose run it steers
	What string // pause, resume, cancel or rate
	Rate int64  // the rate of a "rate" action, 0 to go back to the run's
}

// genControl draws the control plane of sc: whether it has one, its
// actions, and the rate at which writes to the runs' state fail. It draws
// last, so that the rest of a seed's scenario is as it was before.
func genControl(rng *rand.Rand, sc *Scenario, off Off) {
	s := &sc.Settings
	on := rng.Float64() < 0.5 && !off["control"]
	level := []float64{0, 0, 0.02, 0.05}[rng.IntN(4)]
	n := 1 + rng.IntN(5)
	if !on || !s.WorkQueue || !s.Claims || len(sc.Requests) == 0 {
		return
	}
	s.Control = true
	if !off["runs-err"] {
		sc.Rates.RunsErr = level
	}
	for range n {
		a := Control{Step: rng.IntN(25), Run: rng.IntN(len(sc.Requests)), What: []string{"pause", "resume", "cancel", "rate"}[rng.IntN(4)]}
		if a.What == "rate" {
			// Rates a second of real time cannot slow down much.
			a.Rate = []int64{0, 2000, 10000}[rng.IntN(3)]
		}
		sc.Controls = append(sc.Controls, a)
	}
	slices.SortStableFunc(sc.Controls, func(a, b Control) int { return a.Step - b.Step })
	// A third of the direct requests have a failure budget of 0: their
	// first failed record stops the run, parked, until the operator's
	// resume, with the budget off, lets it write its failures off.
	for i := range sc.Requests {
		r := &sc.Requests[i]
		if rng.IntN(3) != 0 || r.Driver != "" || off["budget"] {
			continue
		}
		var req map[string]any
		if err := json.Unmarshal(r.Payload, &req); err != nil {
			panic(err) // made by Generate
		}
		req["maxFailures"] = "0"
		r.Payload, _ = json.Marshal(req)
	}
}

// setUpControl gives the engine the runs' state and a control record read
// at each check.
func (w *world) setUpControl(opts *engine.Options) {
	if !w.sc.Settings.Control {
		return
	}
	w.dynamo = NewDynamoModel(w.faults)
	w.runs = runstate.NewTable(w.dynamo, "runs", runstate.TableOptions{})
	opts.Control.Runs = w.runs
	opts.Control.ReadEvery = time.Nanosecond
	opts.Control.HoldDelay = time.Second
}

// act takes the actions of step. An action whose write fails is as an
// operator's command that failed: not taken.
func (w *world) act(ctx context.Context, step int) {
	if w.runs == nil {
		return
	}
	for _, a := range w.sc.Controls {
		if a.Step != step {
			continue
		}
		id := w.sc.Requests[a.Run].RunID
		switch a.What {
		case "pause":
			w.runs.SetState(ctx, id, runstate.StatePaused)
		case "cancel":
			w.runs.SetState(ctx, id, runstate.StateCancelled)
		case "rate":
			w.runs.SetMaxRate(ctx, id, a.Rate)
		case "resume":
			w.resume(ctx, id)
		}
	}
}

// resume does what `s3sqs resume` does: the run running, then its parked
// messages put back on the work queue, each once. It reports whether it
// changed anything.
func (w *world) resume(ctx context.Context, id string) bool {
	run, err := w.runs.Get(ctx, id)
	if err != nil || run.State == runstate.StateRunning && run.Parked <= run.Unparked {
		return false
	}
	// A run that stopped itself past its budget goes on with none, as
	// `s3sqs resume -max-failures off` has it.
	budget := ""
	if run.Reason != "" || run.MaxFailures != "" {
		budget = "off"
		if _, err := w.runs.SetBudget(ctx, id, budget, ""); err != nil {
			return false
		}
	}
	if _, err := w.runs.SetState(ctx, id, runstate.StateRunning); err != nil {
		return false
	}
	w.runs.Unpark(ctx, id, func(ctx context.Context, n int64, body string) error {
		if budget != "" {
			var err error
			if body, err = worktask.WithBudget(body, worktask.LimitOf(budget), worktask.Limit{}); err != nil {
				return err
			}
		}
		e := worktask.ParkedEntry(id, n, body, w.sc.Settings.WorkFIFO)
		in := types.SendMessageBatchRequestEntry{Id: aws.String(e.ID), MessageBody: aws.String(e.Body)}
		if e.GroupID != "" {
			in.MessageGroupId, in.MessageDeduplicationId = aws.String(e.GroupID), aws.String(e.DeduplicationID)
		}
		out, err := w.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(w.work), Entries: []types.SendMessageBatchRequestEntry{in}})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("put back: %s", aws.ToString(out.Failed[0].Code))
		}
		return err
	})
	return true
}

// resumeAll resumes every run the table knows, healed. It reports whether
// it changed anything.
func (w *world) resumeAll(ctx context.Context) bool {
	if w.runs == nil {
		return false
	}
	changed := false
	for _, id := range w.dynamo.Runs() {
		changed = w.resume(ctx, id) || changed
	}
	return changed
}

// statusDone is `s3sqs status`'s done: tasks planned, all done, none
// parked, and no planning step left.
func statusDone(r runstate.Run) bool {
	return r.TasksPlanned > 0 && r.TasksDone >= r.TasksPlanned && r.Parked <= r.Unparked && r.StepsQueued <= r.StepsDone
}

// checkDoneEarly adds a violation for each run status says is done while
// a task or planning step of it waits on the work queue undone.
func (w *world) checkDoneEarly(ctx context.Context, step int, out *Outcome) {
	if w.runs == nil {
		return
	}
	waiting := map[string]string{}
	for _, m := range w.sqs.Pending(w.work) {
		if t, err := worktask.Parse(m.Body); err == nil && !w.claims.IsDone(engine.ClaimKey(t)) {
			waiting[t.RunID] = "task " + t.ID()
		} else if p, err := worktask.ParsePlan(m.Body); err == nil && !w.claims.IsDone(p.RunID+"/plan/"+p.ID()) {
			waiting[p.RunID] = "planning step " + p.ID()
		}
	}
	for id, what := range waiting {
		if run, err := w.runs.Get(ctx, id); err == nil && statusDone(run) && len(out.Violations) < 40 {
			out.Violations = append(out.Violations, fmt.Sprintf("step %d: status says run %s is done while its %s waits on the work queue: %+v", step, id, what, run))
		}
	}
}

// checkRuns holds each run's record to what became of its tasks, once all
// is settled: every task planned is done or skipped, and none failed,
// stopped or parked, unless a write of the run's state failed.
func (w *world) checkRuns(ctx context.Context, out *Outcome) {
	if w.runs == nil {
		return
	}
	for _, req := range w.sc.Requests {
		id := req.RunID
		run, err := w.runs.Get(ctx, id)
		if errors.Is(err, runstate.ErrNoRun) {
			continue
		}
		switch {
		case err != nil:
			out.Violations = append(out.Violations, fmt.Sprintf("run %s: %v", id, err))
		case w.dynamo.Failed[id] > 0:
			// Counts may be short by what the failed writes held.
		case run.TasksPlanned == 0 && run.TasksDone == 0 && run.Parked == 0:
			// Steered before it started, and it planned no task.
		case w.faults.Stats.ClaimsErr > 0 || w.sc.Settings.Die > 0 || w.sc.Settings.Deadline > 0:
			// A chunk counts done with its delivery's counts, once the
			// claims store has made it done: one whose Done failed, or
			// whose invocation ended between the two writes (it died, or
			// met its deadline), is not done again, and its run stays in
			// progress, never done early (docs/backfills.md). Seeds
			// 2183, 3778, 4150, 4541, 4882, 4952, 7005 and 9081 of 10,000
			// end so.
		case run.State != runstate.StateRunning || !statusDone(run):
			out.Violations = append(out.Violations, fmt.Sprintf("run %s is not done at the end: %+v %s", id, run, w.workMessages(id)))
		case run.TasksPlanned != run.TasksDone:
			out.Violations = append(out.Violations, fmt.Sprintf("run %s counts %d tasks planned and %d done: %+v", id, run.TasksPlanned, run.TasksDone, run))
		}
	}
}

func (w *world) workMessages(id string) string {
	var out []string
	for _, m := range w.sqs.Messages(w.work) {
		if t, err := worktask.Parse(m.Body); err == nil && t.RunID == id {
			out = append(out, fmt.Sprintf("%s:task[%s %d/%d at %d]r%d", m.ID, t.Chunk.Key, t.Chunk.Index, t.Chunk.Count, t.ResumeAt, m.Receives))
		} else if p, err := worktask.ParsePlan(m.Body); err == nil && p.RunID == id {
			out = append(out, fmt.Sprintf("%s:plan%d", m.ID, p.Step))
		}
	}
	return strings.Join(out, " ")
}
