package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Bounds of the automatic deadline margin: a tenth of the time the
// invocation had, within these, and never more than half of it.
const (
	minAutoMargin = 2 * time.Second
	maxAutoMargin = 30 * time.Second
)

// Handler answers SQS events whose messages are S3 notifications: it reads
// the objects they name and sends their records to the output queue, and
// reports in batchItemFailures the messages whose objects were not all
// delivered. It is safe for concurrent use: each call of Handle has its own
// state.
type Handler struct {
	cfg     config
	s3      dataset.GetAPI
	output  *sqsbatch.Sender
	handoff *sqsbatch.Sender // nil when HANDOFF_BYTES is not set
	planner *dataset.Planner
	log     *slog.Logger
	// out receives the summary line and the EMF document of each
	// invocation: stdout in Lambda.
	out io.Writer
	now func() time.Time
}

// newHandler returns a Handler that reads with s3c and sends with output
// (and handoff, which may be nil when cfg.handoffBytes is zero). log gets
// warnings and errors; out gets one summary line and one EMF line per
// invocation.
func newHandler(cfg config, s3c dataset.GetAPI, output, handoff *sqsbatch.Sender, log *slog.Logger, out io.Writer) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if out == nil {
		out = io.Discard
	}
	return &Handler{
		cfg:     cfg,
		s3:      s3c,
		output:  output,
		handoff: handoff,
		planner: dataset.NewPlanner(s3c, cfg.plan),
		log:     log,
		out:     out,
		now:     time.Now,
	}
}

// Invoke is the Lambda entry point: it reads the payload as an SQS event
// and processes it with Handle. Any other payload (null, {}, an S3 or SNS
// event sent to the function directly) is an error that says what it is,
// so that a miswired trigger does not look healthy.
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (events.SQSEventResponse, error) {
	ev, err := partialbatch.Decode(payload)
	if err != nil {
		h.log.ErrorContext(ctx, "s3ingest was not invoked with an SQS event", "err", err)
		return events.SQSEventResponse{}, fmt.Errorf("s3ingest: %w", err)
	}
	return h.Handle(ctx, ev)
}

// Handle processes one batch. Every message that is not fully processed
// (a parse failure, an object not fully delivered, a deadline, a FIFO
// message after a failure) is reported in batchItemFailures, so that only
// it comes back; test events and filtered-out objects succeed.
//
// Handle returns an error only when it cannot answer at all: a message to
// report has no message id, so that it cannot be named. Lambda then fails
// the whole batch, which comes back whole: the only safe answer left.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	inv := h.newInvocation(ev)
	inv.run(ctx)
	resp, err := inv.response()
	h.report(ctx, inv)
	if err != nil {
		h.log.ErrorContext(ctx, "s3ingest cannot answer; the whole batch fails", "err", err)
	}
	return resp, err
}

// Why a message failed, for the log and the summary.
const (
	failParse     = "parse"
	failObject    = "object"
	failDeadline  = "deadline"
	failFIFOBlock = "fifo-earlier-failure"
	failFIFOGroup = "fifo-group-failed"
)

// message is one SQS message of the batch.
type message struct {
	id      string
	body    string
	group   string // MessageGroupId on a FIFO queue
	objects []*objectRun
	// failed says why the message is reported, or is empty.
	failed string
	err    error
}

func (m *message) fail(why string, err error) {
	if m.failed == "" {
		m.failed, m.err = why, err
	}
}

// invocation is the state of one Handle call.
type invocation struct {
	h       *Handler
	start   time.Time
	msgs    []*message
	objects []*objectRun // accepted, in processing order; index = seq
	fifo    bool
	filter  *s3event.Result
	stats   stats
}

func (h *Handler) newInvocation(ev events.SQSEvent) *invocation {
	inv := &invocation{h: h, start: h.now()}
	for _, r := range ev.Records {
		m := &message{id: r.MessageId, body: r.Body, group: r.Attributes["MessageGroupId"]}
		inv.msgs = append(inv.msgs, m)
		// Lambda sets MessageGroupId on messages from FIFO queues; the
		// ARN's ".fifo" says the same when attributes are missing.
		if m.group != "" || strings.HasSuffix(r.EventSourceARN, ".fifo") {
			inv.fifo = true
		}
	}
	return inv
}

