package fanouthandler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// noteResult is what became of one notification message.
type noteResult struct {
	messageID string
	report    engine.Report
	err       error
}

// notifications sends the objects that msgs name and that the filter
// accepts, each object as a run of its own named after its event (see
// engine.Runner.RunNotified), up to Concurrency runs at once. A message's
// report sums its objects' runs and names the first. A message fails when
// one of its records could not be read, after its other objects were
// sent.
func (h *Handler) notifications(ctx context.Context, inv *Invocation, msgs []s3event.Message) []noteResult {
	if len(msgs) == 0 {
		return nil
	}
	res := h.opts.Filter.Apply(msgs)
	out := make([]noteResult, len(msgs))
	index := map[string]int{}
	for i, m := range msgs {
		out[i].messageID = m.ID
		index[m.ID] = i
	}
	for _, f := range res.Failed {
		i := index[f.MessageID]
		out[i].err = errors.Join(out[i].err, f.Err)
	}
	h.skipped(ctx, inv, res.Skipped)
	for j, run := range h.runner.RunNotified(ctx, res.Accepted, engine.NotifiedOptions{Concurrency: h.opts.Concurrency}) {
		inv.Stats.Add(run.Stats)
		inv.Queued = inv.Queued || run.Queued
		inv.RunID = cmp.Or(inv.RunID, run.RunID)
		o := &out[index[res.Accepted[j].MessageID]]
		o.report.RunID = cmp.Or(o.report.RunID, run.RunID)
		o.report.Queued = o.report.Queued || run.Queued
		o.report.Stats.Add(run.Stats)
		o.err = errors.Join(o.err, run.Err)
	}
	return out
}

// skipped counts and logs the objects the filter left out.
func (h *Handler) skipped(ctx context.Context, inv *Invocation, skipped []s3event.Skipped) {
	for _, s := range skipped {
		inv.Skipped++
		level := slog.LevelDebug
		if s.Reason == s3event.SkipTooOld {
			// Unlike an event type or a prefix left out, the object is
			// data that is never sent: the log must say so.
			level = slog.LevelWarn
		}
		h.log.Log(ctx, level, "object skipped", "messageId", s.MessageID, "object", dataset.Notified(s.Object).String(),
			"eTag", s.Object.ETag, "reason", s.Reason.String(), "detail", s.Detail)
	}
}
