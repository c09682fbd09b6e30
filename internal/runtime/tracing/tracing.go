// Package tracing sets up OpenTelemetry tracing for a function: off (the
// default: no provider, so the engine's spans are no-ops that cost nearly
// nothing), OTLP over HTTP to the AWS Distro for OpenTelemetry collector
// Lambda layer, which forwards to AWS X-Ray, or JSON on stdout for local
// runs and tests.
//
// Spans: one per invocation (here), one per chunk task (pkg/engine), and one
// per AWS call, SendMessageBatch, GetObject and PutObject among them
// (otelaws middleware on the clients). Trace and span ids are X-Ray's, and
// the invocation's span is a child of Lambda's own segment (the X-Ray trace
// header of the invocation), so X-Ray shows one trace.
package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Mode says where spans go.
type Mode string

// Modes.
const (
	// ModeOff traces nothing; it is what "" means.
	ModeOff Mode = "off"
	// ModeOTLP exports over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT
	// (default http://localhost:4318, where the ADOT collector layer
	// listens).
	ModeOTLP Mode = "otlp"
	// ModeStdout writes each span as a JSON document to the function's
	// output, for local runs.
	ModeStdout Mode = "stdout"
)

// Tracing is a function's tracer provider, or nothing when off.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// Setup installs the global tracer provider and X-Ray propagator for mode,
// naming the service function. With ModeOff it installs nothing and the
// returned Tracing does nothing. stdout receives spans with ModeStdout.
func Setup(ctx context.Context, mode Mode, function string, stdout io.Writer) (*Tracing, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch mode {
	case ModeOff, "":
		return &Tracing{}, nil
	case ModeOTLP:
		exp, err = otlptracehttp.New(ctx)
	case ModeStdout:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(stdout))
	default:
		return nil, fmt.Errorf("tracing: unknown mode %q", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter: %w", mode, err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(function), semconv.FaaSName(lambdacontext.FunctionName), semconv.CloudProviderAWS)
	tp := sdktrace.NewTracerProvider(
		// A batch that ForceFlush empties at the end of each invocation,
		// before Lambda freezes the process.
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(xray.NewIDGenerator()),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(xray.Propagator{}, propagation.TraceContext{}))
	return &Tracing{tp: tp}, nil
}

// On reports whether spans are recorded.
func (t *Tracing) On() bool { return t.tp != nil }

// AWS adds a span per AWS call to the clients made from cfg.
func (t *Tracing) AWS(cfg *aws.Config) {
	if t.On() {
		otelaws.AppendMiddlewares(&cfg.APIOptions, otelaws.WithTracerProvider(t.tp))
	}
}

// Handler returns h with a span around each invocation, a child of the
// invocation's X-Ray trace header, flushed before it returns.
func (t *Tracing) Handler(function string, h func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	if !t.On() {
		return h
	}
	tracer := t.tp.Tracer("github.com/s3sqs/s3sqs/internal/runtime/tracing")
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		if header, ok := ctx.Value("x-amzn-trace-id").(string); ok && header != "" {
			ctx = xray.Propagator{}.Extract(ctx, propagation.MapCarrier{"X-Amzn-Trace-Id": header})
		}
		attrs := []attribute.KeyValue{semconv.FaaSTriggerPubsub}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID))
		}
		ctx, span := tracer.Start(ctx, function+" invocation", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		out, err := h(ctx, payload)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		t.tp.ForceFlush(context.WithoutCancel(ctx))
		return out, err
	}
}
