package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Buckets and queues of every scenario.
const (
	dataBucket = "sim-data"
	auxBucket  = "sim-aux" // failure output, run report, offload
	failPrefix = "failures"
	repPrefix  = "report"
	offPrefix  = "offload"
	// maxReceives is the work queue's maxReceiveCount.
	maxReceives = 5
)

// Settings are a scenario's engine settings and drivers.
type Settings struct {
	Mode        worktask.Mode
	FIFO        bool
	TargetMax   int   // the target queue's MaximumMessageSize
	ChunkSize   int64 // CHUNK_SIZE
	MaxInFlight int
	Claims      bool
	Offload     bool
	// FailureQueue sends failures to a queue; otherwise to S3.
	FailureQueue bool
	Report       bool
	// WorkQueue configures a work queue, a FIFO one when WorkFIFO is
	// set; InlineMax is INLINE_MAX_BYTES.
	WorkQueue, WorkFIFO bool
	InlineMax           int64
	// Deadline is each invocation's time; zero means none. Margin is
	// DeadlineMargin.
	Deadline, Margin time.Duration
	// Die is the chance that an invocation dies part-way; Redeliver that
	// a work queue message that succeeded is delivered again.
	Die, Redeliver float64
	Versioned      bool
	// Notify is where the scenario's notifications go: "", fanout or
	// s3ingest.
	Notify string
	// Control keeps the runs' state, which Scenario.Controls steer.
	Control bool
}

// Request is one direct request of a scenario, and the objects it covers.
type Request struct {
	// Driver is "" (a direct request), batch-operations or
	// distributed-map.
	Driver  string
	Payload []byte
	RunID   string
	Keys    []string
	// Replay announces the objects to s3ingest (notification mode): their
	// records are read, and their failures reported, by s3ingest's runs.
	Replay bool
}

// Scenario is one generated test case.
type Scenario struct {
	Seed     uint64
	Settings Settings
	Rates    Rates
	Objects  []Object
	Requests []Request
	// Notifications are delivered through a notification queue.
	Notifications []Notification
	// Controls are the operator's actions on the runs (Settings.Control).
	Controls []Control
	// Reconciles are the steps at which a reconcile runs while the faults
	// last; non-nil (maybe empty) runs reconciles once all has settled.
	Reconciles []int
	// Off is what was turned off when the scenario was made.
	Off Off
	// Dump, when set, receives what the queues and buckets hold at the
	// end, for debugging a seed.
	Dump io.Writer
}

// Off turns classes of data and faults off; see Classes and FaultClasses.
type Off map[string]bool

// FaultClasses are the faults that can be turned off by name.
var FaultClasses = []string{"entry-failed", "sqs-500", "throttled", "reset-before", "reset-after", "bad-md5", "sqs-stall",
	"s3-500", "body-cut", "body-stall", "put-refused", "put-lost", "claims-err", "runs-err", "die", "redeliver", "duplicate-notification", "deadline"}

// SettingClasses are settings that can be forced off by name.
var SettingClasses = []string{"chunk", "fifo", "claims", "offload", "work-queue", "versioned", "report", "notifications", "drivers", "overwrites", "control", "work-fifo", "reconcile", "replay", "budget"}

