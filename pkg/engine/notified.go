package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Why RunNotified skipped an object (ObjectResult.Skipped): it needs
// nothing more.
const (
	// SkipNotFound: the object was deleted before it was read.
	SkipNotFound = "not-found"
	// SkipSuperseded: the object was overwritten since its notification,
	// whose newer notification follows.
	SkipSuperseded = "superseded"
	// SkipDone: by the claims store, another delivery of the same
	// notification delivered the object.
	SkipDone = "already-delivered"
)

// Why RunNotified did not deliver an object (ObjectResult.Failed): its
// notification must come back.
const (
	// FailParse: the message is not an S3 notification, or one of its
	// records cannot be read (MessageResult.Failed only).
	FailParse = "parse"
	// FailDeadline: the invocation ran out of time.
	FailDeadline = "deadline"
	// FailBadRecord: a record could not be read, with
	// NotifiedOptions.FailBadRecords.
	FailBadRecord = "bad-record"
	// FailRead: the object could not be read or its records sent.
	FailRead = "read-error"
	// FailInProgress: another delivery of its notification holds the
	// object's claim.
	FailInProgress = "in-progress"
)

// NotifiedOptions says how RunNotified sends the objects S3 event
// notifications name. The zero value takes the object-created events and
// sends each object as fanout does: a run of its own, named after its
// event, with the run report's manifest.
type NotifiedOptions struct {
	// Filter selects the objects of the notifications to send (event
	// types, deletions, prefix, suffix, age, duplicates in the batch).
	Filter s3event.Filter
	// Ingest, when set, sends them as s3ingest does: their records
	// encoded with the key's partition values and the _file object (each
	// object's EventTime is its event's), the tasks of all the objects
	// read together so that their records share requests, a deletion
	// event sent as one record, and, with a claims table (*claims.Table),
	// a marker written for each object delivered, which s3sqs reconcile
	// reads. A notification repeated by S3 is then one run, whose claims
	// the repeat finds done.
	Ingest *worktask.IngestEncoding
	// HandoffBytes, with Ingest and above zero, queues objects larger
	// than it on the work queue as chunk tasks, for fanout's workers,
	// instead of reading them here.
	HandoffBytes int64
	// FailBadRecords, with Ingest, fails an object with a record that
	// cannot be read, so that its notification comes back (ON_BAD_RECORD
	// =fail); by default such records go to the failure output.
	FailBadRecords bool
	// Concurrency is how many objects are read (or runs sent) at once;
	// zero or less means DefaultReadConcurrency.
	Concurrency int
}

// ObjectResult is what RunNotified did with one object.
type ObjectResult struct {
	// Object is the object as its notification names it.
	Object s3event.Object
	// Report is the object's run: its id, and what was read and sent.
	// With Ingest, what one send of several deletion events sent is
	// counted in the first's.
	Report
	// BadRecords counts the records that could not be read or mapped;
	// they are on the failure output.
	BadRecords int64
	// HandedOff reports that the object went to the work queue as tasks
	// (Report.TasksQueued of them).
	HandedOff bool
	// Skipped, when set, says why the object needs nothing more (see
	// SkipNotFound); Failed why it was not delivered (see FailDeadline).
	// Err is what happened.
	Skipped string
	Failed  string
	Err     error
}

// MessageResult is what RunNotified did with one message.
type MessageResult struct {
	// Objects are the message's objects that the filter accepted, in the
	// filter's order (by event time with SortByTime), with what became of
	// each.
	Objects []ObjectResult
	// Failed, when set, says why the message must come back: FailParse, or
	// the Failed of its first object not delivered. Err joins what
	// happened: the parse errors, or else each undelivered object's error
	// named by its URI and reason.
	Failed string
	Err    error
}

// Notifications is what RunNotified did with a batch of messages.
type Notifications struct {
	// Messages has one result per message, in order.
	Messages []MessageResult
	// Skipped are the objects the filter left out, and TestEvents the ids
	// of the messages that were S3's test event.
	Skipped    []s3event.Skipped
	TestEvents []string
}

