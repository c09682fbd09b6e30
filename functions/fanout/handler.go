package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/internal/emf"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// handler answers fanout's three kinds of invocation: a direct request, an
// S3 event notification, and an SQS event (of chunk tasks from the work
// queue, or of S3 notifications).
type handler struct {
	runner      *fanout.Runner
	failOnError bool
	log         *slog.Logger
	metrics     io.Writer
	now         func() time.Time
}

// summary is what one invocation did: the one log line and the metrics.
type summary struct {
	Kind     string `json:"kind"`
	RunID    string `json:"runId,omitempty"`
	Queued   bool   `json:"queued,omitempty"`
	Failed   int    `json:"failedTasks,omitempty"`
	Requeued int    `json:"continuations,omitempty"`
	fanout.Stats
}

// Handle is the Lambda entry point. It returns an error only when it cannot
// answer at all; for an SQS event that fails the whole batch, which then
// comes back after its visibility timeout.
func (h *handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	start := h.now()
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	_ = json.Unmarshal(payload, &probe)
	var (
		sum summary
		out any
		err error
	)
	switch {
	case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
		var ev events.SQSEvent
		if err = json.Unmarshal(payload, &ev); err == nil {
			out, sum, err = h.handleSQS(ctx, ev)
		}
	case isNotification(payload):
		var rep fanout.Report
		rep, err = h.handleNotification(ctx, "", payload)
		out, sum = rep, summary{Kind: "s3-event", RunID: rep.RunID, Queued: rep.Queued, Stats: rep.Stats}
	default:
		var req fanout.Request
		if req, err = fanout.DecodeRequest(payload); err != nil {
			sum = summary{Kind: "request"}
			break
		}
		var rep fanout.Report
		rep, err = h.runner.Run(ctx, req)
		out, sum = rep, summary{Kind: "request", RunID: rep.RunID, Queued: rep.Queued, Stats: rep.Stats}
	}
	if err == nil && h.failOnError && sum.RecordsFailed > 0 {
		err = fmt.Errorf("fanout: %d records failed (FAIL_ON_ERROR is set; they are on the failure output)", sum.RecordsFailed)
	}
	h.report(ctx, sum, h.now().Sub(start), err)
	return out, err
}

// isNotification reports whether payload is an S3 event notification, or
// one wrapped by SNS or sent by EventBridge, rather than a request.
func isNotification(payload []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) != nil {
		return false
	}
	_, records := probe["Records"]
	_, sns := probe["TopicArn"]
	_, source := probe["detail-type"]
	_, test := probe["Event"]
	return records || sns || source || test
}

// handleNotification sends the objects an S3 notification names, each
// pinned to its notified version. Deletions and test events send nothing.
func (h *handler) handleNotification(ctx context.Context, runID string, body []byte) (fanout.Report, error) {
	n, err := s3event.Parse(body)
	if err != nil {
		return fanout.Report{}, err
	}
	objs := func(yield func(dataset.Object, error) bool) {
		for _, o := range n.Objects {
			if o.Deletion {
				continue
			}
			obj := dataset.Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
			if !yield(obj, nil) {
				return
			}
		}
		for _, f := range n.Failed {
			if !yield(dataset.Object{}, f) {
				return
			}
		}
	}
	return h.runner.RunObjects(ctx, runID, objs, fanout.Overrides{})
}

// handleSQS runs the messages of an SQS event and reports the ones that
// must come back.
//
// A failed message without a message id cannot be named in the response:
// handleSQS then returns an error, and Lambda fails the whole batch, the
// only safe answer left.
func (h *handler) handleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, summary, error) {
	var (
		mu   sync.Mutex
		resp = events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		sum  = summary{Kind: "sqs"}
	)
	failed := func(id string, err error) {
		h.log.ErrorContext(ctx, "message failed", "messageId", id, "err", err)
		mu.Lock()
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		sum.Failed++
		mu.Unlock()
	}
	var g errgroup.Group
	g.SetLimit(2)
	for _, m := range ev.Records {
		if h.runner.PastDeadline(ctx) {
			failed(m.MessageId, errors.New("not started: too close to the deadline"))
			continue
		}
		g.Go(func() error {
			st, requeued, err := h.handleMessage(ctx, m)
			mu.Lock()
			sum.Stats.Add(st)
			if requeued {
				sum.Requeued++
			}
			mu.Unlock()
			if err != nil {
				failed(m.MessageId, err)
			}
			return nil
		})
	}
	g.Wait()
	missing := 0
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" {
			missing++
		}
	}
	if missing > 0 {
		return events.SQSEventResponse{}, sum, fmt.Errorf("fanout: %d failed messages have no message id, so they cannot be reported one by one", missing)
	}
	return resp, sum, nil
}

