package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestDemo runs the demo's code path with a small dataset, as `make demo`
// does with a larger one, and checks its accounting: every generated
// record is on the output or target queue, or on the failure output with a
// reason.
func TestDemo(t *testing.T) {
	c := Config{
		MotoURL:       localaws.Endpoint(t, localaws.EnvMoto),
		SQSURL:        localaws.Endpoint(t, localaws.EnvSQS),
		RIE:           localaws.Endpoint(t, localaws.EnvRIE),
		Dir:           t.TempDir(),
		Records:       60,
		FanoutObjects: 3,
	}
	// A failed run shows what the functions warned of, which its
	// temporary folder takes with it.
	t.Cleanup(func() {
		if t.Failed() {
			logWarnings(t, c.Dir, "s3ingest", "fanout")
		}
	})
	var out bytes.Buffer
	sum, err := Run(t.Context(), c, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	t.Logf("summary:\n%s", out.String())
	if !sum.OK() {
		t.Fatalf("missing records: %v", sum.Missing)
	}
	// 3 good ingest objects and 3 fanout objects of 60 records, the
	// offloaded record, and the record SQS refused, redriven with its NUL
	// replaced; the broken CSV's other 60 rows are delivered and its bad
	// row stays on the failure output.
	if sum.Delivered != 4*60+3*60+1 || len(sum.OnFailureOutput) != 1 || sum.InDLQ != 0 {
		t.Errorf("delivered %d, failure output %d, in DLQ %d; want 421, 1, 0", sum.Delivered, len(sum.OnFailureOutput), sum.InDLQ)
	}
	if sum.Redrive == nil || sum.Redrive.Sent != 1 || sum.Redrive.Failed != 0 || sum.Redriven != 1 {
		t.Errorf("redrive %+v, %d redriven; want the refused record sent again and delivered", sum.Redrive, sum.Redriven)
	}
	if len(sum.DLQ) != 1 || sum.FanoutPlan.TasksQueued == 0 || sum.WorkDLQ != 0 {
		t.Errorf("DLQ %v, tasks %d, work DLQ %d: want the unparseable body alone, the work queue used, and no task lost", sum.DLQ, sum.FanoutPlan.TasksQueued, sum.WorkDLQ)
	}
	codes := map[string]engine.Failure{}
	for _, f := range sum.OnFailureOutput {
		codes[f.Code] = f
	}
	if f := codes["UnreadableRecord"]; !strings.HasSuffix(f.Source, "/broken.csv") || f.Offset == 0 || f.RunID == "" {
		t.Errorf("failure output %+v: want s3ingest's bad CSV row with its offset", sum.OnFailureOutput)
	}
	if len(sum.Offloaded) != 1 || sum.Offloaded[0].size < bigRecordSize {
		t.Errorf("offloaded %+v; want the one record over SQS's limit, read back whole", sum.Offloaded)
	}
	if strings.Contains(out.String(), " 1 records") || !strings.Contains(out.String(), "1 record on the failure output") {
		t.Errorf("summary does not count in words:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "every record is accounted for") {
		t.Errorf("summary lacks the verdict:\n%s", out.String())
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		word string
		want string
	}{{0, "record", "0 records"}, {1, "record", "1 record"}, {2, "delivery", "2 deliveries"}, {1, "delivery", "1 delivery"}} {
		if got := plural(c.n, c.word); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.word, got, c.want)
		}
	}
}

// logWarnings logs the WARN and ERROR lines of the functions' logs in dir.
func logWarnings(t *testing.T, dir string, functions ...string) {
	for _, name := range functions {
		log, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Logf("%s.log: %v", name, err)
			continue
		}
		for line := range strings.SplitSeq(string(log), "\n") {
			if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
				t.Logf("%s.log: %s", name, line)
			}
		}
	}
}
