package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

func TestMain(m *testing.M) {
	if localaws.ServeS3Child() {
		return
	}
	os.Exit(m.Run())
}

// TestTable runs the tool end to end at a tiny size, with a 5 ms delay and
// one swept setting, and checks that the table has a row for each mode and
// latency with a positive rate, and a best setting for fanout.
func TestTable(t *testing.T) {
	localaws.Endpoint(t, localaws.EnvSQS)
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"-objects", "2", "-records", "200", "-latencies", "0,5", "-sweep", "32x2", "-warm-up=false"}, &out, &log)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, log.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 11 || strings.HasPrefix(line, "| mode") || strings.HasPrefix(line, "|---") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[1]+" "+cells[2]] = cells[1:]
	}
	for _, mode := range []string{"fanout record", "fanout chunk", "s3ingest"} {
		for _, lat := range []string{"0 ms", "5 ms"} {
			c, ok := rows[mode+" "+lat]
			if !ok {
				t.Errorf("no row for %s at %s in\n%s", mode, lat, out.String())
				continue
			}
			if rate, err := strconv.ParseFloat(c[2], 64); err != nil || rate <= 0 {
				t.Errorf("%s at %s: defaults records/s %q, want a positive number", mode, lat, c[2])
			}
			if !strings.HasSuffix(c[7], " MiB") || c[7] == "0 MiB" {
				t.Errorf("%s at %s: peak RSS %q, want some MiB", mode, lat, c[7])
			}
			// The CLI built from this module tunes ingest when it has the
			// flags for it (see TestSweeps).
			wantBest := mode != "s3ingest" || c[4] != "no flag to tune"
			if rate, err := strconv.ParseFloat(c[5], 64); wantBest && (err != nil || rate <= 0) {
				t.Errorf("%s at %s: best records/s %q, want a positive number", mode, lat, c[5])
			}
		}
	}
	if len(rows) != 6 {
		t.Errorf("%d rows, want 6:\n%s", len(rows), out.String())
	}
}
