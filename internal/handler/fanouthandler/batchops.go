package fanouthandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/textcut"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// BatchJob is an S3 Batch Operations "Invoke AWS Lambda function"
// invocation, of invocation schema 1.0 (each task's bucket as an ARN) or
// 2.0 (the bucket's name, and the job's userArguments), with each task's
// object named as S3 names it.
type BatchJob struct {
	SchemaVersion string
	InvocationID  string
	JobID         string
	// UserArguments are 2.0's job.userArguments; nil in 1.0.
	UserArguments map[string]string
	Tasks         []BatchTask
}

// BatchTask is one task of a BatchJob: the object it names (bucket, the
// URL-decoded key, and the version id when the manifest gives one), or Err
// when it names none, which makes it a PermanentFailure.
type BatchTask struct {
	TaskID string
	Object dataset.Object
	Err    error
}

// Invocation schema versions of S3 Batch Operations that fanout answers.
const (
	batchSchema1 = "1.0"
	batchSchema2 = "2.0"
)

// decodeBatchJob reads an S3 Batch Operations invocation. An invocation
// whose invocationSchemaVersion is not 1.0 or 2.0, or that is not JSON of
// that shape, is an error naming what is wrong: the whole invocation fails.
// A task whose key is not URL-encoded, or whose bucket is missing, has Err
// set. Fields Batch Operations may add later are ignored.
func decodeBatchJob(payload []byte) (BatchJob, error) {
	var probe struct {
		Version json.RawMessage `json:"invocationSchemaVersion"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return BatchJob{}, fmt.Errorf("fanout: S3 Batch Operations invocation: %w", err)
	}
	var version string
	if err := json.Unmarshal(probe.Version, &version); err != nil {
		return BatchJob{}, fmt.Errorf("fanout: S3 Batch Operations invocationSchemaVersion %s is not a string such as \"2.0\"", probe.Version)
	}
	job := BatchJob{SchemaVersion: version}
	switch version {
	case batchSchema1:
		var ev events.S3BatchJobEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return BatchJob{}, fmt.Errorf("fanout: S3 Batch Operations invocation (schema 1.0): %w", err)
		}
		job.InvocationID, job.JobID = ev.InvocationID, ev.Job.ID
		for _, t := range ev.Tasks {
			bucket, err := bucketFromARN(t.S3BucketARN)
			job.Tasks = append(job.Tasks, batchTask(t.TaskID, bucket, t.S3Key, t.S3VersionID, err))
		}
	case batchSchema2:
		var ev events.S3BatchJobEventV2
		if err := json.Unmarshal(payload, &ev); err != nil {
			return BatchJob{}, fmt.Errorf("fanout: S3 Batch Operations invocation (schema 2.0): %w", err)
		}
		job.InvocationID, job.JobID, job.UserArguments = ev.InvocationID, ev.Job.ID, ev.Job.UserArguments
		for _, t := range ev.Tasks {
			var err error
			if t.S3Bucket == "" {
				err = fmt.Errorf("task %s: no s3Bucket", t.TaskID)
			}
			job.Tasks = append(job.Tasks, batchTask(t.TaskID, t.S3Bucket, t.S3Key, t.S3VersionID, err))
		}
	default:
		return BatchJob{}, fmt.Errorf("fanout: S3 Batch Operations invocationSchemaVersion %q is not one fanout answers (1.0 or 2.0)", version)
	}
	return job, nil
}

// batchTask returns the task of a bucket and a key as Batch Operations
// writes it: URL-encoded, '+' for a space.
func batchTask(id, bucket, rawKey, version string, err error) BatchTask {
	t := BatchTask{TaskID: id, Object: dataset.Object{Bucket: bucket, VersionID: version}, Err: err}
	if t.Err != nil {
		return t
	}
	key, err := url.QueryUnescape(rawKey)
	switch {
	case err != nil:
		t.Err = fmt.Errorf("s3Key %q is not URL-encoded as S3 Batch Operations writes keys: %w", rawKey, err)
	case key == "":
		t.Err = fmt.Errorf("task %s: no s3Key", id)
	}
	t.Object.Key = key
	return t
}

// bucketFromARN returns the bucket an S3 bucket ARN names
// (arn:aws:s3:::bucket).
func bucketFromARN(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "s3" || parts[5] == "" || strings.Contains(parts[5], "/") {
		return "", fmt.Errorf("s3BucketArn %q is not a bucket ARN such as arn:aws:s3:::bucket", arn)
	}
	return parts[5], nil
}

// batchArguments reads a job's userArguments as a request's overrides and
// run id, as strictly: each value is the string a request would give (a
// number as its digits, a size such as "8MiB"). An unknown name or a bad
// value is an *ArgumentError naming it.
func batchArguments(args map[string]string) (worktask.Overrides, string, error) {
	b, _ := json.Marshal(args) // strings: it cannot fail
	var a runArguments
	if err := decodeArguments("userArguments", b, &a); err != nil {
		return worktask.Overrides{}, "", err
	}
	return a.Overrides, a.RunID, nil
}

// batchRunID returns the run id of a job: "s3batch-" and its job id, so
// that every invocation of the job, and every retry of a task, share the
// claims of its chunks.
func batchRunID(jobID string) string {
	id := "s3batch-" + jobID
	if jobID == "" || engine.CheckRunID(id) != nil {
		sum := sha256.Sum256([]byte(jobID))
		id = "s3batch-" + hex.EncodeToString(sum[:12])
	}
	return id
}

// maxResultString bounds a task's resultString in the completion report.
const maxResultString = 1024

// HandleBatchOperations answers an S3 Batch Operations invocation: each
// task's object is pinned with HeadObject (at the task's version, when
// given) and run, as Runner.RunObjects runs any object, in a run named
// after the job (or the userArguments' runId); the answer says, per task,
// Succeeded, TemporaryFailure (Batch Operations retries it) or
// PermanentFailure, with a short summary or the reason. FAIL_ON_ERROR acts
// per task (see runObject). It never returns an error: the answer says
// what became of each task.
func (h *Handler) HandleBatchOperations(ctx context.Context, job BatchJob) (events.S3BatchJobResponse, error) {
	start := h.opts.Now()
	inv := &Invocation{Kind: kindBatchOperations}
	resp := events.S3BatchJobResponse{
		InvocationSchemaVersion: job.SchemaVersion,
		TreatMissingKeysAs:      string(PermanentFailure),
		InvocationID:            job.InvocationID,
		Results:                 make([]events.S3BatchJobResult, len(job.Tasks)),
	}
	ov, runID, argErr := batchArguments(job.UserArguments)
	if runID == "" {
		runID = batchRunID(job.JobID)
	}
	inv.RunID = runID
	ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
	defer cancel()
	at := time.Now().UTC()
	jobs := make([]objectJob, len(job.Tasks))
	for i, t := range job.Tasks {
		jobs[i] = objectJob{obj: t.Object, ov: ov, head: true, err: t.Err}
		if argErr != nil {
			jobs[i].err = argErr
		}
	}
	runs := h.runObjects(ctx, runID, jobs)
	total := engine.Report{RunID: runID}
	for i, r := range runs {
		t := job.Tasks[i]
		resp.Results[i] = events.S3BatchJobResult{TaskID: t.TaskID, ResultCode: string(r.Code), ResultString: resultString(r)}
		h.count(ctx, inv, &total, r, "taskId", t.TaskID)
	}
	h.invocationReport(ctx, job.InvocationID, total, at)
	h.summarize(ctx, inv, start, nil)
	return resp, nil
}

// count adds what an object's run did to the invocation's summary and to
// total, and logs a failure with the driver's id of the object.
func (h *Handler) count(ctx context.Context, inv *Invocation, total *engine.Report, r objectRun, idName, id string) {
	inv.Items++
	inv.Stats.Add(r.Report.Stats)
	inv.Queued = inv.Queued || r.Report.Queued
	total.Stats.Add(r.Report.Stats)
	total.Queued = total.Queued || r.Report.Queued
	switch r.Code {
	case TemporaryFailure:
		inv.ItemsToRetry++
		h.log.WarnContext(ctx, "object failed; the driver retries it", idName, id, "object", r.Object.String(), "err", r.Err)
	case PermanentFailure:
		inv.ItemsFailed++
		h.log.ErrorContext(ctx, "object failed for good", idName, id, "object", r.Object.String(), "err", r.Err)
	}
}

// batchSummary is a Succeeded task's resultString.
type batchSummary struct {
	RunID         string `json:"runId"`
	RecordsSent   int64  `json:"recordsSent"`
	RecordsFailed int64  `json:"recordsFailed"`
	TasksQueued   int    `json:"tasksQueued"`
}

// resultString is a task's resultString: a Succeeded task's counts as
// JSON, or the reason it failed, cut to maxResultString bytes.
func resultString(r objectRun) string {
	if r.Code == Succeeded {
		b, _ := json.Marshal(batchSummary{RunID: r.Report.RunID, RecordsSent: r.Report.RecordsSent, RecordsFailed: r.Report.RecordsFailed, TasksQueued: r.Report.TasksQueued})
		return string(b)
	}
	return r.reason()
}

// reason is why r failed, cut to maxResultString bytes without splitting
// a UTF-8 sequence.
func (r objectRun) reason() string { return textcut.Prefix(r.Err.Error(), maxResultString) }
