package main

import (
	"bytes"
	"os"
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

// TestTable runs every case of the benchmark on a few records, so that
// `make bench` keeps working; the figures themselves are not checked.
func TestTable(t *testing.T) {
	localaws.Endpoint(t, localaws.EnvSQS)
	var out bytes.Buffer
	if err := run(t.Context(), 300, 4, "", "", &out); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, " B ") {
			rows++
		}
	}
	// The sender alone, with and without attributes, for 200 B and 1 KiB
	// JSON Lines, and fanout record, fanout chunk and s3ingest for each
	// size and format.
	if rows != 2*2+3*4 {
		t.Errorf("%d rows, want 16:\n%s", rows, out.String())
	}
}
