package fanouthandler

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// noteResult is what became of one notification message.
type noteResult struct {
	messageID string
	report    engine.Report
	err       error
}

// noteRun is one notified object: the message that named it, and its run.
type noteRun struct {
	msg   int
	runID string
	obj   dataset.Object
	rep   engine.Report
	err   error
}

// notifications sends the objects that msgs name and that the filter
// accepts, each object as a run of its own named after the event (see
// notifiedRunID), up to Concurrency runs at once. A message's report sums
// its objects' runs and names the first. A message fails when one of its
// records could not be read, after its other objects were sent.
func (h *Handler) notifications(ctx context.Context, inv *Invocation, msgs []s3event.Message) []noteResult {
	if len(msgs) == 0 {
		return nil
	}
	res := h.opts.Filter.Apply(msgs)
	out := make([]noteResult, len(msgs))
	index := map[string]int{}
	for i, m := range msgs {
		out[i].messageID = m.ID
		index[m.ID] = i
	}
	for _, f := range res.Failed {
		i := index[f.MessageID]
		out[i].err = errors.Join(out[i].err, f.Err)
	}
	h.skipped(ctx, inv, res.Skipped)
	var runs []*noteRun
	for _, it := range res.Accepted {
		i := index[it.MessageID]
		runID, ok := notifiedRunID(it.Object)
		if !ok {
			// Nothing tells this event from another on the key: named
			// after its message (a new id when invoked directly), a new
			// notification of the key is never taken for a repeat.
			runID = msgs[i].ID
		}
		runs = append(runs, &noteRun{msg: i, runID: runID, obj: dataset.Notified(it.Object)})
	}
	var g errgroup.Group
	g.SetLimit(h.opts.Concurrency)
	for _, j := range runs {
		g.Go(func() error {
			// A run of its own, with a manifest: the run is the object's.
			one := func(yield func(dataset.Object, error) bool) { yield(j.obj, nil) }
			j.rep, j.err = h.runner.RunObjects(ctx, j.runID, one, engine.ObjectsOptions{})
			return nil
		})
	}
	g.Wait()
	for _, j := range runs {
		inv.Stats.Add(j.rep.Stats)
		inv.Queued = inv.Queued || j.rep.Queued
		inv.RunID = cmp.Or(inv.RunID, j.rep.RunID)
		o := &out[j.msg]
		o.report.RunID = cmp.Or(o.report.RunID, j.rep.RunID)
		o.report.Queued = o.report.Queued || j.rep.Queued
		o.report.Stats.Add(j.rep.Stats)
		o.err = errors.Join(o.err, j.err)
	}
	return out
}

// skipped counts and logs the objects the filter left out.
func (h *Handler) skipped(ctx context.Context, inv *Invocation, skipped []s3event.Skipped) {
	for _, s := range skipped {
		inv.Skipped++
		level := slog.LevelDebug
		if s.Reason == s3event.SkipTooOld {
			// Unlike an event type or a prefix left out, the object is
			// data that is never sent: the log must say so.
			level = slog.LevelWarn
		}
		h.log.Log(ctx, level, "object skipped", "messageId", s.MessageID, "object", dataset.Notified(s.Object).String(),
			"eTag", s.Object.ETag, "reason", s.Reason.String(), "detail", s.Detail)
	}
}

// notifiedRunID returns the run id of the object an S3 notification
// names: "s3event-", a hash of its bucket, key, version id and ETag, and
// the event's sequencer, upper-cased and without trailing zeros (so that
// sequencers equal by CompareSequencers give one id). Every delivery of one
// event (S3 sends some twice; raw, wrapped by SNS or through EventBridge)
// is then one run, whose claims a repeat finds done; an overwrite, a new
// event on the key, is a run of its own. Without a sequencer (moto omits
// it) a new PUT of the same bytes, unversioned, is taken for a repeat: its
// records, with the same record ids, were sent. ok is false when the
// notification gives neither version, ETag nor sequencer: nothing then
// tells its event from another on the same key.
func notifiedRunID(o s3event.Object) (id string, ok bool) {
	seq := strings.TrimRight(strings.ToUpper(o.Sequencer), "0")
	if seq == "" && o.Sequencer != "" {
		seq = "0"
	}
	if o.VersionID == "" && o.ETag == "" && seq == "" {
		return "", false
	}
	// The ETag too: the version id "null" (an object written while
	// versioning was off) is every such PUT's.
	sum := sha256.Sum256([]byte(o.Bucket + "\x00" + o.Key + "\x00" + o.VersionID + "\x00" + o.ETag))
	id = "s3event-" + hex.EncodeToString(sum[:16])
	if seq == "" {
		return id, true
	}
	if len(seq) > 32 || strings.Trim(seq, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		// Not a sequencer as AWS writes them: hashed, so that the id
		// stays a valid run id.
		s := sha256.Sum256([]byte(seq))
		seq = hex.EncodeToString(s[:8])
	}
	return id + "-" + seq, true
}
