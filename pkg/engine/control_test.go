package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// serialDB is a DynamoDB client that makes one call at a time: moto_server
// checks an UpdateItem's condition and applies its update (an ADD too) as
// two steps that concurrent calls can come between, where DynamoDB makes
// them one per item. One call at a time gives the tests what DynamoDB
// guarantees. It counts the UpdateItems the SDK tried again.
type serialDB struct {
	mu sync.Mutex
	c  runstate.API
	// retried counts the UpdateItems tried more than once: a loaded
	// moto_server sometimes applies one and loses its answer, and the
	// retry, an ADD, then adds twice.
	retried atomic.Int64
}

func (s *serialDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var tries atomic.Int64
	opts = append(opts, func(o *dynamodb.Options) { o.Retryer = countedRetryer{o.Retryer, &tries} })
	out, err := s.c.UpdateItem(ctx, in, opts...)
	if tries.Load() > 0 {
		s.retried.Add(1)
	}
	return out, err
}

// countedRetryer counts the retries the SDK makes.
type countedRetryer struct {
	aws.Retryer
	n *atomic.Int64
}

func (r countedRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	r.n.Add(1)
	return r.Retryer.RetryDelay(attempt, err)
}

func (s *serialDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.GetItem(ctx, in, opts...)
}

func (s *serialDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.TransactWriteItems(ctx, in, opts...)
}

// controlled is a queued run's world: the stack's bucket and queues, a
// work queue whose messages go to a dead-letter queue after three
// receives, a claims table holding the claims and the runs' state, and
// the handlers (each its own Runner, as concurrent invocations have) that
// consume the work queue.
type controlled struct {
	st       *fanoutstack.Stack
	work     string
	dlq      string
	claims   *claims.Table
	runs     *runstate.Table
	db       *serialDB
	handlers []*fanouthandler.Handler
	logs     []*bytes.Buffer
	// maxReceives is the highest ApproximateReceiveCount a delivered task
	// had.
	maxReceives atomic.Int64
}

// newControlled builds the world with n handlers over opts (the work
// queue, claims, runs and chunk size are set here).
func newControlled(t *testing.T, n int, opts engine.Options) *controlled {
	t.Helper()
	c := &controlled{st: fanoutstack.New(t, "")}
	sqsc := c.st.SQS
	c.dlq = localaws.CreateQueue(t, sqsc, "-work-dlq", nil)
	attrs, err := sqsc.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, attrs.Attributes[string(types.QueueAttributeNameQueueArn)])
	c.work = localaws.CreateQueue(t, sqsc, "-work-held", map[string]string{"RedrivePolicy": redrive, "VisibilityTimeout": "20"})
	client, table := localaws.ClaimsTable(t)
	c.db = &serialDB{c: client}
	c.claims = claims.NewTable(c.db, table, claims.TableOptions{})
	c.runs = runstate.NewTable(c.db, table, runstate.TableOptions{})
	opts.WorkQueueURL, opts.Claims, opts.Control.Runs = c.work, c.claims, c.runs
	opts.Plan.ChunkSize = 1 << 10
	opts.Control.ReadEvery = cmpOr(opts.Control.ReadEvery, 100*time.Millisecond)
	opts.Control.HoldDelay = cmpOr(opts.Control.HoldDelay, time.Second)
	c.st.Work = c.work
	for range n {
		h, logs := c.st.Handler(t, opts, nil)
		c.handlers = append(c.handlers, h)
		c.logs = append(c.logs, logs)
	}
	return c
}

