// Package summary writes what one Lambda invocation did, the same way for
// both functions: one JSON log line that Logs Insights can query, whatever
// AWS_LAMBDA_LOG_FORMAT says, and one CloudWatch Embedded Metric Format
// document with the metrics under namespace s3sqs, dimension Function.
package summary

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/s3sqs/s3sqs/internal/emf"
)

// Namespace is the CloudWatch namespace of the functions' metrics.
const Namespace = "s3sqs"

// Write writes the summary line `<function> invocation` (level ERROR with
// err when the invocation failed) with the request id from ctx and the
// summary object, then the EMF document of metrics, to w.
func Write(ctx context.Context, w io.Writer, function string, s any, metrics []emf.Metric, now time.Time, err error) error {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr}))
	attrs := []slog.Attr{slog.String("function", function)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, slog.String("requestId", lc.AwsRequestID))
	}
	attrs = append(attrs, slog.Any("summary", s))
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	log.LogAttrs(ctx, level, function+" invocation", attrs...)
	return emf.Write(w, Namespace, map[string]string{"Function": function}, metrics, now)
}