// Generate makes the scenario of seed, without the classes off names.
func Generate(seed uint64, off Off) Scenario {
	rng := rand.New(rand.NewPCG(seed, seedOf(seed, "scenario")))
	// Each choice draws whether or not its class is off, so that turning
	// one off leaves the rest of the scenario as it was.
	pick := func(name string, p float64) bool { x := rng.Float64(); return !off[name] && x < p }
	s := Settings{
		Mode:         worktask.ModeRecord,
		FIFO:         pick("fifo", 0.35),
		TargetMax:    []int{1024, 2048, 4096, 8192, 65536}[rng.IntN(5)],
		ChunkSize:    []int64{1 << 10, 2 << 10, 4 << 10, 64 << 10, 8 << 20}[rng.IntN(5)],
		MaxInFlight:  1 + rng.IntN(8),
		Claims:       pick("claims", 0.5),
		Offload:      pick("offload", 0.25),
		FailureQueue: rng.IntN(2) == 0,
		Report:       pick("report", 0.5),
		WorkQueue:    pick("work-queue", 0.6),
		Versioned:    pick("versioned", 0.3),
	}
	if pick("chunk", 0.4) {
		s.Mode = worktask.ModeChunk
	}
	if inline := []int64{0, 1 << 10, 16 << 10, 64 << 20}[rng.IntN(4)]; s.WorkQueue {
		s.InlineMax = inline
	}
	if dl, margin := time.Duration(150+rng.IntN(600))*time.Millisecond, 20+rng.IntN(30); pick("deadline", 0.5) {
		s.Deadline = dl
		s.Margin = dl * time.Duration(margin) / 100
	}
	if die, rate := rng.IntN(3) == 0, 0.05+rng.Float64()*0.1; s.WorkQueue && die && !off["die"] {
		s.Die = rate
	}
	if again, rate := rng.IntN(3) == 0, 0.1+rng.Float64()*0.2; s.WorkQueue && again && !off["redeliver"] {
		s.Redeliver = rate
	}
	sc := Scenario{Seed: seed, Settings: s, Off: off}
	level := []float64{0, 0.02, 0.05, 0.1}[rng.IntN(4)]
	rate := func(name string, r float64) float64 {
		if rng.IntN(4) == 0 || off[name] {
			return 0
		}
		return r
	}
	sc.Rates = Rates{
		EntryFailed: rate("entry-failed", level*1.5), SQS500: rate("sqs-500", level/2), Throttled: rate("throttled", level/2),
		ResetBefore: rate("reset-before", level/3), ResetAfter: rate("reset-after", level/3), BadMD5: rate("bad-md5", level/3),
		SQSStall: rate("sqs-stall", level/5), S3500: rate("s3-500", level/2), BodyCut: rate("body-cut", level*1.5),
		BodyStall: rate("body-stall", level/3), PutRefused: rate("put-refused", level/4), PutLost: rate("put-lost", level*2),
		ClaimsErr: rate("claims-err", level/3),
	}
	g := &gen{rng: rand.New(rand.NewPCG(seed, seedOf(seed, "data"))), off: off, maxSize: s.TargetMax}
	n := 1 + rng.IntN(6)
	largest := 0
	for i := range n {
		sc.Objects = append(sc.Objects, g.object(i))
		largest = max(largest, len(sc.Objects[i].Data))
	}
	// At most 40 or so chunks an object, so that a scenario stays quick.
	sc.Settings.ChunkSize = max(sc.Settings.ChunkSize, int64(largest/40+1023)&^1023)
	genNotifications(rand.New(rand.NewPCG(seed, seedOf(seed, "notify"))), &sc, off)
	// Requests: the whole prefix, or a few keys, or one key; sometimes
	// two runs over the same objects.
	keys := make([]string, len(sc.Objects))
	for i, o := range sc.Objects {
		keys[i] = o.Key
	}
	nreq := 1 + rng.IntN(2)
	if len(sc.Notifications) > 0 {
		nreq = rng.IntN(2)
	}
	for i := range nreq {
		req := map[string]any{"bucket": dataBucket}
		var cover []string
		switch k := rng.IntN(3); {
		case k == 0 || len(keys) == 1:
			req["prefix"] = "data/"
			cover = keys
		case k == 1:
			cover = []string{keys[rng.IntN(len(keys))]}
			req["key"] = cover[0]
		default:
			cover = slices.Clone(keys[:1+rng.IntN(len(keys))])
			req["keys"] = cover
		}
		if rng.IntN(5) == 0 {
			// The request overrides the mode.
			m := []worktask.Mode{worktask.ModeRecord, worktask.ModeChunk}[rng.IntN(2)]
			// (drawn even with chunk off, as above)
			if m == worktask.ModeRecord || !off["chunk"] {
				req["mode"] = string(m)
			}
		}
		runID := fmt.Sprintf("sim-%d-%d", seed, i)
		req["runId"] = runID
		b, _ := json.Marshal(req)
		r := Request{Payload: b, RunID: runID, Keys: cover}
		if d := []string{"", "", driverBatchOps, driverDistMap}[rng.IntN(4)]; d != "" && !off["drivers"] {
			// Its payload names object versions: it is made once they
			// are stored (setUp).
			r.Driver = d
		}
		sc.Requests = append(sc.Requests, r)
	}
	genControl(rng, &sc, off)
	// Drawn last, so that the rest of a seed's scenario is as it was
	// before there were FIFO work queues.
	sc.Settings.WorkFIFO = s.WorkQueue && pick("work-fifo", 0.35)
	genReplays(seed, &sc, keys, off)
	return sc
}