// run does the work of the batch.
func (inv *invocation) run(ctx context.Context) {
	h := inv.h
	workCtx, sendCtx, cancel := h.deadlines(ctx)
	defer cancel()

	in := make([]s3event.Message, len(inv.msgs))
	byID := make(map[string]*message, len(inv.msgs))
	for i, m := range inv.msgs {
		in[i] = s3event.Message{ID: m.id, Body: m.body}
		if _, dup := byID[m.id]; !dup {
			byID[m.id] = m
		}
	}
	f := h.cfg.filter
	f.Now = h.now
	res := f.Apply(in)
	inv.filter = res
	for _, fl := range res.Failed {
		m := byID[fl.MessageID]
		m.fail(failParse, fl.Err)
		// Logged once here, where it is handled: the message goes back to
		// the queue and, after maxReceiveCount, to its DLQ.
		h.log.WarnContext(ctx, "message is not an S3 notification; reported as failed", "messageId", fl.MessageID, "err", fl.Err)
	}
	for _, s := range res.Skipped {
		inv.stats.skip(s.Reason.String())
		h.log.DebugContext(ctx, "object skipped", "messageId", s.MessageID, "bucket", s.Object.Bucket, "key", s.Object.Key, "reason", s.Reason.String(), "detail", s.Detail)
	}
	for _, it := range res.Accepted {
		m := byID[it.MessageID]
		o := &objectRun{msg: m, obj: it.Object, seq: len(inv.objects)}
		inv.objects = append(inv.objects, o)
		m.objects = append(m.objects, o)
	}

	if inv.fifo {
		inv.runFIFO(ctx, workCtx, sendCtx)
		return
	}
	// A standard queue: every message's objects in one pipeline. The
	// objects of a message that already failed are left for its retry.
	var objs []*objectRun
	for _, o := range inv.objects {
		if o.msg.failed == "" {
			objs = append(objs, o)
		}
	}
	inv.process(ctx, workCtx, sendCtx, objs)
	for _, m := range inv.msgs {
		inv.settle(m)
	}
}

// runFIFO processes the messages of a FIFO queue one by one, in order. As
// Powertools' FIFO processor does, after the first failure the rest of the
// batch is reported failed, or with SKIP_GROUP_ON_ERROR only the later
// messages of the failed message's group.
func (inv *invocation) runFIFO(ctx, workCtx, sendCtx context.Context) {
	failedGroups := map[string]bool{}
	anyFailed := false
	for _, m := range inv.msgs {
		switch {
		case m.failed != "":
		case inv.h.cfg.skipGroupOnError && failedGroups[m.group]:
			m.fail(failFIFOGroup, fmt.Errorf("an earlier message of group %q failed", m.group))
		case !inv.h.cfg.skipGroupOnError && anyFailed:
			m.fail(failFIFOBlock, errors.New("an earlier message of the batch failed"))
		case workCtx.Err() != nil:
			m.fail(failDeadline, context.Cause(workCtx))
		default:
			inv.process(ctx, workCtx, sendCtx, m.objects)
			inv.settle(m)
		}
		if m.failed != "" {
			anyFailed = true
			failedGroups[m.group] = true
		}
	}
}

// settle marks m failed when one of its objects was not fully delivered.
func (inv *invocation) settle(m *message) {
	if m.failed != "" {
		return
	}
	for _, o := range m.objects {
		if o.delivered() {
			continue
		}
		why := failObject
		if o.reason == reasonDeadline {
			why = failDeadline
		}
		m.fail(why, o.failure())
		return
	}
}

// deadlines returns the context in which work is started (it ends the
// margin before ctx's deadline) and the one in which records are sent (it
// ends half the margin before), so that what was read can still be sent
// and the answer given in time.
func (h *Handler) deadlines(ctx context.Context) (work, send context.Context, cancel func()) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, ctx, func() {}
	}
	margin := h.margin(dl.Sub(h.now()))
	work, c1 := context.WithDeadlineCause(ctx, dl.Add(-margin), errDeadline)
	send, c2 := context.WithDeadlineCause(ctx, dl.Add(-margin/2), errDeadline)
	return work, send, func() { c1(); c2() }
}

// errDeadline is the cause of the contexts that end before the
// invocation's deadline.
var errDeadline = errors.New("stopped before the invocation's deadline")

// margin is how long before the deadline work stops: DEADLINE_MARGIN, or a
// tenth of the time left, at least 2s and at most 30s, but never more than
// half the time left, so that a short timeout still gets work done.
func (h *Handler) margin(left time.Duration) time.Duration {
	if h.cfg.deadlineMargin > 0 {
		return h.cfg.deadlineMargin
	}
	m := min(max(left/10, minAutoMargin), maxAutoMargin)
	return max(min(m, left/2), 0)
}

// response lists the failed messages in batch order.
func (inv *invocation) response() (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var missing int
	for _, m := range inv.msgs {
		if m.failed == "" {
			continue
		}
		if m.id == "" {
			missing++
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.id})
	}
	if missing > 0 {
		return events.SQSEventResponse{}, fmt.Errorf("s3ingest: %d failed messages have no message id, so they cannot be reported one by one", missing)
	}
	return resp, nil
}
