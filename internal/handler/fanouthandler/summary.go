package fanouthandler

import (
	"context"
	"time"

	"github.com/s3sqs/s3sqs/internal/runtime/emf"
	"github.com/s3sqs/s3sqs/internal/runtime/summary"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// Invocation is the summary of one invocation: its log line and metrics.
type Invocation struct {
	Kind           string `json:"kind"`
	RunID          string `json:"runId,omitempty"`
	Queued         bool   `json:"queued,omitempty"`
	SQSMessages    int    `json:"sqsMessages,omitempty"`
	FailedMessages int    `json:"failedMessages,omitempty"`
	Continuations  int    `json:"continuations,omitempty"`
	PlanSteps      int    `json:"planSteps,omitempty"`
	PlanContinued  bool   `json:"planContinued,omitempty"`
	BadRecords     int64  `json:"badRecords,omitempty"`
	Skipped        int    `json:"skippedObjects,omitempty"`
	DurationMs     int64  `json:"durationMs"`
	engine.Stats

	// Items counts the objects a driver named (Batch Operations tasks,
	// Distributed Map items); ItemsFailed those that failed for good,
	// ItemsToRetry those the driver retries.
	Items        int `json:"items,omitempty"`
	ItemsFailed  int `json:"itemsFailed,omitempty"`
	ItemsToRetry int `json:"itemsToRetry,omitempty"`
}

// summarize ends an invocation that started at start: it writes its
// summary line and metrics, with err, the invocation's answer.
func (h *Handler) summarize(ctx context.Context, inv *Invocation, start time.Time, err error) {
	inv.DurationMs = h.opts.Now().Sub(start).Milliseconds()
	metrics := []emf.Metric{
		{Name: "RecordsRead", Unit: emf.Count, Value: float64(inv.RecordsRead)},
		{Name: "RecordsSent", Unit: emf.Count, Value: float64(inv.RecordsSent)},
		{Name: "RecordsOffloaded", Unit: emf.Count, Value: float64(inv.RecordsOffloaded)},
		{Name: "RecordsMapped", Unit: emf.Count, Value: float64(inv.RecordsMapped)},
		{Name: "RecordsFailed", Unit: emf.Count, Value: float64(inv.RecordsFailed)},
		{Name: "BadRecords", Unit: emf.Count, Value: float64(inv.BadRecords)},
		{Name: "Requests", Unit: emf.Count, Value: float64(inv.Requests)},
		{Name: "Retries", Unit: emf.Count, Value: float64(inv.Retries)},
		{Name: "BytesSent", Unit: emf.Bytes, Value: float64(inv.BytesSent)},
		{Name: "Throttled", Unit: emf.Count, Value: float64(inv.Throttled)},
		{Name: "PeakInFlight", Unit: emf.Count, Value: float64(inv.PeakInFlight)},
		{Name: "TasksQueued", Unit: emf.Count, Value: float64(inv.TasksQueued)},
		{Name: "TasksSkipped", Unit: emf.Count, Value: float64(inv.TasksSkipped)},
		{Name: "TasksHeld", Unit: emf.Count, Value: float64(inv.TasksHeld)},
		{Name: "TasksCancelled", Unit: emf.Count, Value: float64(inv.TasksCancelled)},
		{Name: "ObjectsFailed", Unit: emf.Count, Value: float64(inv.ObjectsFailed)},
		{Name: "ObjectsArchived", Unit: emf.Count, Value: float64(inv.ObjectsArchived)},
		{Name: "ObjectsFiltered", Unit: emf.Count, Value: float64(inv.ObjectsFiltered)},
		{Name: "FailedMessages", Unit: emf.Count, Value: float64(inv.FailedMessages)},
		{Name: "Duration", Unit: emf.Milliseconds, Value: float64(inv.DurationMs)},
	}
	if werr := summary.Write(ctx, h.opts.Out, "fanout", inv, metrics, h.opts.Now(), err); werr != nil {
		h.log.ErrorContext(ctx, "write the invocation summary", "err", werr)
	}
}