// Outcome is what a scenario did and what the checker found.
type Outcome struct {
	Seed       uint64
	Records    int
	Deliveries int
	Steps      int
	// BudgetStops counts the tries to stop a run past its failure budget.
	BudgetStops int
	Faults      FaultStats
	Violations  []string
	Duration    time.Duration
}

// world is a scenario's models and engine.
type world struct {
	sc      Scenario
	s3      *S3Model
	sqs     *SQSModel
	faults  *Faults
	claims  *ClaimsModel
	dynamo  *DynamoModel
	runs    *runstate.Table
	handler *fanouthandler.Handler
	target  string
	work    string
	failQ   string
	notes   string
	ingest  *ingesthandler.Handler
	dlq     []*Message
	dlqOf   map[*Message]string // the queue each DLQ message came from
	rng     *rand.Rand
	invs    int
	// pins of the objects as stored: version id (versioned) and ETag.
	versions map[string]string
	etags    map[string]string
	// reconciled counts the runs reconciles made of each key;
	// recons the reconciles, settledRecons those run once all settled.
	reconciled map[string]int

	recons, settledRecons int
}

// Run runs the scenario against the real engine and checks the outcome.
func Run(ctx context.Context, sc Scenario) Outcome {
	start := time.Now()
	w := &world{sc: sc, s3: NewS3Model(), sqs: NewSQSModel(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		faults: NewFaults(seedOf(sc.Seed, "faults"), sc.Rates), rng: rand.New(rand.NewPCG(sc.Seed, seedOf(sc.Seed, "driver"))),
		versions: map[string]string{}, etags: map[string]string{}, dlqOf: map[*Message]string{}, reconciled: map[string]int{}}
	out := Outcome{Seed: sc.Seed}
	if err := w.setUp(ctx); err != nil {
		out.Violations = append(out.Violations, "set-up: "+err.Error())
		return out
	}
	out.Steps = w.drive(ctx, &out)
	w.check(&out)
	w.checkRuns(ctx, &out)
	if sc.Dump != nil {
		w.dump(sc.Dump)
	}
	out.Faults = w.faults.Stats
	if w.dynamo != nil {
		for _, n := range w.dynamo.Stops {
			out.BudgetStops += n
		}
	}
	out.Duration = time.Since(start)
	return out
}

func (w *world) setUp(ctx context.Context) error {
	s := w.sc.Settings
	w.s3.CreateBucket(dataBucket, s.Versioned)
	w.s3.CreateBucket(auxBucket, false)
	for i, o := range w.sc.Objects {
		if w.rng.IntN(5) == 0 && !w.sc.Off["overwrites"] {
			// An earlier version, overwritten before any run: none of its
			// records may be sent (its tokens are in no oracle).
			stale := (&gen{rng: rand.New(rand.NewPCG(w.sc.Seed, uint64(i))), off: Off{}, maxSize: s.TargetMax, prefix: "stale"}).object(i)
			w.s3.Put(dataBucket, o.Key, stale.Data, stale.Encoding)
		}
		if w.rng.IntN(8) == 0 && !w.sc.Off["overwrites"] {
			// An object deleted before any run, which no request names.
			w.s3.Put(dataBucket, "data/deleted/"+path.Base(o.Key), o.Data, "")
			w.s3.Delete(dataBucket, "data/deleted/"+path.Base(o.Key))
		}
		v, e := w.s3.Put(dataBucket, o.Key, o.Data, o.Encoding)
		w.versions[o.Key], w.etags[o.Key] = v, e
	}
	w.sc.Requests = slices.Clone(w.sc.Requests)
	for i, r := range w.sc.Requests {
		if r.Driver != "" {
			w.sc.Requests[i].Payload, w.sc.Requests[i].RunID = driverPayload(w.rng, r.Driver, w.sc.Seed, i, r.Keys, w.sc.Objects, s.Versioned,
				func(k string) (string, string) { return w.versions[k], w.etags[k] })
		}
	}
	name := "target"
	if s.FIFO {
		name += ".fifo"
	}
	w.target = w.sqs.CreateQueue(name, s.TargetMax, false)
	opts := engine.Options{
		Target:           sqsbatch.Queue{URL: w.target},
		Plan:             dataset.PlanOptions{ChunkSize: s.ChunkSize},
		Mode:             s.Mode,
		Send:             sqsbatch.Options{MaxInFlight: s.MaxInFlight, FixedInFlight: w.sc.Seed%2 == 0, MaxBytesInFlight: int64(w.sc.Seed%3) << 18, MaxAttempts: 20, Backoff: func(int) time.Duration { return 0 }},
		Planning:         engine.Planning{InlineMaxBytes: s.InlineMax},
		ChunkConcurrency: 1 + w.rng.IntN(4),
		// fanout's workers run the tasks s3ingest hands off.
	}
	if s.WorkQueue {
		name := "work"
		if s.WorkFIFO {
			name += ".fifo"
		}
		w.work = w.sqs.CreateQueue(name, 0, false)
		opts.WorkQueueURL = w.work
	}
	if s.FailureQueue {
		w.failQ = w.sqs.CreateQueue("failures", 0, false)
		opts.FailureQueueURL = w.failQ
	} else {
		opts.FailureS3URI = "s3://" + auxBucket + "/" + failPrefix
	}
	if s.Report {
		opts.ReportS3URI = "s3://" + auxBucket + "/" + repPrefix
	}
	if s.Offload {
		opts.Offload.S3URI = "s3://" + auxBucket + "/" + offPrefix
		opts.Offload.Mode = sqsextended.ModeLarge
	}
	if s.Claims {
		w.claims = NewClaimsModel(w.faults)
		opts.Claims = w.claims
	}
	w.setUpControl(&opts)
	s3c := &FaultS3{M: w.s3, F: w.faults}
	r, err := engine.New(ctx, s3c, NewFaultSQS(w.sqs, w.faults), opts)
	if err != nil {
		return err
	}
	w.handler = fanouthandler.New(r, s3c, fanouthandler.Options{DeadlineMargin: s.Margin})
	return w.setUpNotify(ctx, opts)
}

// invoke runs one invocation of the handler, which may die part-way.
func (w *world) invoke(ctx context.Context, payload []byte) (any, error, *invocation) {
	return w.invokeWith(ctx, payload, func(ctx context.Context, p []byte) (any, error) { return w.handler.Invoke(ctx, p) })
}

// invokeWith runs one invocation of fn, which may die part-way.
func (w *world) invokeWith(ctx context.Context, payload []byte, fn func(context.Context, []byte) (any, error)) (any, error, *invocation) {
	w.invs++
	ctx, die := context.WithCancelCause(ctx)
	defer die(nil)
	inv := &invocation{id: w.invs, die: die}
	if w.rng.Float64() < w.sc.Settings.Die {
		inv.dieAt = 1 + w.rng.Int64N(8)
	}
	if d := w.sc.Settings.Deadline; d > 0 && !w.faults.healed.Load() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	} else if d > 0 {
		// Healed: a deadline long enough for any scenario.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	out, err := fn(withInvocation(ctx, inv), payload)
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl.Add(-w.sc.Settings.Margin)) {
		// It ran into its work deadline: its send may have stopped with
		// requests in flight, whose records after the first one not
		// accepted its next attempt sends again.
		inv.disrupted.Store(true)
	}
	if inv.died.Load() || inv.disrupted.Load() {
		// A dead invocation's answer is never seen, and a disrupted one
		// leaves records to be sent again: what it sent counts as sent
		// by a request whose answer was lost.
		inv.mu.Lock()
		w.faults.markLost(inv.sentTo...)
		inv.mu.Unlock()
	}
	if inv.died.Load() {
		err = errDied
	}
	if w.claims != nil {
		// The message comes back after its visibility timeout, by
		// when the invocation's leases have run out.
		w.claims.Expire(inv)
	}
	return out, err, inv
}

