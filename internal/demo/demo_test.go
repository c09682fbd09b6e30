package demo

import (
	"bytes"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/localaws"
)

// TestDemo runs the demo's code path with a small dataset, as `make demo`
// does with a larger one, and checks its accounting: every generated
// record is on the output or target queue, on the failure output with a
// reason, or in an object whose notification reached the DLQ.
func TestDemo(t *testing.T) {
	c := Config{
		MotoURL:       localaws.Endpoint(t, localaws.EnvMoto),
		SQSURL:        localaws.Endpoint(t, localaws.EnvSQS),
		RIE:           localaws.Endpoint(t, localaws.EnvRIE),
		Dir:           t.TempDir(),
		Records:       60,
		FanoutObjects: 3,
	}
	var out bytes.Buffer
	sum, err := Run(t.Context(), c, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	t.Logf("summary:\n%s", out.String())
	if !sum.OK() {
		t.Fatalf("missing records: %v", sum.Missing)
	}
	// 3 good ingest objects and 3 fanout objects of 60 records, less the
	// one record SQS refuses; the broken CSV (61 rows) is in the DLQ.
	if sum.Delivered != 3*60+3*60-1 || len(sum.OnFailureOutput) != 1 || sum.InDLQ != 61 {
		t.Errorf("delivered %d, failure output %d, in DLQ %d; want 359, 1, 61", sum.Delivered, len(sum.OnFailureOutput), sum.InDLQ)
	}
	if len(sum.DLQ) != 2 || sum.FanoutPlan.TasksQueued == 0 || sum.WorkDLQ != 0 {
		t.Errorf("DLQ %v, tasks %d, work DLQ %d: want the broken object and the unparseable body, the work queue used, and no task lost", sum.DLQ, sum.FanoutPlan.TasksQueued, sum.WorkDLQ)
	}
	if f := sum.OnFailureOutput[0]; f.Code != "InvalidCharacters" || f.Body != "bad\x00record" {
		t.Errorf("failure output %+v", f)
	}
	if !strings.Contains(out.String(), "every record is accounted for") {
		t.Errorf("summary lacks the verdict:\n%s", out.String())
	}
}