// RunNotified sends the objects that the S3 event notifications in msgs
// name and that o.Filter accepts, each pinned to the version its
// notification names, and says what became of each message and object.
// A message that is not a notification, or has a record that cannot be
// read, fails, after its good objects are sent: a record that cannot be
// read now never can, and its retries would hold them back until the
// message is on its DLQ (a retry finds them done by their claims, or
// sends them again without). Without Ingest an object that was not sent
// is FailRead; with it, an object is delivered, skipped or failed (see
// ObjectResult). Messages are told apart by id: a batch that repeats an
// id has its results on the first.
func (r *Runner) RunNotified(ctx context.Context, msgs []s3event.Message, o NotifiedOptions) Notifications {
	res := o.Filter.Apply(msgs)
	out := Notifications{Messages: make([]MessageResult, len(msgs)), Skipped: res.Skipped, TestEvents: res.TestEvents}
	index := make(map[string]int, len(msgs))
	for i, m := range slices.Backward(msgs) {
		index[m.ID] = i
	}
	for _, f := range res.Failed {
		m := &out.Messages[index[f.MessageID]]
		m.Failed, m.Err = FailParse, errors.Join(m.Err, f.Err)
	}
	for j, or := range r.runItems(ctx, res.Accepted, o) {
		m := &out.Messages[index[res.Accepted[j].MessageID]]
		m.Objects = append(m.Objects, or)
		// A message that failed to parse fails for that alone: its
		// objects' errors (a deadline, say) would change what its
		// failure is counted as.
		if or.Failed != "" && m.Failed != FailParse {
			m.Failed = cmp.Or(m.Failed, or.Failed)
			m.Err = errors.Join(m.Err, fmt.Errorf("%s: %s: %w", dataset.Notified(or.Object).URI(), or.Failed, or.Err))
		}
	}
	return out
}

// runItems sends the objects items name and returns what became of each,
// in the order of items.
func (r *Runner) runItems(ctx context.Context, items []s3event.Item, o NotifiedOptions) []ObjectResult {
	out := make([]ObjectResult, len(items))
	for i, it := range items {
		out[i].Object = it.Object
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultReadConcurrency
	}
	if o.Ingest == nil {
		var g errgroup.Group
		g.SetLimit(o.Concurrency)
		for i, it := range items {
			g.Go(func() error {
				// A run of its own, with a manifest: the run is the object's.
				one := func(yield func(dataset.Object, error) bool) { yield(dataset.Notified(it.Object), nil) }
				res := &out[i]
				if res.Report, res.Err = r.RunObjects(ctx, notifiedRunID(it), one, ObjectsOptions{}); res.Err != nil {
					res.Failed = FailRead
				}
				return nil
			})
		}
		g.Wait()
		return out
	}
	n := &notified{r: r, o: o, items: items, out: out}
	n.deliver(ctx)
	n.mark(ctx)
	return out
}

// notifiedRunID returns the run id of the object an S3 notification
// names: "s3event-", a hash of its bucket, key, version id and ETag, and
// the event's sequencer, upper-cased and without trailing zeros (so that
// sequencers equal by CompareSequencers give one id). Every delivery of one
// event (S3 sends some twice; raw, wrapped by SNS or through EventBridge)
// is then one run, whose claims a repeat finds done; an overwrite, a new
// event on the key, is a run of its own. Without a sequencer (moto omits
// it) a new PUT of the same bytes, unversioned, is taken for a repeat: its
// records, with the same record ids, were sent. When the notification
// gives neither version, ETag nor sequencer, nothing tells its event from
// another on the same key: the run is named after its message (a new id
// when there is none), so that a new notification of the key is never
// taken for a repeat.
func notifiedRunID(it s3event.Item) string {
	o := it.Object
	seq := strings.TrimRight(strings.ToUpper(o.Sequencer), "0")
	if seq == "" && o.Sequencer != "" {
		seq = "0"
	}
	if o.VersionID == "" && o.ETag == "" && seq == "" {
		return it.MessageID
	}
	// The ETag too: the version id "null" (an object written while
	// versioning was off) is every such PUT's.
	sum := sha256.Sum256([]byte(o.Bucket + "\x00" + o.Key + "\x00" + o.VersionID + "\x00" + o.ETag))
	id := "s3event-" + hex.EncodeToString(sum[:16])
	if seq == "" {
		return id
	}
	if len(seq) > 32 || strings.Trim(seq, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		// Not a sequencer as AWS writes them: hashed, so that the id
		// stays a valid run id.
		s := sha256.Sum256([]byte(seq))
		seq = hex.EncodeToString(s[:8])
	}
	return id + "-" + seq
}

// ingestRunID is the run of an object s3ingest sends: derived from the
// object's pin and the event's sequencer, so that a retried or repeated
// notification plans the same tasks with the same ids (and claims), while
// a new PUT of the same bytes is a run of its own. It hashes the pin (the
// version id where there is one), not the ETag record ids hash: a new
// version of the same bytes has the same ETag, and without a sequencer
// only its version id tells the two PUTs apart.
func ingestRunID(obj s3event.Object) string {
	p := dataset.Notified(obj)
	sum := sha256.Sum256([]byte(p.Bucket + "\x00" + p.Key + "\x00" + p.Pin() + "\x00-1"))
	id := hex.EncodeToString(sum[:16])
	if obj.Sequencer != "" {
		id += "-" + obj.Sequencer
	}
	return "s3ingest-" + id
}

