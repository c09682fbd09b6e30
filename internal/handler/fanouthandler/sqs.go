package fanouthandler

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// HandleSQS answers an SQS event whose messages are chunk tasks, planning
// steps or S3 notifications (see messages) with a partial batch response:
// only the messages that failed come back. The error is the processor's
// (a failed message without a message id: the whole batch comes back), or,
// with FailOnError, that records failed.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := h.opts.Now()
	inv := &Invocation{Kind: "sqs"}
	resp, res, err := h.proc.Process(ctx, ev, h.messages(inv))
	inv.SQSMessages, inv.FailedMessages = res.Messages, res.Failed
	for _, f := range res.Failures {
		h.log.ErrorContext(ctx, "message failed", "messageId", f.MessageID, "reason", f.Reason, "err", f.Err)
	}
	err = h.failOnError(inv, err)
	h.summarize(ctx, inv, start, err)
	return resp, err
}

// batch is an SQS event's messages sorted by kind, each kind with the
// indexes of its messages.
type batch struct {
	tasks   []worktask.Task
	taskMsg []int
	// plans are the indexes of the planning steps, in steps.
	plans []int
	steps []worktask.Plan
	// notes has one message per id: RunNotified answers by id, and the
	// answer is every copy's.
	notes []s3event.Message
	// noteMsg maps a notification's message id to its messages.
	noteMsg map[string][]int
}

// sortMessages sorts msgs by kind. A message that is a malformed task or
// planning step gets its error in errs: it will never run, and goes back
// until the work queue moves it to its dead-letter queue, with this
// reason.
func sortMessages(msgs []events.SQSMessage, errs []error) batch {
	b := batch{steps: make([]worktask.Plan, len(msgs)), noteMsg: map[string][]int{}}
	for i, m := range msgs {
		t, err := worktask.Parse(m.Body)
		if errors.Is(err, worktask.ErrNotTask) {
			if b.steps[i], err = worktask.ParsePlan(m.Body); err == nil {
				b.plans = append(b.plans, i)
				continue
			}
		}
		switch {
		case err == nil:
			t.MessageID = m.MessageId
			b.tasks = append(b.tasks, t)
			b.taskMsg = append(b.taskMsg, i)
		case errors.Is(err, worktask.ErrNotTask):
			if len(b.noteMsg[m.MessageId]) == 0 {
				b.notes = append(b.notes, s3event.Message{ID: m.MessageId, Body: m.Body})
			}
			b.noteMsg[m.MessageId] = append(b.noteMsg[m.MessageId], i)
		default:
			errs[i] = err
		}
	}
	return b
}

// messages returns the partial-batch handler of an SQS event's messages:
// chunk tasks run together, so that small ones share requests; planning
// steps run beside them; each notification is a run of its own.
func (h *Handler) messages(inv *Invocation) partialbatch.Handler {
	return func(ctx context.Context, msgs []events.SQSMessage) []error {
		errs := make([]error, len(msgs))
		b := sortMessages(msgs, errs)
		defer h.planSteps(ctx, inv, b, errs)()
		h.runTasks(ctx, inv, b, errs)
		for _, r := range h.notifications(ctx, inv, b.notes) {
			for _, i := range b.noteMsg[r.messageID] {
				errs[i] = r.err
			}
		}
		return errs
	}
}

// planSteps starts b's planning steps, each one's error in errs, and
// returns the function that waits for them and adds them to inv. They
// list and queue while the tasks send: they wait mostly on S3 and SQS,
// not on the CPU. Up to Concurrency run at once; the rest wait inside
// their goroutines, so that the tasks start now (an errgroup's Go would
// block this call at its limit instead).
func (h *Handler) planSteps(ctx context.Context, inv *Invocation, b batch, errs []error) (wait func()) {
	var planning sync.WaitGroup
	slots := make(chan struct{}, h.opts.Concurrency)
	planned := make([]engine.Report, len(b.steps))
	for _, i := range b.plans {
		planning.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			planned[i], errs[i] = h.runner.PlanStep(ctx, b.steps[i])
		})
	}
	return func() {
		planning.Wait()
		for _, i := range b.plans {
			rep := planned[i]
			inv.PlanSteps++
			inv.Stats.Add(rep.Stats)
			inv.Queued = inv.Queued || rep.Queued
			inv.PlanContinued = inv.PlanContinued || rep.PlanContinued
			inv.RunID = cmp.Or(inv.RunID, rep.RunID)
		}
	}
}

// runTasks runs b's chunk tasks, each FIFO chain in order (RunChains
// queues the continuation of each that stopped early); each task's error
// goes in errs.
func (h *Handler) runTasks(ctx context.Context, inv *Invocation, b batch, errs []error) {
	for j, res := range h.runner.RunChains(ctx, b.tasks) {
		i := b.taskMsg[j]
		inv.Stats.Add(res.Stats)
		inv.BadRecords += res.BadRecords
		// RunChains has queued the continuation of each task that
		// stopped early; one that could not be queued, or would be the
		// task itself, failed it, and its message comes back.
		errs[i] = res.Err
		if res.ContinuationQueued {
			inv.Continuations++
		}
	}
}
