package s3event

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxFileAge is the Bahir S3-SQS source's default maxFileAge, seven
// days, which a zero Filter.MaxFileAge used to mean. Zero now turns the age
// check off, so that no notification is dropped unless its caller asked:
// a queue's DLQ keeps messages up to 14 days, and a redrive after a week
// would otherwise skip every object. Set MaxFileAge to DefaultMaxFileAge
// for Bahir's behaviour.
const DefaultMaxFileAge = 7 * 24 * time.Hour

// defaultEventTypes is used when Filter.EventTypes is empty.
var defaultEventTypes = []string{"ObjectCreated:*"}

// Filter decides which objects of a batch of SQS messages to process. The
// zero value keeps object-created events of any age, drops deletions and
// duplicates, and keeps batch order. The names follow the
// Bahir S3-SQS source where it has one. A Filter is not modified by Apply and
// may be used from several goroutines at once.
type Filter struct {
	// EventTypes selects the non-deletion events to keep, as S3 event
	// names with or without the "s3:" prefix. A name ending in "*" matches
	// every name that starts with the text before the "*" ("ObjectCreated:*",
	// or "*" for all). When empty, only "ObjectCreated:*" is kept. Deletions
	// are governed by KeepDeletions alone.
	EventTypes []string
	// KeepDeletions keeps removal events ("ObjectRemoved:*" and
	// "LifecycleExpiration:*"); they come with Object.Deletion set. It is the
	// inverse of Bahir's ignoreFileDeletion: by default (false) deletions are
	// skipped with reason SkipDeletion.
	KeepDeletions bool
	// Prefix, when set, keeps only objects whose decoded key starts with it.
	Prefix string
	// Suffix, when set, keeps only objects whose decoded key ends with it.
	Suffix string
	// MaxFileAge skips events older than this, measured from Now to the
	// event time (Bahir's maxFileAge), with reason SkipTooOld. Zero or a
	// negative value turns the check off (zero meant DefaultMaxFileAge
	// before). An event without a time is never too old.
	MaxFileAge time.Duration
	// SortByTime orders the accepted objects by event time, oldest first
	// (Bahir's shouldSortFiles). Ties keep batch order. When false, accepted
	// objects stay in batch order: message order, then record order.
	SortByTime bool
	// FileNameOnly makes two objects duplicates when their file names (the
	// last key segment) are equal, whatever their bucket, directory,
	// version and sequencer (Bahir's fileNameOnly). By default two objects
	// are duplicates when bucket, key, version (or, without one, eTag) and
	// sequencer are all equal. A deletion is never a duplicate of a
	// creation.
	FileNameOnly bool
	// Options say how bodies are parsed.
	Options Options
	// Now returns the current time for MaxFileAge. Nil means time.Now.
	Now func() time.Time
}

// Message is one SQS message of a batch.
type Message struct {
	// ID is the SQS message ID, the itemIdentifier of a batch item failure.
	ID string
	// Body is the message body.
	Body string
}

// Item is an object together with the SQS message that named it.
type Item struct {
	// MessageID is the ID of the SQS message.
	MessageID string
	// Object is the object.
	Object Object
}

// SkipReason says why an object was not accepted.
type SkipReason uint8

// The reasons for skipping an object.
const (
	// SkipEventType: the event is not in Filter.EventTypes.
	SkipEventType SkipReason = iota + 1
	// SkipDeletion: the event is a deletion and Filter.KeepDeletions is off.
	SkipDeletion
	// SkipPrefix: the key does not start with Filter.Prefix.
	SkipPrefix
	// SkipSuffix: the key does not end with Filter.Suffix.
	SkipSuffix
	// SkipTooOld: the event is older than Filter.MaxFileAge.
	SkipTooOld
	// SkipDuplicate: an earlier item of the batch names the same object.
	SkipDuplicate
)

// String returns a short name such as "too-old".
func (r SkipReason) String() string {
	switch r {
	case SkipEventType:
		return "event-type"
	case SkipDeletion:
		return "deletion"
	case SkipPrefix:
		return "prefix"
	case SkipSuffix:
		return "suffix"
	case SkipTooOld:
		return "too-old"
	case SkipDuplicate:
		return "duplicate"
	default:
		return "SkipReason(" + strconv.Itoa(int(r)) + ")"
	}
}

// Skipped is an object that the filter did not accept, and why.
type Skipped struct {
	Item
	// Reason is why the object was skipped.
	Reason SkipReason
	// Detail says more, for logs: the event type, the age, the message that
	// holds the kept duplicate.
	Detail string
}

// Failure is a message, or one record of it, that could not be parsed.
type Failure struct {
	// MessageID is the ID of the SQS message.
	MessageID string
	// Err is a *MalformedError or *UnrecognizedError when the whole body
	// failed, or a *RecordError when one record did.
	Err error
}

// Result sorts the objects of a batch. Every object named by the batch is in
// exactly one of Accepted and Skipped; every message or record that could
// not be read is in Failed.
type Result struct {
	// Accepted are the objects to process.
	Accepted []Item
	// Skipped are the objects not to process, with reasons.
	Skipped []Skipped
	// Failed are the messages and records that could not be parsed. A
	// message with a failed record may still have accepted objects.
	Failed []Failure
	// TestEvents are the IDs of messages that held an s3:TestEvent.
	TestEvents []string
}

// FailedMessageIDs returns the IDs of the messages with a failure, once
// each, in batch order: the itemIdentifiers of a partial batch response.
func (r *Result) FailedMessageIDs() []string {
	var ids []string
	for _, f := range r.Failed {
		if !slices.Contains(ids, f.MessageID) {
			ids = append(ids, f.MessageID)
		}
	}
	return ids
}

