package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Request names a dataset to send, with optional per-run overrides.
type Request struct {
	dataset.Source
	worktask.Overrides
	// RunID names the run; empty means a new random id.
	RunID string `json:"runId,omitempty"`
	// DryRun plans the run and counts what it would send, sending nothing
	// (see Runner.DryRun), with DryRunOptions when given.
	DryRun        bool           `json:"dryRun,omitempty"`
	DryRunOptions *DryRunOptions `json:"dryRunOptions,omitempty"`
	// Queue sends every chunk to the work queue as a task, however small
	// the dataset, for the deployed function's workers to send (the CLI's
	// -work-queue-url). The tasks name the runner's target queue when the
	// request names none.
	Queue bool `json:"-"`
}

// Validate reports the first problem of the request: a source that does
// not name exactly one dataset, a setting out of its range, or a bad run
// id. Every error names the request's field.
func (r *Request) Validate() error {
	if err := r.Source.Validate(); err != nil {
		return err
	}
	if err := r.Overrides.Validate(); err != nil {
		return err
	}
	if r.Versions && r.Mode != "" && r.Mode != worktask.ModeNotification {
		return errVersionsMode
	}
	if o := r.DryRunOptions; o != nil {
		if !r.DryRun {
			return errDryRunOptions
		}
		if err := o.Validate(); err != nil {
			return err
		}
	}
	return CheckRunID(r.RunID)
}

// CheckRunID reports a run id that cannot name a run: longer than 80
// characters, or with characters other than letters, digits, '-', '_' and
// '.'. The empty id is allowed: it means a new one.
func CheckRunID(id string) error { return settings.CheckRunID(id) }

// DecodeRequest reads a request strictly: unknown fields, values of the
// wrong type, trailing data and values out of range are refused with an
// error that names the field, before anything is listed or sent.
func DecodeRequest(payload []byte) (Request, error) {
	var req Request
	if err := strictjson.Decode(payload, &req); err != nil {
		return Request{}, fmt.Errorf("fanout: bad request: %w", err)
	}
	if err := req.Validate(); err != nil {
		return Request{}, fmt.Errorf("fanout: bad request: %w", err)
	}
	return req, nil
}

// overridesOf returns the overrides a task or planning step carries, which
// worktask.Parse or ParsePlan has checked; nil means none.
func overridesOf(ov *worktask.Overrides) worktask.Overrides {
	if ov == nil {
		return worktask.Overrides{}
	}
	return *ov
}

// errVersionsMode refuses a request for every version in another mode than
// notification's: record and chunk mode read an object's current version.
var errVersionsMode = errors.New("versions replays every version of each key as notifications: it needs mode notification")

// validate gives req the runner's filters when it sets none of its own
// (see Options.Planning.Filters), and reports what req.Validate does, and a request
// for every version in a run that is not in notification mode by the
// runner's mode, or, on a FIFO target, with filters that could leave
// versions out of the middle of a key's history.
func (r *Runner) validate(ctx context.Context, req *Request) error {
	if req.Filters.IsZero() {
		req.Filters = r.opts.Planning.Filters
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if req.Versions && !r.notifyModeOf(&req.Overrides) {
		return errVersionsMode
	}
	if f := req.Filters; req.Versions && (f.MinSize > 0 || f.MaxSize > 0 || len(f.StorageClasses) > 0) {
		// A FIFO target gets one task per key, which announces a run of
		// consecutive versions (see versionTasks).
		if sender, _, err := r.sender(ctx, &req.Overrides); err != nil || sender.FIFO() {
			return cmp.Or(err, errVersionsGaps)
		}
	}
	return nil
}

// errVersionsGaps refuses the filters by size and storage class of a
// replay of every version to a FIFO queue.
var errVersionsGaps = errors.New("versions to a FIFO target announces each key's versions as one run, in order, which minSize, maxSize and storageClasses could cut in the middle: " +
	"filter the versions by modifiedAfter and modifiedBefore, or replay them to a standard queue")
