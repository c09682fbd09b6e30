package main

import (
	"fmt"
	"io"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

// exitInterrupted is the exit code of a run stopped by SIGINT or SIGTERM,
// as shells give a process that SIGINT ended.
const exitInterrupted = 130

// interrupted says what became of a run stopped by SIGINT or SIGTERM and
// how to go on.
func (c *fanoutCmd) interrupted(stderr io.Writer, rep engine.Report) int {
	fmt.Fprintf(stderr, "s3sqs fanout: interrupted: %d records sent before it stopped; the records cut off mid-send are sent by the next run.\n", rep.RecordsSent)
	if c.claimsTable != "" {
		fmt.Fprintf(stderr, "Each task's claim in %s keeps where it stopped: run the same command (-run-id %s) to continue from there.\n", c.claimsTable, rep.RunID)
	} else {
		fmt.Fprintf(stderr, "Without -claims-table nothing keeps where it stopped: the same command sends the whole dataset again (its records with the same ids).\n")
	}
	return exitInterrupted
}

// exitCancelled is the exit code of a run sent in this process that
// `s3sqs cancel` stopped.
const exitCancelled = 3

// cancelled says what became of a run sent in this process that `s3sqs
// cancel` stopped, and how to go on: nothing is parked without a work
// queue, and the claims keep where each task stopped.
func (c *fanoutCmd) cancelled(stderr io.Writer, rep engine.Report) int {
	fmt.Fprintf(stderr, "s3sqs fanout: run %s was cancelled (s3sqs cancel): %d records sent before its tasks stopped; nothing is parked without a work queue.\n", rep.RunID, rep.RecordsSent)
	fmt.Fprintf(stderr, "To continue from where each task stopped: s3sqs resume -run-id %s -claims-table %s, then the same command (-run-id %s).\n", rep.RunID, c.claimsTable, rep.RunID)
	return exitCancelled
}

// exitBudgetSpent is the exit code of a run sent in this process that
// stopped itself past its failure budget.
const exitBudgetSpent = 4

// budgetSpent says why a run sent in this process stopped itself, and how
// to go on once the setting that failed its records is fixed: the records
// of the task that spent the budget, and of those after it, were not
// written off, and the claims keep where each task stopped.
func (c *fanoutCmd) budgetSpent(stderr io.Writer, rep engine.Report) int {
	fmt.Fprintf(stderr, "s3sqs fanout: run %s stopped itself: %s.\n", rep.RunID, rep.StopReason)
	fmt.Fprintf(stderr, "The records of its stopped tasks are neither sent nor on the failure output. Fix the setting (or raise -max-failures), then:\n")
	if c.claimsTable != "" {
		fmt.Fprintf(stderr, "s3sqs resume -run-id %s -claims-table %s, and the same command with the fix (-run-id %s) to continue from where each task stopped.\n", rep.RunID, c.claimsTable, rep.RunID)
	} else {
		fmt.Fprintf(stderr, "run the command again: without -claims-table nothing keeps where it stopped, and the whole dataset is sent (its records with the same ids).\n")
	}
	return exitBudgetSpent
}
