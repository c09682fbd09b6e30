package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// runFlags are the flags that name a run whose state the claims table
// keeps: status, pause, resume, cancel and set take them.
type runFlags struct {
	runID, table string
}

// define defines -run-id and -claims-table; what says what the command
// does with the run.
func (rf *runFlags) define(fs *cmdFlags, what string) {
	fs.text(settings.RunID, &rf.runID, "the `run` to "+what+" (required)")
	fs.text(settings.ClaimsTable, &rf.table, "the functions' claims `table` (CLAIMS_TABLE), which keeps the run's state (required)")
}

// missing says which of the two flags the command line lacks, and why a
// claims table is needed; "" when both are given.
func (rf *runFlags) missing() string {
	switch {
	case rf.runID == "":
		return "name the run with -run-id (the runId of its report, tasks and logs)"
	case rf.table == "":
		return "name the claims table with -claims-table (the functions' CLAIMS_TABLE): a run's state lives there, " +
			"and without a claims table the functions keep none; the run report (REPORT_S3_URI) is then the record of a run"
	}
	return ""
}

// parse reads a run command's line into fs and checks what every run
// command needs: no argument, the run and the table named, each flag
// right. It returns the exit code when the command cannot go on.
func (rf *runFlags) parse(fs *cmdFlags, args []string, bad func(string, ...any) int) (int, bool) {
	if code, ok := parseFlags(fs.FlagSet, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0)), false
	}
	if msg := rf.missing(); msg != "" {
		return bad("%s", msg), false
	}
	if msg, ok := fs.firstBad(); ok {
		return bad("%s", msg), false
	}
	return 0, true
}

// open returns the runs of the claims table, through a DynamoDB client
// from the SDK's standard configuration.
func (rf *runFlags) open(ctx context.Context) (*runstate.Table, error) {
	ddb, err := awssetup.DynamoDB(ctx)
	if err != nil {
		return nil, err
	}
	return runstate.NewTable(ddb, rf.table, runstate.TableOptions{}), nil
}

// get reads the run, saying in words what ErrNoRun means.
func (rf *runFlags) get(ctx context.Context, runs *runstate.Table) (runstate.Run, error) {
	run, err := runs.Get(ctx, rf.runID)
	if errors.Is(err, runstate.ErrNoRun) {
		return run, fmt.Errorf("no run %s in table %s (runs are kept %d days after their last write; check -run-id and -claims-table, "+
			"and that the run's functions have CLAIMS_TABLE set to this table): %w", rf.runID, rf.table, claims.DefaultTTL/(24*time.Hour), err)
	}
	if err != nil {
		return run, fmt.Errorf("read run %s from table %s: %w", rf.runID, rf.table, err)
	}
	return run, nil
}
