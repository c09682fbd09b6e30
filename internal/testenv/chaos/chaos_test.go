package chaos

import (
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestChaos is the short chaos run of `make test`: both functions, with
// claims, at the issue's SQS fault rates and higher S3 ones (so that a
// small dataset still meets reads that break), with 30% of messages
// delivered twice, must lose nothing, leave nothing in a DLQ, and send
// twice only what a lost answer explains.
// `make chaos` runs the long version at the issue's rates.
func TestChaos(t *testing.T) {
	rates := IssueRates
	rates.S3500, rates.BodyCut = 0.10, 0.30
	c := Config{
		SQSURL:  localaws.Endpoint(t, localaws.EnvSQS),
		MotoURL: localaws.Endpoint(t, localaws.EnvMoto),
		RIE:     localaws.Endpoint(t, localaws.EnvRIE),
		Dir:     t.TempDir(), Seed: 7, Rates: rates, Claims: true,
		FanoutObjects: 4, FanoutRecords: 400, ChunkSize: "8KiB",
		IngestObjects: 12, IngestRecords: 75, Redeliver: 0.3,
		Log: testWriter{t},
	}
	results, err := Run(t.Context(), c)
	var table strings.Builder
	Table(&table, results)
	t.Logf("\n%s", table.String())
	if err != nil {
		t.Fatal(err)
	}
	var cuts, s3500, lostAnswers, redelivered int
	for _, r := range results {
		if r.Lost != 0 || r.Delivered+r.OnFailureOutput != r.Records {
			t.Errorf("%s: %d of %d records lost", r.Function, r.Lost, r.Records)
		}
		if r.DLQ != 0 {
			t.Errorf("%s: %d messages in the DLQ", r.Function, r.DLQ)
		}
		if r.OtherDuplicates() != 0 {
			t.Errorf("%s: %d duplicates that no lost answer explains", r.Function, r.OtherDuplicates())
		}
		cuts += r.S3Faults.BodyCut
		s3500 += r.S3Faults.S3500
		lostAnswers += r.SQSFaults.ResetAfter
		redelivered += r.Redelivered
	}
	// The run is only a test of the faults it met.
	if cuts == 0 || s3500 == 0 || lostAnswers == 0 || redelivered == 0 {
		t.Errorf("the run met %d cut bodies, %d S3 500s, %d lost answers and %d messages delivered twice; want some of each", cuts, s3500, lostAnswers, redelivered)
	}
}