func cmpOr(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

// put writes objects of records {"value":"<key>-r000"}..., and returns
// the values.
func (c *controlled) put(t *testing.T, prefix string, objects, records int) []string {
	t.Helper()
	var want []string
	for o := range objects {
		var b strings.Builder
		for i := range records {
			v := fmt.Sprintf("o%d-r%03d", o, i)
			fmt.Fprintf(&b, `{"value":%q}`+"\n", v)
			want = append(want, v)
		}
		c.st.Put(t, fmt.Sprintf("%s%02d.jsonl", prefix, o), b.String())
	}
	return want
}

// consume polls the work queue with each handler, one batch at a time
// each, as Lambda's event source mapping with that many concurrent
// invocations would, until ctx ends.
func (c *controlled) consume(ctx context.Context, t *testing.T) (wait func()) {
	var wg sync.WaitGroup
	for _, h := range c.handlers {
		p := &esm.Poller{Client: c.st.SQS, QueueURL: c.work, QueueARN: fanoutstack.WorkARN, BatchSize: 5,
			Invoke: func(ctx context.Context, ev events.SQSEvent) ([]byte, error) {
				for _, m := range ev.Records {
					n, _ := strconv.ParseInt(m.Attributes["ApproximateReceiveCount"], 10, 64)
					for old := c.maxReceives.Load(); n > old && !c.maxReceives.CompareAndSwap(old, n); old = c.maxReceives.Load() {
					}
				}
				ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				resp, err := h.HandleSQS(ctx, ev)
				if err != nil {
					return nil, err
				}
				return json.Marshal(resp)
			}}
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("poll: %v", err)
					return
				}
			}
		})
	}
	return wg.Wait
}

// run returns the run's record in the table.
func (c *controlled) run(t *testing.T, id string) runstate.Run {
	t.Helper()
	r, err := c.runs.Get(t.Context(), id)
	if errors.Is(err, runstate.ErrNoRun) {
		return runstate.Run{ID: id} // nothing counted yet
	}
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return r
}

