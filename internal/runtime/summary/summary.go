// Package summary writes what one Lambda invocation did, the same way for
// both functions: one JSON log line that Logs Insights can query, whatever
// AWS_LAMBDA_LOG_FORMAT says, and one CloudWatch Embedded Metric Format
// document with the metrics under namespace s3sqs, dimensions Function and,
// on Lambda, FunctionName.
package summary

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/s3sqs/s3sqs/internal/runtime/emf"
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
	// FunctionName tells deployments apart, so that each stack's alarms
	// and dashboard see only their own function's metrics.
	dims := map[string]string{"Function": function}
	if lambdacontext.FunctionName != "" {
		dims["FunctionName"] = lambdacontext.FunctionName
	}
	return emf.Write(w, Namespace, dims, metrics, now)
}
