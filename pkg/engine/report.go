package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The run report follows Step Functions Distributed Map's ResultWriter: a
// manifest per run and one object per task with failures, so that a run can
// be re-driven by sending the listed tasks back to the work queue.
//
//	<prefix>/<runId>/manifest.json          what the run planned
//	<prefix>/<runId>/failed/<taskId>-<from>.json   an attempt at a task that
//	                                               started at offset from: the
//	                                               task and what failed

// Manifest is the run report's manifest.json.
type Manifest struct {
	Report
	PlannedAt time.Time `json:"plannedAt"`
}

// FailedTask is a run report's failed/<taskId>-<from>.json: the task, which
// names its object and range, and the records of it that failed in the
// attempt that started reading at from. Each attempt that resumed part-way
// has a file of its own.
type FailedTask struct {
	Task     worktask.Task  `json:"task"`
	Failures []FailedRecord `json:"failures"`
}

// FailedRecord is one failed record of a FailedTask.
type FailedRecord struct {
	Offset  int64  `json:"offset"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// reporter writes the run report, when one is configured.
type reporter struct {
	s3     S3API
	bucket string
	prefix string
	// mapping, mode and format (Notification.Format) are the runner's,
	// which a failed task's overrides carry when they name none, so that a
	// redrive of the report, which runs the task on a runner of its own,
	// sends its records again as this run did.
	mapping worktask.Mapping
	mode    worktask.Mode
	format  s3event.Format
}

func (rp *reporter) put(ctx context.Context, key string, v any) error {
	if rp == nil {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	full := strings.TrimSuffix(rp.prefix, "/")
	if full != "" {
		full += "/"
	}
	full += key
	_, err = rp.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(rp.bucket), Key: aws.String(full),
		Body: bytes.NewReader(b), ContentType: aws.String("application/json")})
	if err != nil {
		return fmt.Errorf("fanout: write the run report s3://%s/%s: %w", rp.bucket, full, err)
	}
	return nil
}

func (rp *reporter) manifest(ctx context.Context, rep Report, at time.Time) error {
	if rp == nil {
		return nil
	}
	return rp.put(ctx, rep.RunID+"/manifest.json", Manifest{Report: rep, PlannedAt: at})
}

// WriteInvocationReport writes what one invocation of a driver did, rep,
// to <prefix>/<runId>/invocations/<id>.json of the run report, as a
// Manifest planned at at. A driver's run spans many invocations (a Batch
// Operations job's, a Map run's batches), each running some of its
// objects: a run's manifest.json, which each would overwrite, is not
// written. It is written in the time partialbatch.SendContext(ctx) leaves,
// since it comes after the invocation's work. Without a run report
// configured it writes nothing and returns nil.
func (r *Runner) WriteInvocationReport(ctx context.Context, id string, rep Report, at time.Time) error {
	return r.report.put(partialbatch.SendContext(ctx), rep.RunID+"/invocations/"+url.PathEscape(id)+".json", Manifest{Report: rep, PlannedAt: at})
}

func (rp *reporter) failed(ctx context.Context, t worktask.Task, name string, fs []Failure) error {
	if rp == nil || len(fs) == 0 {
		return nil
	}
	if t.Versions {
		return rp.failedVersions(ctx, t, name, fs)
	}
	t.Overrides = rp.carried(t.Overrides)
	ft := FailedTask{Task: t}
	for _, f := range fs {
		ft.Failures = append(ft.Failures, FailedRecord{Offset: f.Offset, Code: f.Code, Message: f.Message})
	}
	return rp.put(ctx, t.RunID+"/failed/"+name+".json", ft)
}

// carried returns a failed task's overrides ov with the runner's mapping,
// mode and notification format filled in where ov names none (s3ingest's
// tasks, which encode their records their own way, apart).
func (rp *reporter) carried(ov *worktask.Overrides) *worktask.Overrides {
	if ov != nil && ov.Ingest != nil {
		return ov
	}
	out := overridesOf(ov)
	if out.Mapping == (worktask.Mapping{}) {
		out.Mapping = rp.mapping
	}
	out.Mode = cmp.Or(out.Mode, rp.mode)
	if out.Mode == worktask.ModeNotification {
		out.NotificationFormat = cmp.Or(out.NotificationFormat, string(rp.format))
	}
	return &out
}

// failedVersions writes each failed version of Versions task t as the
// failed task of that version alone, its notification at offset 0: what a
// redrive runs again, announcing the one version.
func (rp *reporter) failedVersions(ctx context.Context, t worktask.Task, name string, fs []Failure) error {
	for _, f := range fs {
		if f.version == nil {
			continue // only a version's notification fails
		}
		vt := worktask.Task{RunID: t.RunID, Chunk: notificationChunk(*f.version), Overrides: t.Overrides}
		ft := FailedTask{Task: vt, Failures: []FailedRecord{{Offset: 0, Code: f.Code, Message: f.Message}}}
		if err := rp.put(ctx, fmt.Sprintf("%s/failed/%s-v%d.json", t.RunID, name, f.at), ft); err != nil {
			return err
		}
	}
	return nil
}
