package fanouthandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The drivers are the services that hand fanout a list of objects and
// keep the list's progress themselves: S3 Batch Operations (batchops.go)
// and Step Functions Distributed Map (distmap.go). Each object is a run of
// its own (Runner.RunObjects): sent in the invocation when it is small
// enough, else queued on the work queue as chunk tasks; what is left at
// the deadline is queued as continuations. Each object's outcome is one of
// three ResultCodes, so that the driver retries what a retry can fix and
// records the rest as failed.

// ResultCode is what became of one object a driver named. The values are
// S3 Batch Operations' result codes, which the Distributed Map answer uses
// too.
type ResultCode string

// Result codes.
const (
	// Succeeded: the object's records were sent (those SQS refused for
	// good are on the failure output), or its chunks queued as tasks.
	Succeeded ResultCode = "Succeeded"
	// TemporaryFailure: a retry can fix it (throttling, a 5xx, the
	// deadline, a work queue that refused tasks, a claim another delivery
	// holds). With a claims table the retry skips the chunks already done.
	TemporaryFailure ResultCode = "TemporaryFailure"
	// PermanentFailure: it cannot succeed as asked (a missing object or
	// version, access denied, an unknown format, bad arguments, an object
	// changed since it was pinned).
	PermanentFailure ResultCode = "PermanentFailure"
)

// ArgumentError is a driver's arguments that a request could not have
// given: Batch Operations' userArguments or a Distributed Map's BatchInput.
// Retrying cannot help. Lambda names an invocation's error by its type, so
// that a Distributed Map sees "ArgumentError".
type ArgumentError struct {
	// Field names where the arguments came from, such as "userArguments".
	Field string
	Err   error
}

// Error says which arguments were bad and why.
func (e *ArgumentError) Error() string { return "fanout: bad " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *ArgumentError) Unwrap() error { return e.Err }

// errNoBucket is an item that names no bucket.
var errNoBucket = errors.New("no bucket: give it in BatchInput.bucket or in the item")

// classify returns the result code of an object that failed with err (nil:
// Succeeded). What a retry can fix is a TemporaryFailure: a claim another
// delivery holds, the invocation's deadline, an error the AWS SDK retries
// (throttling, 5xx, a broken connection), and any error not known to be
// permanent. PermanentFailure is a missing object or version, a changed
// object, an unknown format, bad arguments, a malformed task, and an AWS
// error that asking again gets again (awserr's NotFound, Changed and
// Permanent: AccessDenied, NoSuchKey, a 4xx other than 408 and 429, ...).
func classify(err error) ResultCode {
	var (
		malformed *worktask.MalformedError
		badArgs   *ArgumentError
	)
	switch {
	case err == nil:
		return Succeeded
	case errors.Is(err, dataset.ErrNotFound), errors.Is(err, dataset.ErrChanged), errors.Is(err, dataset.ErrUnknownFormat),
		errors.Is(err, errNoBucket), errors.As(err, &malformed), errors.As(err, &badArgs):
		return PermanentFailure
	case errors.Is(err, claims.ErrHeld), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return TemporaryFailure
	}
	switch awserr.Classify(err) {
	case awserr.NotFound, awserr.Changed, awserr.Permanent:
		return PermanentFailure
	}
	return TemporaryFailure
}

// objectRun is what became of one object a driver named.
type objectRun struct {
	Object dataset.Object
	Report engine.Report
	Code   ResultCode
	Err    error
}

// objectJob is one object a driver names: how to run it, or, in err, why
// it cannot be run (bad arguments, an item without a bucket).
type objectJob struct {
	obj  dataset.Object
	ov   worktask.Overrides
	head bool
	err  error
}

