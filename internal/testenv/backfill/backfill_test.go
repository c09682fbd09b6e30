package backfill

import (
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// TestBackfill runs `make backfill`'s steps on a smaller dataset: a paced
// run over two functions, paused, resumed and sped up while `s3sqs status
// -watch` follows it, must deliver every record, put no task in the work
// DLQ, and end with a status whose counts are the dataset's.
func TestBackfill(t *testing.T) {
	c := Config{
		MotoURL: localaws.Endpoint(t, localaws.EnvMoto),
		SQSURL:  localaws.Endpoint(t, localaws.EnvSQS),
		RIE:     localaws.Endpoint(t, localaws.EnvRIE),
		Dir:     t.TempDir(),
		Objects: 8, Records: 250, Rate: 200, Raised: 400, Pause: 4 * time.Second,
	}
	res, err := Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transcript:\n%s", res.Transcript)
	if !res.OK() {
		t.Errorf("delivered %d of %d records, %d tasks in the work DLQ", res.Delivered, res.Records, res.WorkDLQ)
	}
	// Without faults a duplicate could come only from an answer the
	// stand-in lost, which is rare; more than a batch's worth is a bug.
	if res.Duplicates > 10 {
		t.Errorf("%d records sent twice", res.Duplicates)
	}
	if got := res.Status["recordsSent"]; got != float64(res.Records) {
		t.Errorf("status says %v records sent, want %d", got, res.Records)
	}
	if got := res.Status["state"]; got != "running" {
		t.Errorf("status says the run is %v after the resume", got)
	}
	if held, _ := res.Status["tasksHeld"].(float64); held == 0 {
		t.Errorf("no task was put back while the run was paused:\n%s", res.Transcript)
	}
}