// Apply parses every message of a batch with f.Options and sorts the
// objects into accepted and skipped, and the parse failures into failed.
// Filters run in this order: event type or deletion, prefix, suffix, age;
// then the accepted objects are sorted (if SortByTime) and duplicates after
// the first are skipped.
func (f Filter) Apply(msgs []Message) *Result {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	at := now()
	types := f.EventTypes
	if len(types) == 0 {
		types = defaultEventTypes
	}

	res := &Result{}
	for _, m := range msgs {
		n, err := f.Options.Parse([]byte(m.Body))
		if err != nil {
			res.Failed = append(res.Failed, Failure{MessageID: m.ID, Err: err})
			continue
		}
		if n.TestEvent {
			res.TestEvents = append(res.TestEvents, m.ID)
		}
		for _, re := range n.Failed {
			res.Failed = append(res.Failed, Failure{MessageID: m.ID, Err: re})
		}
		for _, obj := range n.Objects {
			it := Item{MessageID: m.ID, Object: obj}
			if reason, detail := f.check(obj, types, at); reason != 0 {
				res.Skipped = append(res.Skipped, Skipped{Item: it, Reason: reason, Detail: detail})
				continue
			}
			res.Accepted = append(res.Accepted, it)
		}
	}

	if f.SortByTime {
		slices.SortStableFunc(res.Accepted, func(a, b Item) int {
			return a.Object.EventTime.Compare(b.Object.EventTime)
		})
	}
	seen := make(map[string]string, len(res.Accepted))
	kept := res.Accepted[:0]
	for _, it := range res.Accepted {
		id := f.identity(it.Object)
		if first, dup := seen[id]; dup {
			res.Skipped = append(res.Skipped, Skipped{Item: it, Reason: SkipDuplicate, Detail: "same object as in message " + first})
			continue
		}
		seen[id] = it.MessageID
		kept = append(kept, it)
	}
	res.Accepted = kept
	return res
}

// check returns why obj is skipped, or 0.
func (f Filter) check(obj Object, types []string, now time.Time) (SkipReason, string) {
	switch {
	case obj.Deletion && !f.KeepDeletions:
		return SkipDeletion, obj.EventName
	case !obj.Deletion && !matchesAny(obj.EventName, types):
		return SkipEventType, obj.EventName
	case !strings.HasPrefix(obj.Key, f.Prefix):
		return SkipPrefix, f.Prefix
	case !strings.HasSuffix(obj.Key, f.Suffix):
		return SkipSuffix, f.Suffix
	}
	if f.MaxFileAge > 0 && !obj.EventTime.IsZero() {
		if age := now.Sub(obj.EventTime); age > f.MaxFileAge {
			return SkipTooOld, fmt.Sprintf("event at %s is %s old, more than %s", obj.EventTime.Format(time.RFC3339), age.Round(time.Second), f.MaxFileAge)
		}
	}
	return 0, ""
}

// identity returns the key under which duplicates are found.
func (f Filter) identity(o Object) string {
	kind := "c"
	if o.Deletion {
		kind = "d"
	}
	if f.FileNameOnly {
		return kind + "\x00" + o.FileName()
	}
	version := "v:" + o.VersionID
	if o.VersionID == "" {
		version = "e:" + o.ETag
	}
	return strings.Join([]string{kind, o.Bucket, o.Key, version, o.Sequencer}, "\x00")
}

// matchesAny reports whether an event name matches one of the patterns.
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "s3:")
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// eventTypes are the S3 event notification types, as in
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-event-types-and-destinations.html,
// without the "s3:" prefix.
var eventTypes = []string{
	"ObjectCreated:Put", "ObjectCreated:Post", "ObjectCreated:Copy", "ObjectCreated:CompleteMultipartUpload",
	"ObjectRemoved:Delete", "ObjectRemoved:DeleteMarkerCreated",
	"ObjectRestore:Post", "ObjectRestore:Completed", "ObjectRestore:Delete",
	"ReducedRedundancyLostObject",
	"Replication:OperationFailedReplication", "Replication:OperationMissedThreshold",
	"Replication:OperationReplicatedAfterThreshold", "Replication:OperationNotTracked",
	"LifecycleExpiration:Delete", "LifecycleExpiration:DeleteMarkerCreated",
	"LifecycleTransition", "IntelligentTiering",
	"ObjectTagging:Put", "ObjectTagging:Delete",
	"ObjectAcl:Put",
}

// CheckEventType reports a name for Filter.EventTypes that matches no S3
// event type, such as "ObjectCreate:*", which would make a filter skip
// every object. A name matches as in Filter.EventTypes: with or without
// "s3:", and ending in "*" to match every type that starts with the text
// before it.
func CheckEventType(name string) error {
	p := strings.TrimPrefix(name, "s3:")
	if before, ok := strings.CutSuffix(p, "*"); ok {
		for _, t := range eventTypes {
			if strings.HasPrefix(t, before) {
				return nil
			}
		}
	} else if slices.Contains(eventTypes, p) {
		return nil
	}
	families := []string{}
	for _, t := range eventTypes {
		f, _, ok := strings.Cut(t, ":")
		if ok {
			f += ":*"
		}
		if !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	return fmt.Errorf("s3event: %q is not an S3 event type; want a type such as ObjectCreated:Put, or one of %s (with or without s3:), or *",
		name, strings.Join(families, ", "))
}
