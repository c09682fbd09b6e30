package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/internal/strictjson"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The drivers are the services that hand fanout a list of objects and
// keep the list's progress themselves: S3 Batch Operations (batchops.go)
// and Step Functions Distributed Map (distmap.go). Each object is run as
// the engine runs any object (Runner.run): sent in the invocation when it
// is small enough, else queued on the work queue as chunk tasks; what is
// left at the deadline is queued as continuations. Each object's outcome
// is one of three ResultCodes, so that the driver retries what a retry can
// fix and records the rest as failed.

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
// Retrying cannot help.
type ArgumentError struct {
	// Field names where the arguments came from, such as "userArguments".
	Field string
	Err   error
}

func (e *ArgumentError) Error() string { return "fanout: bad " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *ArgumentError) Unwrap() error { return e.Err }

// errNoBucket is an item that names no bucket.
var errNoBucket = errors.New("no bucket: give it in BatchInput.bucket or in the item")

// permanentCodes are the AWS error codes that no retry fixes.
var permanentCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "Forbidden": true,
	"NoSuchKey": true, "NoSuchBucket": true, "NoSuchVersion": true, "NotFound": true,
	"InvalidObjectState": true, "InvalidArgument": true, "InvalidBucketName": true,
	"KMS.AccessDeniedException": true, "KMS.DisabledException": true,
	"AWS.SimpleQueueService.NonExistentQueue": true, "QueueDoesNotExist": true,
}

// Classify returns the result code of an object that failed with err (nil:
// Succeeded). What a retry can fix is a TemporaryFailure: a claim another
// delivery holds, the invocation's deadline, an error the AWS SDK retries
// (throttling, 5xx, a broken connection), and any error not known to be
// permanent. PermanentFailure is a missing object or version, a changed
// object, an unknown format, bad arguments, a malformed task, and an AWS
// error whose code is known not to change on retry (AccessDenied, NoSuchKey,
// ...) or whose HTTP status is a 4xx other than 408 and 429.
func Classify(err error) ResultCode {
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
	case retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary,
		retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary:
		return TemporaryFailure
	}
	var api smithy.APIError
	if errors.As(err, &api) && permanentCodes[api.ErrorCode()] {
		return PermanentFailure
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		if c := status.HTTPStatusCode(); c >= 400 && c < 500 && c != 408 && c != 429 {
			return PermanentFailure
		}
	}
	return TemporaryFailure
}

// objectRun is what became of one object a driver named.
type objectRun struct {
	Object dataset.Object
	Report Report
	Code   ResultCode
	Err    error
}

// objectJob is one object a driver names: how to run it, or, in err, why
// it cannot be run (bad arguments, an item without a bucket).
type objectJob struct {
	obj  dataset.Object
	ov   Overrides
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
func (h *Handler) runObject(ctx context.Context, runID string, obj dataset.Object, ov Overrides, head bool) objectRun {
	out := objectRun{Object: obj, Report: Report{RunID: runID}}
	if head {
		// A missing object or version wraps dataset.ErrNotFound.
		pinned, err := dataset.Head(ctx, h.runner.s3, obj.Bucket, obj.Key, obj.VersionID)
		if err != nil {
			out.Code, out.Err = Classify(err), err
			return out
		}
		out.Object = pinned
	}
	out.Report, out.Err = h.runner.RunObject(ctx, runID, out.Object, ov)
	out.Code = Classify(out.Err)
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
func (h *Handler) invocationReport(ctx context.Context, id string, rep Report, at time.Time) {
	if err := h.runner.WriteInvocationReport(ctx, id, rep, at); err != nil {
		h.log.ErrorContext(ctx, "run report not written", "err", err)
	}
}

// answer ends an invocation of a driver: its summary line, and its answer
// as is. FAIL_ON_ERROR acts per object (see runObject), not on the whole
// invocation, whose answer says what became of each object.
func (h *Handler) answer(ctx context.Context, inv *Invocation, start time.Time, out any, err error) (any, error) {
	inv.DurationMs = h.opts.Now().Sub(start).Milliseconds()
	h.report(ctx, inv, err)
	return out, err
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
	Overrides
	RunID string `json:"runId,omitempty"`
}

func (a *runArguments) validate() error {
	if a.Ingest != nil {
		return errors.New("ingest: is s3ingest's hand-off and cannot be given here")
	}
	if err := a.Overrides.Validate(); err != nil {
		return err
	}
	return CheckRunID(a.RunID)
}

// jsonString marshals s; it cannot fail.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
