package emf

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWrite checks the document against the specification's required shape:
// _aws.Timestamp in epoch milliseconds, CloudWatchMetrics directives naming
// a namespace, dimension sets of keys present at the root, and metric
// definitions whose names are root members holding numbers.
func TestWrite(t *testing.T) {
	var buf bytes.Buffer
	now := time.UnixMilli(1700000000123)
	err := Write(&buf, "s3sqs", map[string]string{"Function": "fanout"},
		[]Metric{{"RecordsSent", Count, 42}, {"Duration", Milliseconds, 1.5}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("}\n")) || bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("want one JSON line, got %q", buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"Function":    "fanout",
		"RecordsSent": 42.0,
		"Duration":    1.5,
		"_aws": map[string]any{
			"Timestamp": 1700000000123.0,
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  "s3sqs",
				"Dimensions": []any{[]any{"Function"}},
				"Metrics": []any{
					map[string]any{"Name": "RecordsSent", "Unit": "Count"},
					map[string]any{"Name": "Duration", "Unit": "Milliseconds"},
				},
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
}