// waitFor polls the run until cond holds, or fails the test after limit.
func (c *controlled) waitFor(t *testing.T, id string, limit time.Duration, what string, cond func(runstate.Run) bool) runstate.Run {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := c.run(t, id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still waiting for %s: run %+v", limit, what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finished reports that every task planned is done (or skipped, a second
// delivery of a done one) and no planning step is left.
func finished(r runstate.Run) bool {
	return r.TasksPlanned > 0 && r.TasksDone+r.TasksSkipped >= r.TasksPlanned && r.StepsDone >= r.StepsQueued
}

// depth is how many messages url holds, visible and in flight.
func depth(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	v, f, err := localaws.Depth(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return v + f
}

// invocations sums the Stats of the summary lines in logs.
func invocations(t *testing.T, logs ...*bytes.Buffer) engine.Stats {
	t.Helper()
	var sum engine.Stats
	for _, l := range logs {
		sc := bufio.NewScanner(bytes.NewReader(l.Bytes()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Msg     string                    `json:"message"`
				Summary *fanouthandler.Invocation `json:"summary"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "fanout invocation" && line.Summary != nil {
				sum.Add(line.Summary.Stats)
			}
		}
	}
	return sum
}

// checkCounters holds the run's counters to what the invocations'
// summaries say they did. After an UpdateItem the SDK tried again (see
// serialDB.retried), a counter may hold more, never less.
func checkCounters(t *testing.T, r runstate.Run, s engine.Stats, retried int64) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"recordsRead", r.RecordsRead, s.RecordsRead},
		{"recordsSent", r.RecordsSent, s.RecordsSent},
		{"recordsFailed", r.RecordsFailed, s.RecordsFailed},
		{"messages", r.Messages, s.Messages},
		{"requests", r.Requests, s.Requests},
		{"tasksHeld", r.TasksHeld, int64(s.TasksHeld)},
		{"tasksCancelled", r.TasksCancelled, int64(s.TasksCancelled)},
		{"objects", r.Objects, int64(s.Objects)},
		{"bytesPlanned", r.BytesPlanned, s.BytesPlanned},
	} {
		switch {
		case c.got == c.want:
		case retried > 0 && c.got > c.want:
			t.Logf("run counter %s = %d, the invocations' summaries say %d: %d UpdateItems were tried again", c.name, c.got, c.want, retried)
		default:
			t.Errorf("run counter %s = %d, the invocations' summaries say %d", c.name, c.got, c.want)
		}
	}
}

// checkDelivered drains the target and checks that every record of want
// came, once.
func checkDelivered(t *testing.T, st *fanoutstack.Stack, want []string) {
	t.Helper()
	bodies, ids := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	counts := map[string]int{}
	for _, b := range bodies {
		counts[b]++
	}
	missing, twice := 0, 0
	for _, v := range want {
		switch counts[v] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("record id %s arrived %d times", id, n)
		}
	}
	if missing > 0 || twice > 0 || len(bodies) != len(want) {
		t.Errorf("%d records arrived for %d: %d missing, %d more than once", len(bodies), len(want), missing, twice)
	}
}

// TestRunPauseResumeCancel runs a paced queued run over two concurrent
// consumers of the work queue, pauses it (no record is sent while it is
// paused; its tasks go back on the work queue), resumes it, cancels it
// (its tasks are parked), and resumes it again, putting the parked tasks
// back as `s3sqs resume` does: every record arrives once, no task reaches
// the work queue's dead-letter queue, no task is received more than twice,
// and the run's counters match what the invocations reported.
func TestRunPauseResumeCancel(t *testing.T) {
	c := newControlled(t, 2, engine.Options{Control: engine.Control{MaxRate: 150}, Planning: engine.Planning{InlineMaxBytes: 1}})
	want := c.put(t, "ctl/", 6, 400)
	const id = "ctl-run"
	rep, err := c.handlers[0].HandleRequest(t.Context(), engine.Request{Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "ctl/"}, RunID: id})
	if err != nil || !rep.Queued {
		t.Fatalf("request: %+v, %v", rep, err)
	}
	ctx, stop := context.WithCancel(t.Context())
	wait := c.consume(ctx, t)
	defer func() { stop(); wait() }()

	c.waitFor(t, id, 30*time.Second, "some records sent", func(r runstate.Run) bool { return r.RecordsSent >= 150 })
	if _, err := c.runs.SetState(t.Context(), id, runstate.StatePaused); err != nil {
		t.Fatal(err)
	}
	// What was handed to the send before the pause was seen lands; after
	// that, nothing.
	time.Sleep(time.Second)
	before := depth(t, c.st.SQS, c.st.Target)
	c.waitFor(t, id, 10*time.Second, "tasks held", func(r runstate.Run) bool { return r.TasksHeld > 0 })
	time.Sleep(2 * time.Second)
	if after := depth(t, c.st.SQS, c.st.Target); after != before {
		t.Errorf("the target went from %d to %d messages while the run was paused", before, after)
	}
	paused := c.run(t, id)
	if paused.RecordsSent >= int64(len(want)) {
		t.Fatalf("the run ended before it was paused: %+v", paused)
	}

	if _, err := c.runs.SetState(t.Context(), id, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, id, 30*time.Second, "more records sent", func(r runstate.Run) bool { return r.RecordsSent >= paused.RecordsSent+200 })
	if _, err := c.runs.SetState(t.Context(), id, runstate.StateCancelled); err != nil {
		t.Fatal(err)
	}
	cancelled := c.waitFor(t, id, 10*time.Second, "tasks parked", func(r runstate.Run) bool { return r.TasksCancelled > 0 && r.Parked > 0 })
	// Every task is either parked or done once the queue is empty.
	deadline := time.Now().Add(20 * time.Second)
	for depth(t, c.st.SQS, c.work) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	cancelled = c.run(t, id)
	if cancelled.RecordsSent >= int64(len(want)) {
		t.Fatalf("the run ended before it was cancelled: %+v", cancelled)
	}

	// As `s3sqs resume` does: running again, then the parked tasks back on
	// the work queue.
	if _, err := c.runs.SetState(t.Context(), id, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	n, err := c.runs.Unpark(t.Context(), id, func(ctx context.Context, _ int64, body string) error {
		_, err := c.st.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(c.work), MessageBody: aws.String(body)})
		return err
	})
	if err != nil || n != cancelled.Parked {
		t.Fatalf("unparked %d of %d: %v", n, cancelled.Parked, err)
	}
	end := c.waitFor(t, id, 60*time.Second, "the run to finish", finished)
	stop()
	wait()

	checkDelivered(t, c.st, want)
	if n := depth(t, c.st.SQS, c.dlq); n != 0 {
		t.Errorf("%d tasks in the work queue's dead-letter queue", n)
	}
	if n := c.maxReceives.Load(); n > 2 {
		t.Errorf("a task was received %d times", n)
	}
	if end.RecordsSent != int64(len(want)) || end.TasksDone != end.TasksPlanned || end.Parked != end.Unparked {
		t.Errorf("run at the end %+v: want %d records sent, every task planned done, every parked one put back", end, len(want))
	}
	checkCounters(t, end, invocations(t, c.logs...), c.db.retried.Load()) // the request's summary too
	t.Logf("run at the end: %+v", end.Counters)
}

// TestBackpressure fills the target above targetMaxBacklog before a
// queued run starts: its tasks hold and go back on the work queue, and
// send nothing; once a consumer drains the target they send, and the run
// finishes with every record once and no task in the dead-letter queue.
func TestBackpressure(t *testing.T) {
	// The limit comes with the request, as targetMaxBacklog.
	c := newControlled(t, 2, engine.Options{Planning: engine.Planning{InlineMaxBytes: 1}, Control: engine.Control{Hold: 300 * time.Millisecond}})
	for i := range 60 {
		if _, err := c.st.SQS.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(c.st.Target), MessageBody: aws.String(fmt.Sprintf("filler %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	want := c.put(t, "bp/", 4, 150)
	const id = "bp-run"
	rep, err := c.handlers[0].HandleRequest(t.Context(), engine.Request{Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "bp/"}, RunID: id,
		Overrides: worktask.Overrides{TargetMaxBacklog: worktask.SettingOf("30")}})
	if err != nil || !rep.Queued {
		t.Fatalf("request: %+v, %v", rep, err)
	}
	ctx, stop := context.WithCancel(t.Context())
	wait := c.consume(ctx, t)
	defer func() { stop(); wait() }()
	held := c.waitFor(t, id, 20*time.Second, "tasks held", func(r runstate.Run) bool { return r.TasksHeld >= 4 })
	if held.RecordsSent != 0 || depth(t, c.st.SQS, c.st.Target) != 60 {
		t.Fatalf("records sent while the target's backlog was above the limit: %+v", held)
	}

	// The target's consumer catches up: the run sends.
	var got []types.Message
	var mu sync.Mutex
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for ctx.Err() == nil {
			// A short visibility timeout: a receive whose answer is lost,
			// or cut by the end, hides its messages only from the drain
			// below for a moment.
			out, err := c.st.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.st.Target), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
				VisibilityTimeout: 2, MessageAttributeNames: []string{"All"}})
			if err != nil || len(out.Messages) == 0 {
				continue
			}
			var del []types.DeleteMessageBatchRequestEntry
			for i, m := range out.Messages {
				del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
			}
			// Not cut by the end: a delete that took effect and lost its
			// answer to the cancel would lose its messages from got.
			if _, err := c.st.SQS.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.st.Target), Entries: del}); err == nil {
				mu.Lock()
				got = append(got, out.Messages...)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond) // a slow consumer: the backlog stays near the limit
		}
	}()
	end := c.waitFor(t, id, 60*time.Second, "the run to finish", finished)
	stop()
	wait()
	<-drained
	got = append(got, localaws.Drain(t, c.st.SQS, c.st.Target, 3*time.Second)...)
	bodies, ids := fanoutstack.Received(got)
	counts := map[string]int{}
	for _, b := range bodies {
		counts[b]++
	}
	for _, v := range want {
		if counts[v] != 1 {
			t.Errorf("record %s arrived %d times", v, counts[v])
		}
	}
	for id, n := range ids {
		if id != "" && n > 1 {
			t.Errorf("record id %s arrived %d times", id, n)
		}
	}
	if n := depth(t, c.st.SQS, c.dlq); n != 0 {
		t.Errorf("%d tasks in the work queue's dead-letter queue", n)
	}
	if n := c.maxReceives.Load(); n > 2 {
		t.Errorf("a task was received %d times", n)
	}
	checkCounters(t, end, invocations(t, c.logs...), c.db.retried.Load()) // the request's summary too
	t.Logf("run at the end: %+v", end.Counters)
}

// TestInlinePauseCancel steers a run sent in the invocation that plans it,
// with no work queue (the CLI's): paused, its tasks wait where they are and
// send nothing; resumed, they go on; cancelled, the run ends, its report
// says so, and what it sent arrived once.
func TestInlinePauseCancel(t *testing.T) {
	st := fanoutstack.New(t, "")
	client, table := localaws.ClaimsTable(t)
	db := &serialDB{c: client}
	runs := runstate.NewTable(db, table, runstate.TableOptions{})
	c := &controlled{st: st, runs: runs}
	want := c.put(t, "inline/", 2, 300)
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, Control: engine.Control{Runs: runs, MaxRate: 100, ReadEvery: 100 * time.Millisecond}, Claims: claims.NewTable(db, table, claims.TableOptions{}), Plan: dataset.PlanOptions{ChunkSize: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	const id = "inline-run"
	type answer struct {
		rep engine.Report
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rep, err := r.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: st.Bucket, Prefix: "inline/"}, RunID: id})
		done <- answer{rep, err}
	}()
	// The run's tasks settle, and add to its counters, when the run ends:
	// the target tells how far it is.
	deadline := time.Now().Add(20 * time.Second)
	for depth(t, st.SQS, st.Target) < 50 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := runs.SetState(t.Context(), id, runstate.StatePaused); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	before := depth(t, st.SQS, st.Target)
	time.Sleep(1500 * time.Millisecond)
	if after := depth(t, st.SQS, st.Target); after != before {
		t.Errorf("the target went from %d to %d messages while the run was paused", before, after)
	}
	if before >= len(want) {
		t.Fatalf("the run sent all %d records before it was paused", before)
	}
	if _, err := runs.SetState(t.Context(), id, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for depth(t, st.SQS, st.Target) < before+100 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := runs.SetState(t.Context(), id, runstate.StateCancelled); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end when it was cancelled")
	}
	if a.err != nil || !a.rep.Cancelled || a.rep.TasksCancelled == 0 || a.rep.RecordsSent >= int64(len(want)) || a.rep.RecordsSent <= int64(before) {
		t.Fatalf("report %+v, %v: want a cancelled run that sent some of its %d records after the pause", a.rep, a.err, len(want))
	}
	bodies, ids := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	if len(bodies) != int(a.rep.RecordsSent) || len(ids) != len(bodies) {
		t.Errorf("%d messages arrived with %d record ids; the report says %d records sent", len(bodies), len(ids), a.rep.RecordsSent)
	}
	end := c.run(t, id)
	// Without a work queue nothing parks the cancelled tasks: they count
	// as stopped, and the run has nothing in progress.
	if end.RecordsSent != a.rep.RecordsSent || end.Messages != a.rep.Messages || end.TasksStopped != int64(a.rep.TasksCancelled) ||
		end.TasksCancelled != 0 || end.TasksPlanned != int64(a.rep.Chunks) || end.TasksDone+end.TasksStopped != end.TasksPlanned {
		t.Errorf("run counters %+v do not match the report %+v", end.Counters, a.rep.Stats)
	}
}

// TestHeldGoBack holds a planning step and a task of a paused run: each
// goes back on the work queue as a new message, after HoldDelay on a
// standard queue, and, on a FIFO queue, under a deduplication id of its
// own, so that the copy of a copy is not dropped as a duplicate. A
// cancelled run's step and task are parked instead.
func TestHeldGoBack(t *testing.T) {
	for _, suffix := range []string{"", ".fifo"} {
		t.Run("work"+suffix, func(t *testing.T) {
			st := fanoutstack.New(t, "")
			work := localaws.CreateQueue(t, st.SQS, "-work"+suffix, map[string]string{"ContentBasedDeduplication": "false"})
			client, table := localaws.ClaimsTable(t)
			runs := runstate.NewTable(client, table, runstate.TableOptions{})
			r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: work,
				Control: engine.Control{Runs: runs, ReadEvery: time.Millisecond, HoldDelay: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			_, body, _ := st.Records(t, "held.jsonl", 10)
			task, err := worktask.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			step := worktask.Plan{RunID: task.RunID, Source: dataset.Source{Bucket: st.Bucket, Prefix: "held"}, Step: 2}
			if _, err := runs.SetState(t.Context(), task.RunID, runstate.StatePaused); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				start := time.Now()
				res := r.RunChains(t.Context(), []worktask.Task{task})[0]
				if res.Err != nil || res.Continuation != nil || res.TasksHeld != 1 {
					t.Fatalf("paused task: %+v", res)
				}
				if _, err := r.PlanStep(t.Context(), step); err != nil {
					t.Fatalf("paused step: %v", err)
				}
				// A FIFO queue has no per-message delay: the invocation
				// waits HoldDelay itself, for the task and for the step,
				// or a paused run's messages would loop at once.
				if took := time.Since(start); suffix != "" && took < 2*time.Second {
					t.Errorf("a paused task and step went back on the FIFO work queue after %s; want HoldDelay (1s) each", took)
				}
			}
			if suffix == "" {
				if n := depth(t, st.SQS, work); n != 0 {
					t.Errorf("%d messages visible at once; want them delayed", n)
				}
			}
			var tasks, steps int
			for _, m := range localaws.Drain(t, st.SQS, work, 2500*time.Millisecond) {
				if _, err := worktask.Parse(aws.ToString(m.Body)); err == nil {
					tasks++
				} else if _, err := worktask.ParsePlan(aws.ToString(m.Body)); err == nil {
					steps++
				}
			}
			if tasks != 2 || steps != 2 {
				t.Errorf("%d tasks and %d steps came back, want 2 of each", tasks, steps)
			}
			if _, err := runs.SetState(t.Context(), task.RunID, runstate.StateCancelled); err != nil {
				t.Fatal(err)
			}
			res := r.RunChains(t.Context(), []worktask.Task{task})[0]
			if _, err := r.PlanStep(t.Context(), step); err != nil || res.Err != nil || res.TasksCancelled != 1 {
				t.Fatalf("cancelled: task %+v, step %v", res, err)
			}
			var parked []string
			if _, err := runs.Unpark(t.Context(), task.RunID, func(_ context.Context, _ int64, b string) error { parked = append(parked, b); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(parked) != 2 || parked[0] != body {
				t.Errorf("parked %q, want the task and the step", parked)
			}
			if n := len(localaws.Drain(t, st.SQS, work, 1500*time.Millisecond)); n != 0 {
				t.Errorf("%d messages on the work queue after the cancel", n)
			}
		})
	}
}

// TestResumeRightAfterCancel resumes a cancelled run, putting its parked
// task back, while a Runner still holds the cancel it read (its Pacer reads
// the control record again only after ReadEvery): the task that comes
// back is not parked again, where no resume would find it, but goes back
// on the work queue at once, and its next delivery sends it.
func TestResumeRightAfterCancel(t *testing.T) {
	st := fanoutstack.New(t, "")
	client, table := localaws.ClaimsTable(t)
	runs := runstate.NewTable(client, table, runstate.TableOptions{})
	newRunner := func(every time.Duration) *engine.Runner {
		r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: st.Work,
			Control: engine.Control{Runs: runs, ReadEvery: every}, Claims: claims.NewTable(client, table, claims.TableOptions{})})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stale := newRunner(time.Hour)
	want, body, _ := st.Records(t, "again.jsonl", 20)
	task, err := worktask.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.SetState(t.Context(), task.RunID, runstate.StateCancelled); err != nil {
		t.Fatal(err)
	}
	if res := stale.RunChains(t.Context(), []worktask.Task{task})[0]; res.TasksCancelled != 1 || res.Err != nil {
		t.Fatalf("cancelled: %+v", res)
	}
	// `s3sqs resume`: running, then the parked task back on the work queue.
	if _, err := runs.SetState(t.Context(), task.RunID, runstate.StateRunning); err != nil {
		t.Fatal(err)
	}
	var unparked []string
	if _, err := runs.Unpark(t.Context(), task.RunID, func(_ context.Context, _ int64, b string) error { unparked = append(unparked, b); return nil }); err != nil || len(unparked) != 1 {
		t.Fatalf("unparked %d: %v", len(unparked), err)
	}
	again, err := worktask.Parse(unparked[0])
	if err != nil {
		t.Fatal(err)
	}
	res := stale.RunChains(t.Context(), []worktask.Task{again})[0]
	if res.Err != nil || res.TasksHeld != 1 || res.TasksCancelled != 0 {
		t.Fatalf("the unparked task, met by the stale cancel: %+v; want it held, not parked", res)
	}
	if r, err := runs.Get(t.Context(), task.RunID); err != nil || r.Parked != 1 {
		t.Fatalf("run %+v (%v): want the one park of the cancel only", r, err)
	}
	msgs := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages on the work queue, want the task put back at once", len(msgs))
	}
	back, err := worktask.Parse(aws.ToString(msgs[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	if res := newRunner(0).RunChains(t.Context(), []worktask.Task{back})[0]; res.Err != nil || res.RecordsSent != int64(len(want)) {
		t.Fatalf("the task's next delivery: %+v", res)
	}
	if got := st.Sent(t); len(got) != len(want) {
		t.Errorf("%d records arrived, want %d", len(got), len(want))
	}
}

// deniedBacklog refuses GetQueueAttributes for the backlog, as SQS does
// for a role without sqs:GetQueueAttributes.
type deniedBacklog struct{ sqsbatch.API }

func (d deniedBacklog) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if slices.Contains(in.AttributeNames, types.QueueAttributeNameApproximateNumberOfMessages) {
		return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to perform sqs:GetQueueAttributes"}
	}
	return d.API.GetQueueAttributes(ctx, in, opts...)
}

// TestBacklogDenied: a runner whose role may not read the target's
// attributes fails at New with TARGET_MAX_BACKLOG, and a task whose
// request asks for a backlog limit fails naming it and the permission.
func TestBacklogDenied(t *testing.T) {
	st := fanoutstack.New(t, "")
	api := deniedBacklog{st.SQS}
	_, err := engine.New(t.Context(), st.S3, api, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, Control: engine.Control{TargetMaxBacklog: 10}})
	if err == nil || !strings.Contains(err.Error(), "TARGET_MAX_BACKLOG") || !strings.Contains(err.Error(), "sqs:GetQueueAttributes") {
		t.Fatalf("New: %v; want an error naming TARGET_MAX_BACKLOG and sqs:GetQueueAttributes", err)
	}
	r, err := engine.New(t.Context(), st.S3, api, engine.Options{Target: sqsbatch.Queue{URL: st.Target}})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := st.Records(t, "denied.jsonl", 5)
	task, err := worktask.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	task.Overrides = &worktask.Overrides{TargetMaxBacklog: worktask.SettingOf("10")}
	res := r.RunTasks(t.Context(), []worktask.Task{task}, 0)[0]
	if res.Err == nil || !strings.Contains(res.Err.Error(), "targetMaxBacklog") || !strings.Contains(res.Err.Error(), "sqs:GetQueueAttributes") || res.RecordsSent != 0 {
		t.Errorf("task: %+v; want it failed naming targetMaxBacklog and sqs:GetQueueAttributes", res)
	}
}

// throttledBudget is a claims table whose run-wide budget windows answer
// every UpdateItem with throttling, as a table over its write capacity
// does after the SDK's own retries.
type throttledBudget struct{ runstate.API }

func (d throttledBudget) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k, ok := in.Key[claims.KeyAttribute].(*ddbtypes.AttributeValueMemberS); ok && strings.Contains(k.Value, "#rate#") {
		return nil, &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "the budget's window is throttled"}
	}
	return d.API.UpdateItem(ctx, in, opts...)
}

// TestBudgetThrottledHolds runs a paced task whose budget cannot be taken
// (the table throttles): the task is put back on the work queue, counted
// held, rather than failed toward the work DLQ, and its copy is the task.
func TestBudgetThrottledHolds(t *testing.T) {
	st := fanoutstack.New(t, "")
	work := localaws.CreateQueue(t, st.SQS, "-work", nil)
	client, table := localaws.ClaimsTable(t)
	runs := runstate.NewTable(throttledBudget{&serialDB{c: client}}, table, runstate.TableOptions{})
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: work,
		Control: engine.Control{Runs: runs, MaxRate: 100, ReadEvery: time.Millisecond, HoldDelay: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := st.Records(t, "throttled.jsonl", 10)
	task, err := worktask.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	res := r.RunChains(t.Context(), []worktask.Task{task})[0]
	if res.Err != nil || res.TasksHeld != 1 || res.RecordsSent != 0 {
		t.Fatalf("throttled budget: %+v; want the task held, nothing sent", res)
	}
	back := localaws.Drain(t, st.SQS, work, 2500*time.Millisecond)
	if len(back) != 1 {
		t.Fatalf("%d messages came back on the work queue, want the task", len(back))
	}
	again, err := worktask.Parse(aws.ToString(back[0].Body))
	if err != nil || again.ID() != task.ID() {
		t.Errorf("the copy is %v (%v), want task %s", again.ID(), err, task.ID())
	}
	if n := len(localaws.Drain(t, st.SQS, st.Target, time.Second)); n != 0 {
		t.Errorf("%d messages on the target", n)
	}
}

// throttledBacklog answers GetQueueAttributes for the backlog with
// throttling, as SQS does after the SDK's own retries.
type throttledBacklog struct{ sqsbatch.API }

func (d throttledBacklog) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if slices.Contains(in.AttributeNames, types.QueueAttributeNameApproximateNumberOfMessages) {
		return nil, &smithy.GenericAPIError{Code: "RequestThrottled", Message: "rate exceeded"}
	}
	return d.API.GetQueueAttributes(ctx, in, opts...)
}

// TestBacklogUnreadHolds runs a task with a backlog limit whose target's
// backlog cannot be read for a while (SQS throttles): the task is held,
// put back on the work queue, rather than failed toward the work DLQ.
func TestBacklogUnreadHolds(t *testing.T) {
	st := fanoutstack.New(t, "")
	work := localaws.CreateQueue(t, st.SQS, "-work", nil)
	r, err := engine.New(t.Context(), st.S3, throttledBacklog{st.SQS}, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: work,
		Control: engine.Control{ReadEvery: 10 * time.Millisecond, Hold: 200 * time.Millisecond, HoldDelay: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := st.Records(t, "unread.jsonl", 5)
	task, err := worktask.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	task.Overrides = &worktask.Overrides{TargetMaxBacklog: worktask.SettingOf("10")}
	res := r.RunChains(t.Context(), []worktask.Task{task})[0]
	if res.Err != nil || res.TasksHeld != 1 || res.RecordsSent != 0 || !errors.Is(res.Held, engine.ErrBacklog) {
		t.Fatalf("unread backlog: %+v; want the task held, nothing sent", res)
	}
	if back := localaws.Drain(t, st.SQS, work, 2500*time.Millisecond); len(back) != 1 {
		t.Errorf("%d messages came back on the work queue, want the task", len(back))
	}
}
