package s3event

import (
	"strconv"
	"strings"
	"time"
)

// Route says how a notification reached the SQS message.
type Route uint8

// The routes an S3 notification can take into an SQS message body.
const (
	// RouteUnknown is the zero Route; Parse never returns it.
	RouteUnknown Route = iota
	// RouteS3 is an S3 event notification ("Records": [...]) as the body:
	// S3 → SQS directly, or S3 → SNS → SQS with raw message delivery. The
	// two write the same body, so they cannot be told apart.
	RouteS3
	// RouteSNS is an S3 event notification inside a standard SNS envelope
	// (S3 → SNS → SQS without raw message delivery).
	RouteSNS
	// RouteEventBridge is an EventBridge event from source aws.s3 as the
	// body: EventBridge → SQS, or EventBridge → SNS → SQS with raw message
	// delivery (the same body again).
	RouteEventBridge
	// RouteEventBridgeSNS is an EventBridge aws.s3 event inside a standard
	// SNS envelope (EventBridge → SNS → SQS without raw message delivery).
	RouteEventBridgeSNS
)

// String returns a short name: "s3", "sns", "eventbridge" or
// "eventbridge+sns".
func (r Route) String() string {
	switch r {
	case RouteS3:
		return "s3"
	case RouteSNS:
		return "sns"
	case RouteEventBridge:
		return "eventbridge"
	case RouteEventBridgeSNS:
		return "eventbridge+sns"
	default:
		return "Route(" + strconv.Itoa(int(r)) + ")"
	}
}

// Object is one S3 object named by a notification.
type Object struct {
	// Bucket is the bucket name.
	Bucket string
	// Key is the object key, decoded (see DecodeKey).
	Key string
	// RawKey is the key as it appeared in the notification.
	RawKey string
	// Size is the object size in bytes; 0 when the event has none (deletions).
	Size int64
	// ETag is the object's entity tag, without quotes; empty when absent.
	ETag string
	// VersionID is the object version; empty when the bucket is not
	// versioned. It may be the literal "null", which S3 uses for the version
	// of an object written while versioning was off.
	VersionID string
	// Sequencer orders events on this key (see CompareSequencers); empty
	// when absent.
	Sequencer string
	// EventName is the S3 event type without the "s3:" prefix, for example
	// "ObjectCreated:Put" or "ObjectRemoved:DeleteMarkerCreated". For
	// EventBridge events it is derived from detail-type, reason and
	// deletion-type with the mapping AWS documents
	// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-mapping-troubleshooting.html);
	// an "Object Created" event with an unknown reason gives
	// "ObjectCreated:*", and an unknown detail-type is kept as it is.
	EventName string
	// EventTime is when the event happened, in UTC; zero when absent. A time
	// written without a zone (moto does this) is read as UTC.
	EventTime time.Time
	// Region is the bucket's region.
	Region string
	// Route is how the notification reached the SQS message.
	Route Route
	// Deletion is set for removal events (EventName "ObjectRemoved:*" or
	// "LifecycleExpiration:*").
	Deletion bool
}

// Partitions returns the Hive-style partitions of the object's key; see the
// package function Partitions.
func (o Object) Partitions() []Partition { return Partitions(o.Key) }

// FileName returns the last segment of the key: the text after the last "/".
// It is empty for a key ending in "/".
func (o Object) FileName() string {
	_, name, found := cutLast(o.Key, '/')
	if !found {
		return o.Key
	}
	return name
}

// Notification is what one SQS message body holds.
type Notification struct {
	// Route is how the notification reached the SQS message.
	Route Route
	// TestEvent is set for the s3:TestEvent that S3 sends when a bucket
	// notification is configured. It names no objects.
	TestEvent bool
	// Objects are the objects named by the records that could be read, in
	// record order.
	Objects []Object
	// Failed holds one error for each record that could not be read.
	Failed []*RecordError
}

// IsDeletion reports whether an S3 event name (with or without the "s3:"
// prefix) is a removal: "ObjectRemoved:*" or "LifecycleExpiration:*".
func IsDeletion(eventName string) bool {
	n := strings.TrimPrefix(eventName, "s3:")
	return strings.HasPrefix(n, "ObjectRemoved:") || strings.HasPrefix(n, "LifecycleExpiration:")
}
