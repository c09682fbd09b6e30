package redrive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// ParseReportURI reads the location of one run's report,
// s3://bucket/prefix/<runId>/, and returns its bucket, its key prefix
// (ending with "/") and the run id.
func ParseReportURI(uri string) (bucket, base, runID string, err error) {
	bucket, key, err := dataset.ParseS3URI(uri)
	if err != nil {
		return "", "", "", err
	}
	key = strings.TrimSuffix(key, "/")
	key = strings.TrimSuffix(strings.TrimSuffix(key, "/manifest.json"), "/failed")
	runID = path.Base(key)
	if key == "" || runID == "." || runID == "/" {
		return "", "", "", fmt.Errorf("%q names no run: want s3://bucket/prefix/RUNID/, the folder of the run's manifest.json", uri)
	}
	if err := engine.CheckRunID(runID); err != nil {
		return "", "", "", fmt.Errorf("%q does not end with a run id: %w", uri, err)
	}
	return bucket, key + "/", runID, nil
}

// ReportURI returns the location of run runID's report under a
// REPORT_S3_URI.
func ReportURI(reportS3URI, runID string) string {
	return strings.TrimSuffix(reportS3URI, "/") + "/" + runID + "/"
}

// redriveSuffix is added to a run's id to name the run of its redrive.
const redriveSuffix = "-redrive"

// RedriveRunID returns the run id of a redrive of run runID: runID with
// "-redrive" added (cut to fit a run id). It is deterministic, so that
// with fanout's claims table a task that a second redrive queues again is
// skipped once the first one's copy is done, and so that the records that
// fail again are in the redrive run's own report, to redrive in turn.
func RedriveRunID(runID string) string {
	const maxRunID = 80 // engine.CheckRunID's bound
	if len(runID)+len(redriveSuffix) > maxRunID {
		runID = runID[:maxRunID-len(redriveSuffix)]
	}
	return runID + redriveSuffix
}

// Report redrives the failed tasks of the run report at uri
// (s3://bucket/prefix/<runId>/, see ParseReportURI): with a work queue,
// each task goes back to it from its first selected failed record, as the
// run redriveRun (see Options.RunID); otherwise the selected failed
// records alone are read again and sent to the target in this process
// (engine.Runner.RunRecords). A task's records sent are recorded in
// <run>/redriven/<taskId>.json, and skipped by the next redrive.
//
// The error reports a report that cannot be read; the records found are
// accounted for in the Summary either way.
func (r *Redriver) Report(ctx context.Context, uri string) (*Summary, error) {
	bucket, base, runID, err := ParseReportURI(uri)
	to := r.opts.TargetQueueURL
	if r.opts.WorkQueueURL != "" {
		to = r.opts.WorkQueueURL
	}
	t := newTally(r.opts, uri, to)
	if err != nil {
		return t.summary(), err
	}
	if r.runner == nil {
		return t.summary(), errors.New("redrive: a run report goes to a work queue or a target queue; neither is set")
	}
	keys, err := listKeys(ctx, r.s3, bucket, base+"failed/", ".json")
	if err != nil {
		return t.summary(), err
	}
	if len(keys) == 0 {
		var m engine.Manifest
		found, err := getJSON(ctx, r.s3, bucket, base+"manifest.json", &m)
		if err != nil {
			return t.summary(), err
		}
		if !found {
			return t.summary(), fmt.Errorf("redrive: no run report at s3://%s/%s: neither manifest.json nor failed/ is there", bucket, base)
		}
		return t.summary(), nil // a run without failed tasks
	}
	tasks := make([]engine.FailedTask, len(keys))
	for i, key := range keys {
		if _, err := getJSON(ctx, r.s3, bucket, key, &tasks[i]); err != nil {
			return t.summary(), fmt.Errorf("redrive: run report: %w", err)
		}
		if err := tasks[i].Task.Validate(); err != nil {
			return t.summary(), fmt.Errorf("redrive: run report s3://%s/%s: %w", bucket, key, &worktask.MalformedError{Err: err})
		}
		t.expect(len(tasks[i].Failures))
	}
	run := cmp.Or(r.opts.RunID, RedriveRunID(runID))
	for i, key := range keys {
		if err := ctx.Err(); err != nil {
			return t.summary(), err
		}
		r.reportTask(ctx, t, bucket, key, base+"redriven/"+path.Base(key), tasks[i], run)
	}
	return t.summary(), nil
}

