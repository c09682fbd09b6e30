package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/s3sqs/s3sqs/internal/emf"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// EMF namespace and dimension of the metrics.
const (
	metricsNamespace = "s3sqs"
	functionName     = "s3ingest"
)

// skipReasons are every reason an object is skipped, so that each has a
// metric in every invocation, zero or not.
var skipReasons = []string{
	s3event.SkipEventType.String(), s3event.SkipDeletion.String(), s3event.SkipPrefix.String(),
	s3event.SkipSuffix.String(), s3event.SkipTooOld.String(), s3event.SkipDuplicate.String(),
	reasonNotFound, reasonSuperseded,
}

// stats counts what the sends of one invocation did.
type stats struct {
	skipped     map[string]int
	recordsSent int
	sendFailed  int
	requests    int
	retries     int
	bytesSent   int64
	tasks       int
}

func (s *stats) skip(reason string) {
	if s.skipped == nil {
		s.skipped = map[string]int{}
	}
	s.skipped[reason]++
}

func (s *stats) addSend(r sqsbatch.Result) {
	s.recordsSent += r.Sent
	s.sendFailed += r.Failed
	s.requests += r.Requests
	s.retries += r.Retries
	s.bytesSent += r.Bytes
}

// summary is the one JSON log line of an invocation.
type summary struct {
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
	RecordsSent      int            `json:"recordsSent"`
	RecordsFailed    int            `json:"recordsFailed"`
	BadRecords       int            `json:"badRecords"`
	Bytes            int64          `json:"bytes"`
	BytesSent        int64          `json:"bytesSent"`
	Requests         int            `json:"requests"`
	Retries          int            `json:"retries"`
	DurationMs       int64          `json:"durationMs"`
}

// summarize adds up the invocation.
func (inv *invocation) summarize() summary {
	s := summary{
		Messages:      len(inv.msgs),
		FIFO:          inv.fifo,
		Objects:       len(inv.objects),
		Tasks:         inv.stats.tasks,
		RecordsSent:   inv.stats.recordsSent,
		RecordsFailed: inv.stats.sendFailed,
		BytesSent:     inv.stats.bytesSent,
		Requests:      inv.stats.requests,
		Retries:       inv.stats.retries,
		Skipped:       map[string]int{},
		DurationMs:    inv.h.now().Sub(inv.start).Milliseconds(),
	}
	if inv.filter != nil {
		s.TestEvents = len(inv.filter.TestEvents)
	}
	maps.Copy(s.Skipped, inv.stats.skipped)
	for _, m := range inv.msgs {
		if m.failed != "" {
			s.FailedMessages++
			if s.FailedBy == nil {
				s.FailedBy = map[string]int{}
			}
			s.FailedBy[m.failed]++
		}
	}
	for _, o := range inv.objects {
		switch {
		case o.outcome == outcomeSkipped:
			s.Skipped[o.reason]++
		case o.delivered():
			s.ObjectsDelivered++
		default:
			s.ObjectsFailed++
		}
		if o.handoff {
			s.ObjectsHandedOff++
		} else {
			s.Records += o.records
		}
		s.BadRecords += o.badRecords
		s.Bytes += o.bytes
	}
	return s
}

// report writes the summary line and the EMF document, and logs each
// failed message with its reason.
func (h *Handler) report(ctx context.Context, inv *invocation) {
	for _, m := range inv.msgs {
		if m.failed != "" && m.failed != failParse {
			h.log.WarnContext(ctx, "message reported as failed", "messageId", m.id, "reason", m.failed, "err", m.err)
		}
	}
	s := inv.summarize()

	// The summary is JSON whatever AWS_LAMBDA_LOG_FORMAT says, so that
	// Logs Insights can query it; it carries the request id as the
	// lambdacontext logger would.
	log := slog.New(slog.NewJSONHandler(h.out, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr}))
	attrs := []slog.Attr{slog.String("function", functionName)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, slog.String("requestId", lc.AwsRequestID))
	}
	attrs = append(attrs, slog.Any("summary", s))
	log.LogAttrs(ctx, slog.LevelInfo, "s3ingest invocation", attrs...)

	metrics := []emf.Metric{
		{Name: "Messages", Unit: emf.Count, Value: float64(s.Messages)},
		{Name: "FailedMessages", Unit: emf.Count, Value: float64(s.FailedMessages)},
		{Name: "TestEvents", Unit: emf.Count, Value: float64(s.TestEvents)},
		{Name: "Objects", Unit: emf.Count, Value: float64(s.Objects)},
		{Name: "ObjectsFailed", Unit: emf.Count, Value: float64(s.ObjectsFailed)},
		{Name: "ObjectsHandedOff", Unit: emf.Count, Value: float64(s.ObjectsHandedOff)},
		{Name: "Records", Unit: emf.Count, Value: float64(s.Records)},
		{Name: "RecordsSent", Unit: emf.Count, Value: float64(s.RecordsSent)},
		{Name: "RecordsFailed", Unit: emf.Count, Value: float64(s.RecordsFailed)},
		{Name: "BadRecords", Unit: emf.Count, Value: float64(s.BadRecords)},
		{Name: "Bytes", Unit: emf.Bytes, Value: float64(s.Bytes)},
		{Name: "BytesSent", Unit: emf.Bytes, Value: float64(s.BytesSent)},
		{Name: "Duration", Unit: emf.Milliseconds, Value: float64(s.DurationMs)},
	}
	reasons := slices.Sorted(maps.Keys(s.Skipped))
	for _, r := range skipReasons {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		metrics = append(metrics, emf.Metric{Name: "Skipped" + metricName(r), Unit: emf.Count, Value: float64(s.Skipped[r])})
	}
	if err := emf.Write(h.out, metricsNamespace, map[string]string{"Function": functionName}, metrics, h.now()); err != nil {
		h.log.ErrorContext(ctx, "write EMF metrics", "err", err)
	}
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
