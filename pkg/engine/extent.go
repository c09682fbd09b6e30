package engine

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

// A planning step's extent is where its listing stopped: at the end, or at
// a cursor from which its next steps go on. The first delivery of a step
// to be counted (addPlanned) fixes it, in the same write as its counts:
// one that stops early counts before it queues its next steps, so that no
// next step is ever queued uncounted. A later delivery of the step (its
// claim's Done failed, or a send's answer was lost) plans to that extent
// exactly and queues the same next steps, which the claims store and a
// FIFO work queue take as the ones already queued. Without it, a delivery
// that planned further than the one whose next step SQS took left that
// step queued and counted nowhere: status said done while it waited, and
// once it ran, the run counted its chunks planned twice and was never done
// (found by `make simulate`, seed 9721).
type extent struct {
	end    bool // the listing ended
	cursor dataset.Cursor
}

// extentEnd is the note of a planning that listed to the end.
const extentEnd = "end"

// errShortOfExtent fails a delivery of a planning step that ended before
// the extent an earlier delivery of it counted: it comes back to plan to
// it.
var errShortOfExtent = fmt.Errorf("fanout: the planning step ended before the point an earlier delivery of it planned to: %w", partialbatch.ErrDeadline)

// plannedKey is the key under which pr's planning counts once (see
// addPlanned): a planning step by its id and number (a first step that
// planned nothing before its deadline queues a second one at the same
// cursor), a run planned in parts without steps (the keys of a Batch
// Operations job, notified objects) by the tasks of each part.
func plannedKey(pr *planRun) string {
	if pr.step != nil {
		return "planned#" + pr.step.ID() + "#" + strconv.Itoa(pr.step.Step)
	}
	return "planned#" + hex.EncodeToString(pr.ids.Sum(nil)[:16])
}

// extentNote is what addPlanned keeps of pr's extent.
func extentNote(pr *planRun) string {
	switch {
	case pr.step == nil:
		return ""
	case pr.steps == 0:
		return extentEnd
	}
	b, _ := json.Marshal(pr.cursor)
	return string(b)
}

// readExtent reads the extent of pr's step that an earlier delivery
// counted, if any, into pr.extent, and marks pr counted.
func (r *Runner) readExtent(ctx context.Context, pr *planRun) error {
	if pr.step == nil || r.opts.Control.Runs == nil || r.work == nil {
		return nil
	}
	note, added, err := r.opts.Control.Runs.Once(ctx, pr.runID, plannedKey(pr))
	switch {
	case err != nil:
		return fmt.Errorf("fanout: planning step %d of run %s: %w", pr.step.Step, pr.runID, err)
	case !added:
		return nil
	}
	pr.counted = true
	switch note {
	case "":
		// Counted before extents were kept: planned again as it was then.
	case extentEnd:
		pr.extent = &extent{end: true}
	default:
		var c dataset.Cursor
		if err := json.Unmarshal([]byte(note), &c); err != nil {
			return fmt.Errorf("fanout: planning step %d of run %s: its extent %q: %w", pr.step.Step, pr.runID, note, err)
		}
		pr.extent = &extent{cursor: c}
	}
	return nil
}

// reached reports whether a listing at cursor c has got to x: cursors of
// one listing grow in (Index, Offset, After) order.
func reached(c, x dataset.Cursor) bool {
	switch {
	case c.Index != x.Index:
		return c.Index > x.Index
	case c.Offset != x.Offset:
		return c.Offset > x.Offset
	}
	return c.After >= x.After
}
