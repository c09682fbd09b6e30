package summary

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/s3sqs/s3sqs/internal/runtime/emf"
)

func TestWrite(t *testing.T) {
	var buf bytes.Buffer
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	s := struct {
		Records int `json:"records"`
	}{7}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := Write(ctx, &buf, "fanout", s, []emf.Metric{{Name: "RecordsSent", Unit: emf.Count, Value: 7}}, now, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want the summary and the EMF document:\n%s", len(lines), buf.String())
	}
	var line struct {
		Msg       string         `json:"msg"`
		Message   string         `json:"message"`
		Level     string         `json:"level"`
		Function  string         `json:"function"`
		RequestID string         `json:"requestId"`
		Summary   map[string]int `json:"summary"`
		Err       string         `json:"err"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Msg+line.Message != "fanout invocation" || line.Level != "ERROR" || line.RequestID != "req-1" || line.Summary["records"] != 7 || line.Err != "boom" {
		t.Errorf("summary line %s", lines[0])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &doc); err != nil || doc["RecordsSent"] != 7.0 || doc["Function"] != "fanout" {
		t.Errorf("EMF line %s (%v)", lines[1], err)
	}
}

// TestWriteFunctionName checks that on Lambda the EMF document carries the
// deployed function's name as a second dimension, so that each stack's
// alarms see only their own function.
func TestWriteFunctionName(t *testing.T) {
	old := lambdacontext.FunctionName
	lambdacontext.FunctionName = "S3Sqs-Fanout-1A2B"
	defer func() { lambdacontext.FunctionName = old }()
	var buf bytes.Buffer
	if err := Write(t.Context(), &buf, "fanout", struct{}{}, []emf.Metric{{Name: "RecordsFailed", Unit: emf.Count, Value: 1}}, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var doc struct {
		Function, FunctionName string
		AWS                    struct {
			CloudWatchMetrics []struct{ Dimensions [][]string }
		} `json:"_aws"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Function != "fanout" || doc.FunctionName != "S3Sqs-Fanout-1A2B" || len(doc.AWS.CloudWatchMetrics) != 1 ||
		strings.Join(doc.AWS.CloudWatchMetrics[0].Dimensions[0], ",") != "Function,FunctionName" {
		t.Errorf("EMF line %s", lines[len(lines)-1])
	}
}
