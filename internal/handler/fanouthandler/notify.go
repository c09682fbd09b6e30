package fanouthandler

import (
	"cmp"
	"context"
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
// it cannot be parsed, a record of it cannot be read or one of its objects
// could not be sent, after its other objects were.
func (h *Handler) notifications(ctx context.Context, inv *Invocation, msgs []s3event.Message) []noteResult {
	if len(msgs) == 0 {
		return nil
	}
	res := h.runner.RunNotified(ctx, msgs, engine.NotifiedOptions{Filter: h.opts.Filter, Concurrency: h.opts.Concurrency})
	h.skipped(ctx, inv, res.Skipped)
	out := make([]noteResult, len(msgs))
	for i, m := range res.Messages {
		o := &out[i]
		o.messageID, o.err = msgs[i].ID, m.Err
		for _, run := range m.Objects {
			inv.Stats.Add(run.Stats)
			inv.Queued = inv.Queued || run.Queued
			inv.RunID = cmp.Or(inv.RunID, run.RunID)
			o.report.RunID = cmp.Or(o.report.RunID, run.RunID)
			o.report.Queued = o.report.Queued || run.Queued
			o.report.Stats.Add(run.Stats)
		}
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
