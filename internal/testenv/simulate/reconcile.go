package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// A replay is a fanout request in notification mode whose target is the
// notification queue of a scenario whose notifications go to s3ingest: it
// announces every object under the prefix again, as `s3sqs fanout -mode
// notification` does, and s3ingest ingests each once more (a run of its
// own: the oracle counts it as one). An operator may pause or cancel it
// while the faults last, as any run.
//
// Reconciles (Scenario.Reconciles) run `s3sqs reconcile` against the
// notification queue of a scenario whose notifications go to s3ingest
// with a claims table: at steps drawn from the seed while the faults last
// (a listing, a marker lookup or a send may fail, as an operator's
// command can), and once all has settled healed, until a reconcile finds
// nothing missing. The oracle adds: every record of every object under
// the prefix is delivered (each object a reconcile announced counts as
// one more run of it), and a second reconcile after the one that sent the
// rest finds no object missing: s3ingest marks each object it ingested,
// whatever notification brought it.
//
// Only unversioned buckets are reconciled: in a versioned one, the older
// versions a scenario overwrote are data that reconcile announces by
// design, and the oracle has no records for them.

// genReplays draws the replay and the reconciles of sc from their own
// stream, so that the rest of a seed's scenario is as it was before there
// were any.
func genReplays(seed uint64, sc *Scenario, keys []string, off Off) {
	rng := rand.New(rand.NewPCG(seed, seedOf(seed, "reconcile")))
	replay, steer := rng.Float64() < 0.3 && !off["replay"], Control{Step: rng.IntN(5), What: []string{"", "pause", "cancel"}[rng.IntN(3)]}
	recon, n := rng.Float64() < 0.6 && !off["reconcile"], rng.IntN(3)
	s := sc.Settings
	if s.Notify != notifyIngest || len(sc.Notifications) == 0 {
		return
	}
	if replay {
		runID := fmt.Sprintf("sim-%d-replay", seed)
		b, _ := json.Marshal(map[string]any{"bucket": dataBucket, "prefix": "data/", "mode": worktask.ModeNotification,
			"targetQueueUrl": QueueURLPrefix + notesQueue, "runId": runID})
		sc.Requests = append(sc.Requests, Request{Payload: b, RunID: runID, Keys: keys, Replay: true})
		if steer.What != "" && s.Control {
			steer.Run = len(sc.Requests) - 1
			sc.Controls = append(sc.Controls, steer)
		}
	}
	if !recon || !s.Claims || s.Versioned {
		return
	}
	sc.Reconciles = []int{}
	for range n {
		sc.Reconciles = append(sc.Reconciles, rng.IntN(5))
	}
}

// ingested is the claims model as reconcile reads it.
type ingested struct{ m *ClaimsModel }

func (i ingested) IsDone(ctx context.Context, key string) (bool, error) {
	if err := i.m.fault(ctx, "IsDone", key); err != nil {
		return false, err
	}
	return i.m.IsDone(key), nil
}

// reconcile runs one reconcile of the data prefix, its notifications sent
// to the notification queue, and counts the objects it announced as runs
// of them.
func (w *world) reconcile(ctx context.Context) (reconcile.Report, error) {
	to, err := sqsbatch.New(ctx, NewFaultSQS(w.sqs, w.faults), sqsbatch.Queue{URL: w.notes},
		sqsbatch.Options{MaxAttempts: 20, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		return reconcile.Report{}, err
	}
	w.recons++
	rep, err := reconcile.Run(ctx, &FaultS3{M: w.s3, F: w.faults}, ingested{w.claims}, reconcile.Options{
		Bucket: dataBucket, Prefix: "data/", MaxAge: -1, SendTo: to, Region: "us-east-1",
		RunID: fmt.Sprintf("sim-%d-reconcile-%d", w.sc.Seed, w.recons),
	})
	for _, o := range rep.Objects {
		// Sent or not (a send that failed may have been taken).
		w.reconciled[o.Key]++
	}
	return rep, err
}

// reconcileAt runs the reconciles of step.
func (w *world) reconcileAt(ctx context.Context, step int) {
	for _, s := range w.sc.Reconciles {
		if s == step {
			w.reconcile(ctx)
		}
	}
}

// reconcileSettled runs a reconcile once all has settled healed, and
// reports whether it sent anything to settle. The second in a row that
// still finds objects missing is a violation.
func (w *world) reconcileSettled(ctx context.Context, out *Outcome) bool {
	if w.sc.Reconciles == nil {
		return false
	}
	rep, err := w.reconcile(ctx)
	w.settledRecons++
	switch {
	case err == nil && rep.Missing == 0 && rep.Failed == 0:
		return false
	case w.settledRecons >= 2:
		out.Violations = append(out.Violations, fmt.Sprintf("reconcile %d after all settled healed: %d objects missing, %d failed (%v): %+v", w.settledRecons, rep.Missing, rep.Failed, err, rep.Objects))
		return false
	}
	return true
}
