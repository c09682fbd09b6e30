package fanouthandler

import (
	"testing"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    string
	}{
		{`{"invocationSchemaVersion":"1.0","tasks":[]}`, "batch-operations"},
		{`{"invocationSchemaVersion":"9.9"}`, "batch-operations"},
		{`{"Items":[{"Key":"a"}],"BatchInput":{"bucket":"b"}}`, "distributed-map"},
		{`{"Items": []}`, "distributed-map"},
		{`{"Items":"not an array","bucket":"b"}`, "request"},
		{`{"Records":[{"eventSource":"aws:sqs"}]}`, "sqs"},
		{`{"Records":[{"eventSource":"aws:s3"}]}`, "notification"},
		{`{"bucket":"b","prefix":"p/"}`, "request"},
		{`[1]`, "request"},
	} {
		if got := kindOf([]byte(tc.payload)); got != tc.want {
			t.Errorf("kindOf(%s) = %q, want %q", tc.payload, got, tc.want)
		}
	}
}

func TestBatchRunID(t *testing.T) {
	if got := batchRunID("f3cc4f60-61f6-4a2b-8a21-d07600c373ce"); got != "s3batch-f3cc4f60-61f6-4a2b-8a21-d07600c373ce" {
		t.Errorf("run id %q: want s3batch- and the job id", got)
	}
	for _, id := range []string{"", "job with spaces", string(make([]byte, 100))} {
		got := batchRunID(id)
		if engine.CheckRunID(got) != nil || got != batchRunID(id) {
			t.Errorf("batchRunID(%q) = %q: want a valid id, the same every time", id, got)
		}
	}
	if batchRunID("a b") == batchRunID("a c") {
		t.Error("two job ids share a run id")
	}
}
