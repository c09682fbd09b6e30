package ingesthandler

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/s3sqs/s3sqs/internal/runtime/emf"
	"github.com/s3sqs/s3sqs/internal/runtime/summary"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// skipReasons are every reason an object is skipped, so that each has a
// metric in every invocation, zero or not.
var skipReasons = []string{
	s3event.SkipEventType.String(), s3event.SkipDeletion.String(), s3event.SkipPrefix.String(),
	s3event.SkipSuffix.String(), s3event.SkipTooOld.String(), s3event.SkipDuplicate.String(),
	engine.SkipNotFound, engine.SkipSuperseded, engine.SkipDone,
}

// Summary is what an invocation did, as its one JSON log line says.
type Summary struct {
	Messages         int            `json:"messages"`
	FailedMessages   int            `json:"failedMessages"`
	FailedBy         map[string]int `json:"failedBy,omitempty"`
	TestEvents       int            `json:"testEvents"`
	FIFO             bool           `json:"fifo"`
	Objects          int            `json:"objects"`
	ObjectsDelivered int            `json:"objectsDelivered"`
	ObjectsFailed    int            `json:"objectsFailed"`
	ObjectsHandedOff int            `json:"objectsHandedOff"`
	Tasks            int            `json:"tasks"`
	Skipped          map[string]int `json:"skipped"`
	Records          int64          `json:"records"`
	RecordsSent      int64          `json:"recordsSent"`
	RecordsFailed    int64          `json:"recordsFailed"`
	RecordsOffloaded int64          `json:"recordsOffloaded,omitempty"`
	BadRecords       int64          `json:"badRecords"`
	Bytes            int64          `json:"bytes"`
	BytesSent        int64          `json:"bytesSent"`
	Requests         int64          `json:"requests"`
	Retries          int64          `json:"retries"`
	Throttled        int64          `json:"throttled,omitempty"`
	PeakInFlight     int            `json:"peakInFlight,omitempty"`
	DurationMs       int64          `json:"durationMs"`
}

// summarize adds up the invocation.
func (inv *invocation) summarize() Summary {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s := Summary{
		Messages:         inv.result.Messages,
		FailedMessages:   inv.result.Failed,
		TestEvents:       inv.testEvents,
		FIFO:             inv.result.FIFO,
		Objects:          len(inv.objects),
		Tasks:            inv.tasks,
		RecordsSent:      inv.stats.RecordsSent,
		RecordsFailed:    inv.stats.RecordsFailed,
		BadRecords:       inv.badRecords,
		BytesSent:        inv.stats.BytesSent,
		RecordsOffloaded: inv.stats.RecordsOffloaded,
		Requests:         inv.stats.Requests,
		Retries:          inv.stats.Retries,
		Throttled:        inv.stats.Throttled,
		PeakInFlight:     inv.stats.PeakInFlight,
		Skipped:          maps.Clone(inv.skipped),
		DurationMs:       inv.h.opts.Now().Sub(inv.start).Milliseconds(),
	}
	if len(inv.failedBy) > 0 {
		s.FailedBy = maps.Clone(inv.failedBy)
	}
	for _, o := range inv.objects {
		switch {
		case o.Skipped != "":
			s.Skipped[o.Skipped]++
		case o.Failed == "":
			s.ObjectsDelivered++
		default:
			s.ObjectsFailed++
		}
		if o.HandedOff {
			s.ObjectsHandedOff++
			continue
		}
		s.Records += o.RecordsRead
		if o.Skipped == "" && o.Failed == "" {
			s.Bytes += o.Object.Size
		}
	}
	return s
}

// report writes the summary line and the EMF document, and returns the
// summary.
func (h *Handler) report(ctx context.Context, inv *invocation, err error) Summary {
	s := inv.summarize()
	metrics := []emf.Metric{
		{Name: "Messages", Unit: emf.Count, Value: float64(s.Messages)},
		{Name: "FailedMessages", Unit: emf.Count, Value: float64(s.FailedMessages)},
		{Name: "TestEvents", Unit: emf.Count, Value: float64(s.TestEvents)},
		{Name: "Objects", Unit: emf.Count, Value: float64(s.Objects)},
		{Name: "ObjectsFailed", Unit: emf.Count, Value: float64(s.ObjectsFailed)},
		{Name: "ObjectsHandedOff", Unit: emf.Count, Value: float64(s.ObjectsHandedOff)},
		{Name: "Records", Unit: emf.Count, Value: float64(s.Records)},
		{Name: "RecordsSent", Unit: emf.Count, Value: float64(s.RecordsSent)},
		{Name: "RecordsOffloaded", Unit: emf.Count, Value: float64(s.RecordsOffloaded)},
		{Name: "RecordsFailed", Unit: emf.Count, Value: float64(s.RecordsFailed)},
		{Name: "BadRecords", Unit: emf.Count, Value: float64(s.BadRecords)},
		{Name: "Bytes", Unit: emf.Bytes, Value: float64(s.Bytes)},
		{Name: "BytesSent", Unit: emf.Bytes, Value: float64(s.BytesSent)},
		{Name: "Throttled", Unit: emf.Count, Value: float64(s.Throttled)},
		{Name: "PeakInFlight", Unit: emf.Count, Value: float64(s.PeakInFlight)},
		{Name: "Duration", Unit: emf.Milliseconds, Value: float64(s.DurationMs)},
	}
	reasons := append(slices.Collect(maps.Keys(s.Skipped)), skipReasons...)
	slices.Sort(reasons)
	for _, r := range slices.Compact(reasons) {
		metrics = append(metrics, emf.Metric{Name: "Skipped" + metricName(r), Unit: emf.Count, Value: float64(s.Skipped[r])})
	}
	if werr := summary.Write(ctx, h.opts.Out, "s3ingest", s, metrics, h.opts.Now(), err); werr != nil {
		h.log.ErrorContext(ctx, "write the invocation summary", "err", werr)
	}
	return s
}

// metricName turns "too-old" into "TooOld".
func metricName(reason string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(reason, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
