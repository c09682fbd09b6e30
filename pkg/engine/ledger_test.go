package engine

import (
	"fmt"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// TestLedger adds and takes out a run's unsettled counts, never below
// zero nor into a run it forgot, keeps a stopped run past maxPacers runs,
// and forgets a run a request starts again.
func TestLedger(t *testing.T) {
	var l ledger
	c := runstate.Counters{RecordsRead: 10, RecordsFailed: 4}
	l.tally("r", c, map[string]int64{"BadRecord": 4})
	l.tally("r", c, map[string]int64{"BadRecord": 3, "UnmappableRecord": 1})
	l.settled("r", c, map[string]int64{"BadRecord": 4})
	got := l.get("r")
	if got.RecordsRead != 10 || got.RecordsFailed != 4 || got.FailureCodes["BadRecord"] != 3 || got.FailureCodes["UnmappableRecord"] != 1 {
		t.Errorf("after one settled: %+v", got)
	}
	l.settled("r", runstate.Counters{RecordsRead: 50}, map[string]int64{"BadRecord": 9, "Other": 1})
	if got := l.get("r"); got.RecordsRead != 0 || len(got.FailureCodes) != 1 {
		t.Errorf("after more settled than added: %+v, want 0 read and UnmappableRecord alone", got)
	}
	l.settled("gone", c, map[string]int64{"BadRecord": 1}) // no panic, nothing made
	if _, ok := l.runs["gone"]; ok {
		t.Error("settled made a run it never had")
	}

	if !l.stop("r", "why") || l.stop("r", "again") || l.stopped("r") != "why" {
		t.Errorf("stop: %q", l.stopped("r"))
	}
	for i := range maxPacers + 10 {
		l.tally(fmt.Sprint("busy", i), runstate.Counters{}, nil)
	}
	if l.stopped("r") != "why" {
		t.Error("a stopped run was forgotten for runs that hold nothing")
	}
	l.reset("r")
	if l.stopped("r") != "" {
		t.Error("reset kept the stop")
	}
}