// reportTask redrives one failed task of a run report.
func (r *Redriver) reportTask(ctx context.Context, t *tally, bucket, key, markerKey string, ft engine.FailedTask, run string) {
	from := "s3://" + bucket + "/" + key
	obj := ft.Task.Chunk.Object
	items := make([]Item, 0, len(ft.Failures))
	for _, fr := range ft.Failures {
		items = append(items, Item{ID: engine.RecordID(obj, fr.Offset), From: from, Source: obj.URI(), Offset: new(fr.Offset), Code: fr.Code})
	}
	m, err := readMarker(ctx, s3Files{c: r.s3, bucket: bucket}, markerKey)
	if err != nil {
		for _, it := range items {
			it.Outcome, it.Reason = Failed, "the redrive marker cannot be read: "+err.Error()
			t.add(it)
		}
		return
	}
	picked := r.pick(t, items, m, "s3://"+bucket+"/"+markerKey)
	if len(picked) == 0 {
		return
	}
	offsets := make([]int64, len(picked))
	for i, p := range picked {
		offsets[i] = *items[p].Offset
	}
	task := ft.Task
	task.RunID = run
	// A chained task (FIFO) re-driven runs its own chunk, not the rest of
	// its object, which the run sent.
	task.Chain = nil
	if r.opts.WorkQueueURL != "" {
		sent := r.requeue(ctx, t, task, run, slices.Min(offsets), items, picked, m)
		r.markFile(ctx, s3Files{c: r.s3, bucket: bucket}, markerKey, m, r.opts.WorkQueueURL, sent)
		return
	}
	to := taskTarget(task, r.opts.TargetQueueURL)
	if r.opts.DryRun {
		for _, p := range picked {
			it := items[p]
			it.Outcome, it.To, it.Reason = WouldSend, to, "read again from its object"
			t.add(it)
		}
		return
	}
	res, missing := r.runner.RunRecords(ctx, task, offsets)
	byOffset := map[int64]*Item{}
	for _, p := range picked {
		items[p].To = to
		byOffset[*items[p].Offset] = &items[p]
	}
	sent := r.settleRun(byOffset, res, missing, obj)
	for _, p := range picked {
		t.add(items[p])
	}
	r.markFile(ctx, s3Files{c: r.s3, bucket: bucket}, markerKey, m, to, sent)
}

// pick returns the places in items of the records to send, one per
// offset, and accounts for the rest now: refused by the code filter,
// recorded as sent in the marker m (at markerURI), or listed twice.
func (r *Redriver) pick(t *tally, items []Item, m *Marker, markerURI string) []int {
	var picked []int
	seen := map[int64]bool{}
	for i := range items {
		it := &items[i]
		if ok, why := r.opts.Codes.allows(it.Code); !ok {
			it.Outcome, it.Reason = Skipped, why
		} else if m.has(it.ID) {
			it.Outcome, it.Reason = Skipped, "sent by an earlier redrive (marker "+markerURI+")"
		} else if seen[*it.Offset] {
			it.Outcome, it.Reason = Skipped, "listed twice in the task's failures; sent once"
		} else {
			seen[*it.Offset] = true
			picked = append(picked, i)
			continue
		}
		t.add(*it)
	}
	return picked
}

// requeue queues task on the work queue from the first offset picked,
// accounts for the picked items, and returns the ids of those sent.
// fanout reads a chunk from ResumeAt: the records before the first
// selected one are not sent again; those after it are, with their record
// ids, which consumers drop when they have them.
func (r *Redriver) requeue(ctx context.Context, t *tally, task worktask.Task, run string, first int64, items []Item, picked []int, m *Marker) []string {
	task.ResumeAt = max(task.ResumeAt, first)
	outcome := Sent
	reason := fmt.Sprintf("in task %s of run %s, which reads the chunk from offset %d", task.ID(), run, task.ResumeAt)
	switch {
	case r.opts.DryRun:
		outcome = WouldSend
	default:
		if err := r.runner.Enqueue(ctx, task); err != nil {
			outcome, reason = Failed, err.Error()
		} else {
			t.sum.TasksQueued++
			m.Queued = append(m.Queued, task.ID())
		}
	}
	var sent []string
	for _, p := range picked {
		it := items[p]
		it.Outcome, it.To, it.Reason = outcome, r.opts.WorkQueueURL, reason
		if outcome == Sent {
			sent = append(sent, it.ID)
		}
		t.add(it)
	}
	return sent
}

// taskTarget returns the queue a task's records go to: its request's own
// target, or def.
func taskTarget(t worktask.Task, def string) string {
	if t.Overrides != nil && t.Overrides.TargetQueueURL != "" {
		return t.Overrides.TargetQueueURL
	}
	return def
}

// settleRun sets the outcome of the records a RunRecords call was asked
// for, by offset, and returns the ids of those sent. A record the engine still
// cannot read or map, or whose object is gone, is skipped; one SQS refused
// failed.
func (r *Redriver) settleRun(items map[int64]*Item, res engine.TaskResult, missing []int64, obj dataset.Object) (sent []string) {
	fails := r.failed.take()
	for _, o := range slices.Sorted(maps.Keys(items)) {
		it := items[o]
		f, failed := fails[o]
		switch {
		case res.Err != nil && (errors.Is(res.Err, dataset.ErrChanged) || errors.Is(res.Err, dataset.ErrNotFound)):
			it.Outcome, it.Reason = Skipped, "the object cannot be read again at the version it was sent from: "+res.Err.Error()
		case res.Err != nil:
			it.Outcome, it.Reason = Failed, res.Err.Error()
		case res.Continuation != nil:
			it.Outcome, it.Reason = Failed, "interrupted before every record was sent; it may have been sent"
		case slices.Contains(missing, o):
			it.Outcome, it.Reason = Skipped, fmt.Sprintf("no record starts at offset %d of %s (version %q)", o, obj.URI(), obj.Pin())
		case failed && readError(f.Code):
			it.Outcome, it.Reason = Skipped, "it still cannot be read or mapped: "+f.Code+": "+f.Message
		case failed:
			it.Outcome, it.Reason = Failed, f.Code+": "+f.Message
		default:
			it.Outcome, it.Reason = Sent, ""
			sent = append(sent, it.ID)
		}
	}
	return sent
}