// handleMessage runs one SQS message: a chunk task, or an S3 notification.
func (h *handler) handleMessage(ctx context.Context, m events.SQSMessage) (fanout.Stats, bool, error) {
	t, err := worktask.Parse(m.Body)
	if err != nil && !errors.Is(err, worktask.ErrNotTask) {
		// It will never run: it goes back until the work queue moves it to
		// its dead-letter queue, and this line says why.
		return fanout.Stats{}, false, err
	}
	if err == nil {
		res, err := h.runner.RunTask(ctx, t)
		if err != nil {
			return res.Stats, false, err
		}
		if res.Continuation != nil {
			// The continuation takes over the rest of the task: if it
			// cannot be queued, the task comes back and runs again whole.
			if err := h.runner.Enqueue(ctx, *res.Continuation); err != nil {
				return res.Stats, false, fmt.Errorf("queue the continuation at offset %d: %w", res.Continuation.ResumeAt, err)
			}
			return res.Stats, true, nil
		}
		return res.Stats, false, nil
	}
	rep, err := h.handleNotification(ctx, m.MessageId, []byte(m.Body))
	if err != nil {
		return rep.Stats, false, fmt.Errorf("neither a chunk task nor an S3 notification, or it failed: %w", err)
	}
	return rep.Stats, false, nil
}

// report writes the invocation's summary log line and its metrics.
func (h *handler) report(ctx context.Context, s summary, d time.Duration, err error) {
	attrs := []any{"kind", s.Kind, "runId", s.RunID, "queued", s.Queued,
		"objects", s.Objects, "chunks", s.Chunks, "bytesPlanned", s.BytesPlanned, "tasksQueued", s.TasksQueued,
		"recordsRead", s.RecordsRead, "recordsSent", s.RecordsSent, "recordsFailed", s.RecordsFailed,
		"messages", s.Messages, "requests", s.Requests, "retries", s.Retries, "bytesSent", s.BytesSent,
		"failedTasks", s.Failed, "continuations", s.Requeued, "durationMs", d.Milliseconds()}
	if err != nil {
		h.log.ErrorContext(ctx, "fanout invocation failed", append(attrs, "err", err)...)
	} else {
		h.log.InfoContext(ctx, "fanout invocation", attrs...)
	}
	if h.metrics == nil {
		return
	}
	_ = emf.Write(h.metrics, "s3sqs", map[string]string{"Function": "fanout"}, []emf.Metric{
		{Name: "RecordsRead", Unit: emf.Count, Value: float64(s.RecordsRead)},
		{Name: "RecordsSent", Unit: emf.Count, Value: float64(s.RecordsSent)},
		{Name: "RecordsFailed", Unit: emf.Count, Value: float64(s.RecordsFailed)},
		{Name: "Requests", Unit: emf.Count, Value: float64(s.Requests)},
		{Name: "Retries", Unit: emf.Count, Value: float64(s.Retries)},
		{Name: "BytesSent", Unit: emf.Bytes, Value: float64(s.BytesSent)},
		{Name: "TasksQueued", Unit: emf.Count, Value: float64(s.TasksQueued)},
		{Name: "FailedTasks", Unit: emf.Count, Value: float64(s.Failed)},
		{Name: "Duration", Unit: emf.Milliseconds, Value: float64(d.Milliseconds())},
	}, h.now())
}