// notified is one RunNotified call with Ingest.
type notified struct {
	r     *Runner
	o     NotifiedOptions
	items []s3event.Item
	out   []ObjectResult
}

// overrides are how the records of items[i] are sent: encoded as s3ingest
// does, to the runner's target.
func (n *notified) overrides(i int) worktask.Overrides {
	enc := *n.o.Ingest
	enc.EventTime = n.items[i].Object.EventTime
	return worktask.Overrides{Ingest: &enc}
}

// deliver sends the objects: deletions as one record each, large objects
// to the work queue as tasks, the rest read here, together.
func (n *notified) deliver(ctx context.Context) {
	var deletions []int
	var tasks []worktask.Task
	var owners []int
	planned := make([]int, len(n.items)) // tasks per object
	for i, it := range n.items {
		res := &n.out[i]
		res.RunID = ingestRunID(it.Object)
		switch {
		case it.Object.Deletion:
			deletions = append(deletions, i)
		case n.o.HandoffBytes > 0 && it.Object.Size > n.o.HandoffBytes:
			n.handOff(ctx, i)
		default:
			ts, err := n.r.tasks(ctx, res.RunID, dataset.Notified(it.Object), n.overrides(i))
			if err != nil {
				n.readFailed(ctx, i, err)
				continue
			}
			planned[i] = len(ts)
			for _, t := range ts {
				tasks = append(tasks, t)
				owners = append(owners, i)
			}
		}
	}
	if len(deletions) > 0 {
		n.sendDeletions(ctx, deletions)
	}
	done := make([]int, len(n.items))
	for j, tr := range n.r.RunTasks(ctx, tasks, n.o.Concurrency) {
		i := owners[j]
		res := &n.out[i]
		res.Stats.Add(tr.Stats)
		res.BadRecords += tr.BadRecords
		done[i] += tr.TasksSkipped
		switch {
		case tr.Err != nil || (tr.Continuation != nil && tr.Stopped != nil):
			if res.Failed == "" && res.Skipped == "" {
				n.readFailed(ctx, i, cmp.Or(tr.Err, tr.Stopped))
			}
		case tr.Continuation != nil:
			// Out of time: the object comes back with its notification.
			if res.Failed == "" {
				res.Failed, res.Err = FailDeadline, partialbatch.ErrDeadline
			}
		case tr.BadRecords > 0 && n.o.FailBadRecords && res.Failed == "":
			res.Failed, res.Err = FailBadRecord, fmt.Errorf("%d records cannot be read (ON_BAD_RECORD=fail; they are on the failure output)", tr.BadRecords)
		}
	}
	for i := range n.out {
		if res := &n.out[i]; res.Failed == "" && res.Skipped == "" && planned[i] > 0 && done[i] == planned[i] {
			res.Skipped = SkipDone
		}
	}
}

// handOff plans items[i] into chunk tasks on the work queue, where fanout's
// workers read them in parallel, so that a very large object does not have
// to fit in this invocation's time. The tasks name the target queue and
// carry s3ingest's encoding, so that their records arrive as if read here.
func (n *notified) handOff(ctx context.Context, i int) {
	res := &n.out[i]
	res.HandedOff = true
	one := func(yield func(dataset.Object, error) bool) { yield(dataset.Notified(n.items[i].Object), nil) }
	rep, err := n.r.RunObjects(partialbatch.SendContext(ctx), res.RunID, one, ObjectsOptions{Overrides: n.overrides(i), Queue: true})
	res.Report = rep
	if err != nil {
		n.readFailed(ctx, i, err)
		return
	}
	n.r.log.InfoContext(ctx, "object handed off to fanout", "object", dataset.Notified(n.items[i].Object).URI(), "tasks", rep.TasksQueued)
}