// drive runs the requests and the work queue until all is done: with
// faults first, then healed.
func (w *world) drive(ctx context.Context, out *Outcome) int {
	done := make([]bool, len(w.sc.Requests))
	const faultSteps, maxSteps = 30, 150
	redriven := 0
	step := 0
	for ; step < maxSteps; step++ {
		if step == faultSteps {
			w.faults.Heal()
			w.resumeAll(ctx)
		}
		if !w.faults.healed.Load() {
			w.act(ctx, step)
			w.reconcileAt(ctx, step)
		}
		w.checkDoneEarly(ctx, step, out)
		w.sqs.Advance(time.Second)
		busy := false
		for i, req := range w.sc.Requests {
			if done[i] {
				continue
			}
			busy = true
			ans, err, _ := w.invoke(ctx, req.Payload)
			var failedItems *fanouthandler.FailedItemsError
			switch {
			case errors.As(err, &failedItems):
				// Step Functions does not retry items that failed for
				// good (a corrupt object is one): the batch is over, and
				// its records are checked one by one.
				done[i] = true
			case err != nil:
			case req.Driver == driverBatchOps:
				// Batch Operations retries the tasks that failed for
				// now; those that failed for good stay failed.
				retry, failed := batchRetry(req.Payload, ans)
				for _, f := range failed {
					if strings.Contains(f, "cannot be read to its end") {
						// A corrupt object is a PermanentFailure by
						// design; its records are checked one by one.
						continue
					}
					out.Violations = append(out.Violations, fmt.Sprintf("request %d: Batch Operations task failed for good: %.300s", i, f))
				}
				if retry == nil {
					done[i] = true
				} else {
					w.sc.Requests[i].Payload = retry
				}
			default:
				done[i] = true
			}
		}
		for _, q := range []string{w.work, w.notes} {
			if q == "" {
				continue
			}
			if msgs := w.sqs.Receive(q, 1+w.rng.IntN(10)); len(msgs) > 0 {
				busy = true
				w.deliver(ctx, q, msgs)
			}
		}
		if busy {
			continue
		}
		if !w.faults.healed.Load() {
			w.faults.Heal()
			w.resumeAll(ctx)
			step = max(step, faultSteps)
			continue
		}
		if w.resumeAll(ctx) || w.reconcileSettled(ctx, out) {
			continue
		}
		if len(w.dlq) > 0 && redriven < 2 {
			// Redrive the work DLQ back, as an operator would.
			redriven++
			for _, m := range w.dlq {
				m.Receives = 0
				w.sqs.Push(w.dlqOf[m], m)
			}
			w.dlq = nil
			continue
		}
		break
	}
	for i, d := range done {
		if !d {
			out.Violations = append(out.Violations, fmt.Sprintf("request %d (%s) never succeeded, even healed", i, w.sc.Requests[i].Payload))
		}
	}
	if step == maxSteps {
		out.Violations = append(out.Violations, fmt.Sprintf("did not settle in %d steps (%d work messages ready)", maxSteps, w.sqs.Ready(w.work)))
	}
	if len(w.dlq) > 0 {
		out.Violations = append(out.Violations, fmt.Sprintf("%d work messages in the dead-letter queue after redrive, the first: %.300s", len(w.dlq), w.dlq[0].Body))
	}
	return step
}

