package main

import (
	"fmt"
	"io"

	"github.com/s3sqs/s3sqs/pkg/fanout"
)

// exitInterrupted is the exit code of a run stopped by SIGINT or SIGTERM,
// as shells give a process that SIGINT ended.
const exitInterrupted = 130

// interrupted says what became of a run stopped by SIGINT or SIGTERM and
// how to go on.
func (c *fanoutCmd) interrupted(stderr io.Writer, rep fanout.Report) int {
	fmt.Fprintf(stderr, "s3sqs fanout: interrupted: %d records sent before it stopped; the records cut off mid-send are sent by the next run.\n", rep.RecordsSent)
	if c.claimsTable != "" {
		fmt.Fprintf(stderr, "Each task's claim in %s keeps where it stopped: run the same command (-run-id %s) to continue from there.\n", c.claimsTable, rep.RunID)
	} else {
		fmt.Fprintf(stderr, "Without -claims-table nothing keeps where it stopped: the same command sends the whole dataset again (its records with the same ids).\n")
	}
	return exitInterrupted
}