// sendDeletions sends one record per deletion event, the objects idx.
func (n *notified) sendDeletions(ctx context.Context, idx []int) {
	fail := func(i int, err error) {
		if res := &n.out[i]; res.Failed == "" {
			res.Failed, res.Err = FailRead, err
		}
	}
	target, err := n.r.target(ctx, &worktask.Overrides{}, worktask.ModeRecord)
	if err != nil {
		for _, i := range idx {
			fail(i, err)
		}
		return
	}
	entries := make([]sqsbatch.Entry, len(idx))
	for j, i := range idx {
		obj := n.items[i].Object
		id := deletionID(obj)
		entries[j] = sqsbatch.Entry{ID: fmt.Sprint(j), Body: recordjson.DeletionBody(obj, n.o.Ingest.Partitions), Attributes: map[string]types.MessageAttributeValue{AttrRecordID: stringAttr(id)}}
		if target.FIFO() {
			entries[j].GroupID, entries[j].DeduplicationID = dataset.Notified(obj).GroupID(), id
		}
		n.out[i].RecordsRead = 1
	}
	sent, err := target.SendEntries(partialbatch.SendContext(ctx), entries)
	for _, f := range sent.Failures {
		fail(idx[f.Seq], f)
	}
	if err != nil {
		for _, i := range idx {
			fail(i, err)
		}
	}
	// One send for all: what it sent is counted in the first's report.
	first := &n.out[idx[0]]
	first.RecordsSent, first.Messages, first.BytesSent = int64(sent.Sent), int64(sent.Sent), sent.Bytes
	first.Requests, first.Retries = int64(sent.Requests), int64(sent.Retries)
}

// deletionID is the record id of a deletion event: the object's pin with
// the event's sequencer, so that two deletions of one key differ.
func deletionID(obj s3event.Object) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00deleted\x00%s", obj.Bucket, obj.Key, obj.VersionID, obj.ETag, obj.Sequencer)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// readFailed sorts a failure to plan or read items[i]: an object deleted
// or overwritten since its notification is skipped (its newer
// notification comes, or there is nothing left to read); anything else
// fails it.
func (n *notified) readFailed(ctx context.Context, i int, err error) {
	res, obj, log := &n.out[i], n.items[i].Object, n.r.log
	res.Err = err
	switch {
	case errors.Is(err, dataset.ErrChanged) || (errors.Is(err, dataset.ErrNotFound) && awserr.Missing(err) == awserr.Version):
		res.Skipped = SkipSuperseded
		log.WarnContext(ctx, "object skipped: overwritten since the notification; its newer notification will follow",
			"bucket", obj.Bucket, "key", obj.Key, "versionId", obj.VersionID, "eTag", obj.ETag, "err", err)
	case errors.Is(err, dataset.ErrNotFound):
		res.Skipped = SkipNotFound
		log.WarnContext(ctx, "object skipped: deleted before it was read", "bucket", obj.Bucket, "key", obj.Key, "versionId", obj.VersionID, "err", err)
	case errors.Is(err, partialbatch.ErrDeadline) || errors.Is(err, context.DeadlineExceeded):
		res.Failed = FailDeadline
	case errors.Is(err, claims.ErrHeld):
		res.Failed = FailInProgress
		log.InfoContext(ctx, "object not delivered now: another delivery of its notification is delivering it; this one comes back",
			"bucket", obj.Bucket, "key", obj.Key, "err", err)
	default:
		res.Failed = FailRead
		log.WarnContext(ctx, "object not delivered", "bucket", obj.Bucket, "key", obj.Key, "reason", res.Failed, "err", err)
	}
}

// marker is the part of a claims store that keeps the markers of the
// object versions s3ingest ingested (*claims.Table).
type marker interface {
	MarkDone(ctx context.Context, key string) error
}

// mark records each object that needs nothing more (its records sent, or
// handed to fanout's workers, which run them once with the failure output)
// under claims.ObjectKey, so that s3sqs reconcile can tell it from an
// object whose notification never came. A marker not written is logged:
// the object then looks missing to a reconcile, which sends its
// notification again, and its records arrive twice.
func (n *notified) mark(ctx context.Context) {
	m, ok := n.r.opts.Claims.(marker)
	if !ok {
		return
	}
	ctx = partialbatch.SendContext(ctx)
	// Written several at once, as many as the objects read at once, so
	// that a batch's markers cost one round trip to DynamoDB per
	// Concurrency objects, not one per object; markers have no order, so
	// a FIFO message's objects, read one at a time, have theirs written as
	// a standard batch's are.
	var g errgroup.Group
	g.SetLimit(max(n.o.Concurrency, DefaultReadConcurrency))
	for i, it := range n.items {
		if res := n.out[i]; it.Object.Deletion || res.Failed != "" || (res.Skipped != "" && res.Skipped != SkipDone) {
			continue
		}
		p := dataset.Notified(it.Object)
		g.Go(func() error {
			if err := m.MarkDone(ctx, claims.ObjectKey(p.Bucket, p.Key, p.Pin())); err != nil {
				n.r.log.WarnContext(ctx, "object's ingested marker not written; a reconcile will send it again", "object", p.String(), "err", err)
			}
			return nil
		})
	}
	g.Wait()
}