// runObjects runs jobs as runObject does, up to Concurrency at once, each
// a run of its own named runID; a job with an err is a PermanentFailure
// without running. Results are in the order of jobs.
func (h *Handler) runObjects(ctx context.Context, runID string, jobs []objectJob) []objectRun {
	runs := make([]objectRun, len(jobs))
	var g errgroup.Group
	g.SetLimit(h.opts.Concurrency)
	for i, j := range jobs {
		if j.err != nil {
			runs[i] = objectRun{Object: j.obj, Code: PermanentFailure, Err: j.err}
			continue
		}
		g.Go(func() error {
			runs[i] = h.runObject(ctx, runID, j.obj, j.ov, j.head)
			return nil
		})
	}
	g.Wait()
	return runs
}

// runObject runs obj as a run of its own, pinning it first with HeadObject
// when head is set (the version id obj gives, or the latest), and
// classifies the outcome. With failOnError, records on the failure output
// make the object a PermanentFailure: a retry would not send them again.
func (h *Handler) runObject(ctx context.Context, runID string, obj dataset.Object, ov worktask.Overrides, head bool) objectRun {
	out := objectRun{Object: obj, Report: engine.Report{RunID: runID}}
	if head {
		// A missing object or version wraps dataset.ErrNotFound.
		pinned, err := dataset.Head(ctx, h.s3, obj.Bucket, obj.Key, obj.VersionID)
		if err != nil {
			out.Code, out.Err = classify(err), err
			return out
		}
		out.Object = pinned
	}
	one := func(yield func(dataset.Object, error) bool) { yield(out.Object, nil) }
	out.Report, out.Err = h.runner.RunObjects(ctx, runID, one, engine.ObjectsOptions{Overrides: ov, NoManifest: true})
	out.Code = classify(out.Err)
	if out.Err == nil && out.Report.ObjectsFailed > 0 {
		// No retry reads it: what could be read was sent, and the rest is
		// on the failure output with the reason.
		out.Code = PermanentFailure
		out.Err = errors.New("the object cannot be read to its end (corrupt, truncated or changed since it was pinned): the records read were sent, the rest is on the failure output")
	}
	if out.Err == nil && h.opts.FailOnError && out.Report.RecordsFailed > 0 {
		out.Code = PermanentFailure
		out.Err = fmt.Errorf("%d records failed (FAIL_ON_ERROR is set; they are on the failure output)", out.Report.RecordsFailed)
	}
	return out
}

// invocationReport writes, when a run report is configured, what one
// invocation of a driver did to <prefix>/<runId>/invocations/<id>.json. A
// driver's run spans many invocations (a Batch Operations job's, a Map
// run's batches), each running some of its objects: a run's manifest.json,
// which each would overwrite, is not written. The driver's own report (a
// Batch Operations completion report, a ResultWriter's results) lists every
// object. A report that cannot be written is logged; the records are sent
// all the same.
func (h *Handler) invocationReport(ctx context.Context, id string, rep engine.Report, at time.Time) {
	if err := h.runner.WriteInvocationReport(ctx, id, rep, at); err != nil {
		h.log.ErrorContext(ctx, "run report not written", "err", err)
	}
}

// decodeArguments reads a driver's per-run arguments as strictly as a
// request's overrides: unknown fields and bad values are an *ArgumentError
// naming the field.
func decodeArguments(field string, raw []byte, v interface {
	validate() error
}) error {
	if err := strictjson.Decode(raw, v); err != nil {
		return &ArgumentError{Field: field, Err: err}
	}
	if err := v.validate(); err != nil {
		return &ArgumentError{Field: field, Err: err}
	}
	return nil
}

// runArguments are the per-run settings a driver may give: a request's
// overrides and its run id.
type runArguments struct {
	worktask.Overrides
	RunID string `json:"runId,omitempty"`
	// DryRun is read only to be refused: see refuseDryRun.
	DryRun json.RawMessage `json:"dryRun,omitempty"`
}

func (a *runArguments) validate() error {
	if a.Ingest != nil {
		return errors.New("ingest: is s3ingest's hand-off and cannot be given here")
	}
	if err := refuseDryRun(a.DryRun); err != nil {
		return err
	}
	if err := a.Overrides.Validate(); err != nil {
		return err
	}
	return engine.CheckRunID(a.RunID)
}
