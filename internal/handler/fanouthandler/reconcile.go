package fanouthandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
)

// kindReconcile is a request whose only field is "reconcile".
const kindReconcile = "reconcile"

// ReconcileOptions lets the function answer reconcile requests. The zero
// value refuses them.
type ReconcileOptions struct {
	// S3 lists the versions to compare.
	S3 reconcile.ListAPI
	// Ingested reads s3ingest's markers: the claims table's store
	// (CLAIMS_TABLE); nil refuses requests.
	Ingested reconcile.Ingested
	// SQS sends the notifications.
	SQS sqsbatch.API
	// QueueURL is the ingest queue the notifications of missing versions
	// go to (RECONCILE_QUEUE_URL), the only one a request may name.
	QueueURL string
	// MaxAge is the claims' TTL (CLAIMS_TTL), a request's default
	// maxAge; zero means claims.DefaultTTL.
	MaxAge time.Duration
	// Region is the awsRegion the notifications name: the function's.
	Region string
}

// decodeReconcile reads {"reconcile": {...}}, strictly.
func decodeReconcile(payload []byte) (reconcile.Request, error) {
	var in struct {
		Reconcile *reconcile.Request `json:"reconcile"`
	}
	if err := strictjson.Decode(payload, &in); err != nil {
		return reconcile.Request{}, fmt.Errorf("fanout: bad reconcile request: %w", err)
	}
	if in.Reconcile == nil || in.Reconcile.Bucket == "" {
		return reconcile.Request{}, errors.New("fanout: bad reconcile request: reconcile.bucket is required")
	}
	return *in.Reconcile, nil
}

// HandleReconcile compares the versions under req's prefix with
// s3ingest's markers in the claims table, and sends the notifications of
// the missing ones to the ingest queue (unless req.DryRun).
func (h *Handler) HandleReconcile(ctx context.Context, req reconcile.Request) (reconcile.Report, error) {
	ro := h.opts.Reconcile
	switch {
	case ro.S3 == nil || (!req.DryRun && ro.SQS == nil):
		return reconcile.Report{}, errors.New("fanout: reconcile: not set up in this function")
	case ro.Ingested == nil:
		return reconcile.Report{}, fmt.Errorf("fanout: reconcile needs %s, the claims table s3ingest writes", settings.ClaimsTable.Env)
	case !req.DryRun && ro.QueueURL == "":
		return reconcile.Report{}, fmt.Errorf("fanout: reconcile needs %s, the ingest queue, or dryRun", settings.ReconcileQueueURL.Env)
	case req.SendTo != "" && req.SendTo != ro.QueueURL:
		return reconcile.Report{}, fmt.Errorf("fanout: reconcile: sendTo %s is not %s, the only queue this function sends notifications to", req.SendTo, settings.ReconcileQueueURL.Env)
	}
	f, err := s3event.ParseFormat(req.NotificationFormat)
	if err != nil {
		return reconcile.Report{}, fmt.Errorf("fanout: reconcile: notificationFormat: %w", err)
	}
	o := reconcile.Options{Bucket: req.Bucket, Prefix: req.Prefix, Format: f, MaxAge: ro.MaxAge, RunID: "reconcile-" + h.opts.Now().UTC().Format("20060102T150405Z"), Now: h.opts.Now, Region: ro.Region,
		KeyMarker: req.KeyMarker, VersionIDMarker: req.VersionIDMarker, Filters: req.Filters}
	if req.MaxAge != "" {
		if o.MaxAge, err = settings.MaxFileAge.Parse(req.MaxAge); err != nil {
			return reconcile.Report{}, fmt.Errorf("fanout: reconcile: maxAge: %w", err)
		}
	}
	ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
	defer cancel()
	if !req.DryRun {
		if o.SendTo, err = sqsbatch.New(ctx, ro.SQS, sqsbatch.Queue{URL: ro.QueueURL}, sqsbatch.Options{}); err != nil {
			return reconcile.Report{}, fmt.Errorf("fanout: reconcile: %s: %w", settings.ReconcileQueueURL.Env, err)
		}
	}
	rep, err := reconcile.Run(ctx, ro.S3, ro.Ingested, o)
	h.log.InfoContext(ctx, "reconcile", "bucket", rep.Bucket, "prefix", rep.Prefix, "seen", rep.Seen, "ingested", rep.Ingested,
		"missing", rep.Missing, "sent", rep.Sent, "skippedTooOld", rep.SkippedTooOld, "maxAge", rep.MaxAge, "failed", rep.Failed,
		"nextKeyMarker", rep.NextKeyMarker, "nextVersionIdMarker", rep.NextVersionIDMarker, "err", err)
	if err == nil && rep.Failed > 0 {
		err = fmt.Errorf("fanout: reconcile: %d object versions failed: %v", rep.Failed, rep.Errors)
	}
	return rep, err
}

// isReconcile reports whether probe is a reconcile request.
func isReconcile(probe map[string]json.RawMessage) bool {
	_, ok := probe["reconcile"]
	return ok
}