// deliver hands messages received from queue q to their function as one
// SQS event and settles them as the event source mapping does.
func (w *world) deliver(ctx context.Context, q string, msgs []*Message) {
	var res any
	var err error
	if q == w.notes {
		res, err, _ = w.invokeNotes(ctx, sqsEvent("notifications", msgs))
	} else {
		res, err, _ = w.invoke(ctx, sqsEvent("work", msgs))
	}
	failed := map[string]bool{}
	if err != nil {
		for _, m := range msgs {
			failed[m.ID] = true
		}
	} else if resp, ok := res.(events.SQSEventResponse); ok {
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
	}
	var back []*Message
	for _, m := range msgs {
		switch {
		case failed[m.ID] && m.Receives >= maxReceives:
			w.dlq = append(w.dlq, m)
			w.dlqOf[m] = q
		case failed[m.ID]:
			back = append(back, m)
		case !w.faults.healed.Load() && w.rng.Float64() < w.sc.Settings.Redeliver:
			// Delivered again although it succeeded, as SQS now and
			// then does.
			back = append(back, m)
		}
	}
	w.sqs.Return(q, back)
}

// dump writes the target and failure queues and the aux bucket.
func (w *world) dump(out io.Writer) {
	for _, m := range w.sqs.Messages(w.target) {
		fmt.Fprintf(out, "target %s lost=%v attrs=%v body=%.300q\n", m.ID, w.faults.Lost(m.ID), m.Attributes, m.Body)
	}
	if w.failQ != "" {
		for _, m := range w.sqs.Messages(w.failQ) {
			fmt.Fprintf(out, "failure queue: %.400s\n", m.Body)
		}
	}
	for _, k := range w.s3.Keys(auxBucket, "") {
		b, _ := w.s3.Object(auxBucket, k)
		fmt.Fprintf(out, "s3://%s/%s: %.600s\n", auxBucket, k, b)
	}
}
