package s3event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options change how Parse reads a body. The zero value is what AWS
// documents and is ready to use.
type Options struct {
	// EventBridgeKeysRaw makes Parse take detail.object.key of EventBridge
	// events as the key itself, without form-URL-decoding it.
	//
	// By default EventBridge keys are decoded like the keys of S3 event
	// notifications, whose encoding AWS documents ("The object key name
	// value is URL encoded",
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
	// AWS's page on the EventBridge event structure
	// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html)
	// does not say how detail.object.key is encoded: it lists the field and
	// every example uses "example-key". AWS's Powertools for Lambda (Python)
	// decodes it with unquote_plus
	// (aws_lambda_powertools/utilities/data_classes/s3_event.py,
	// S3EventBridgeNotificationObject.key), as for S3 notifications, and
	// that is what Parse does. Public AWS sample code disagrees with itself
	// (aws-samples/s3-to-lambda-patterns has both comments), so this has
	// not been confirmed against AWS. moto_server writes the key unencoded:
	// set this field when reading events produced by moto, or if AWS is
	// found to send keys raw.
	EventBridgeKeysRaw bool
}

// Parse reads the body of one SQS message with the zero Options; see
// Options.Parse.
func Parse(body []byte) (*Notification, error) {
	return Options{}.Parse(body)
}

// Parse reads the body of one SQS message: an S3 event notification with one
// or more records (S3 → SQS, or S3 → SNS → SQS with raw delivery), the same
// inside a standard SNS envelope, an s3:TestEvent in either form, or an
// EventBridge event from source aws.s3 in either form.
//
// A body it cannot read as a whole yields a nil Notification and a
// *MalformedError (not JSON) or an *UnrecognizedError (JSON of another
// shape). A test event yields TestEvent set, no objects and no error. A
// record that cannot be read (for example a key with a malformed escape)
// lands in Notification.Failed while the other records still yield Objects.
// Parse never panics and is safe to call concurrently.
func (o Options) Parse(body []byte) (*Notification, error) {
	return o.parse(body, false)
}

const (
	inBody = "body"
	inSNS  = "SNS Message"
)

func (o Options) parse(body []byte, nested bool) (*Notification, error) {
	where := inBody
	if nested {
		where = inSNS
	}
	unrecognized := func(format string, args ...any) error {
		return &UnrecognizedError{In: where, Found: fmt.Sprintf(format, args...), Excerpt: excerpt(body)}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, unrecognized("nothing")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, unrecognized("a JSON %s, not an object", jsonKind(trimmed[0]))
		}
		return nil, &MalformedError{In: where, Excerpt: excerpt(body), Err: err}
	}
	if fields == nil {
		return nil, unrecognized("JSON null")
	}

	switch {
	case fields["Records"] != nil:
		n, err := o.parseS3Event(fields["Records"], unrecognized)
		if err != nil {
			return nil, err
		}
		if nested {
			n.setRoute(RouteSNS)
		} else {
			n.setRoute(RouteS3)
		}
		return n, nil

	case fields["Type"] != nil && fields["Message"] != nil:
		return o.parseSNS(trimmed, nested, unrecognized)

	case fields["Event"] != nil:
		var ev string
		if json.Unmarshal(fields["Event"], &ev) != nil || ev != "s3:TestEvent" {
			return nil, unrecognized("an object with Event %s", excerpt(fields["Event"]))
		}
		n := &Notification{Route: RouteS3, TestEvent: true}
		if nested {
			n.Route = RouteSNS
		}
		return n, nil

	case fields["detail-type"] != nil && fields["source"] != nil:
		n, err := o.parseEventBridge(trimmed, unrecognized)
		if err != nil {
			return nil, err
		}
		n.setRoute(RouteEventBridge)
		return n, nil
	}
	return nil, unrecognized("an object with keys %q", keysOf(fields))
}

// parseSNS reads an SNS envelope and the notification in its Message.
func (o Options) parseSNS(trimmed []byte, nested bool, unrecognized func(string, ...any) error) (*Notification, error) {
	var env snsEnvelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return nil, unrecognized("an SNS envelope whose Type or Message is not a string")
	}
	if env.Type != "Notification" {
		return nil, unrecognized("an SNS message of Type %q", env.Type)
	}
	if nested {
		return nil, unrecognized("an SNS envelope inside an SNS envelope")
	}
	msg := []byte(env.Message)
	if t := bytes.TrimSpace(msg); len(t) > 0 && t[0] != '{' && t[0] != '[' {
		return nil, unrecognized("an SNS notification whose Message is not JSON: %q", excerpt(msg))
	}
	n, err := o.parse(msg, true)
	if err != nil {
		return nil, err
	}
	if n.Route == RouteEventBridge {
		n.setRoute(RouteEventBridgeSNS)
	}
	return n, nil
}

// setRoute sets the route of the notification and of its objects.
func (n *Notification) setRoute(r Route) {
	n.Route = r
	for i := range n.Objects {
		n.Objects[i].Route = r
	}
}

// parseS3Event reads the Records array of an S3 event notification.
func (o Options) parseS3Event(raw json.RawMessage, unrecognized func(string, ...any) error) (*Notification, error) {
	var records []json.RawMessage
	if err := json.Unmarshal(raw, &records); err != nil {
		return nil, unrecognized("Records that is not an array")
	}
	if len(records) == 0 {
		return nil, unrecognized("an S3 event with no Records")
	}
	// A body is an S3 event when at least one record says it comes from
	// S3; a Lambda SQS or SNS event pasted into a queue is not.
	var sources []string
	fromS3 := false
	for _, r := range records {
		var probe struct {
			EventSource string `json:"eventSource"`
		}
		_ = json.Unmarshal(r, &probe)
		fromS3 = fromS3 || probe.EventSource == s3EventSource
		if !slices.Contains(sources, probe.EventSource) {
			sources = append(sources, probe.EventSource)
		}
	}
	if !fromS3 {
		return nil, unrecognized("Records with eventSource %q, none %q", sources, s3EventSource)
	}

	n := &Notification{}
	for i, r := range records {
		obj, err := readS3Record(r)
		if err != nil {
			err.Index = i
			n.Failed = append(n.Failed, err)
			continue
		}
		n.Objects = append(n.Objects, obj)
	}
	return n, nil
}

const s3EventSource = "aws:s3"

// s3Record is one element of Records[] as S3 writes it; only the fields
// this package reads. Size and time are read by hand, to accept moto's
// zone-less times and to fail only this record when they are wrong.
type s3Record struct {
	EventSource string          `json:"eventSource"`
	AWSRegion   string          `json:"awsRegion"`
	EventTime   json.RawMessage `json:"eventTime"`
	EventName   string          `json:"eventName"`
	S3          struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       *string         `json:"key"`
			Size      json.RawMessage `json:"size"`
			ETag      string          `json:"eTag"`
			VersionID string          `json:"versionId"`
			Sequencer string          `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

func readS3Record(raw json.RawMessage) (Object, *RecordError) {
	var r s3Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Object{}, &RecordError{Err: fmt.Errorf("record does not decode: %w", err)}
	}
	fail := func(err error) (Object, *RecordError) {
		re := &RecordError{Bucket: r.S3.Bucket.Name, Err: err}
		if r.S3.Object.Key != nil {
			re.RawKey = *r.S3.Object.Key
		}
		return Object{}, re
	}
	if r.EventSource != s3EventSource {
		return fail(fmt.Errorf("eventSource is %q, not %q", r.EventSource, s3EventSource))
	}
	obj := Object{
		Bucket:    r.S3.Bucket.Name,
		ETag:      strings.Trim(r.S3.Object.ETag, `"`),
		VersionID: r.S3.Object.VersionID,
		Sequencer: r.S3.Object.Sequencer,
		EventName: strings.TrimPrefix(r.EventName, "s3:"),
		Region:    r.AWSRegion,
	}
	obj.Deletion = IsDeletion(obj.EventName)
	if r.S3.Object.Key != nil {
		obj.RawKey = *r.S3.Object.Key
	}
	if err := obj.finish(r.S3.Object.Key != nil, r.S3.Object.Size, r.EventTime, false); err != nil {
		return fail(err)
	}
	return obj, nil
}

// finish checks bucket and key, decodes the key (unless raw), and reads size
// and time.
func (obj *Object) finish(hasKey bool, size, eventTime json.RawMessage, raw bool) error {
	if obj.Bucket == "" {
		return errors.New("no bucket name")
	}
	if !hasKey || obj.RawKey == "" {
		return errors.New("no object key")
	}
	obj.Key = obj.RawKey
	if !raw {
		k, err := DecodeKey(obj.RawKey)
		if err != nil {
			return fmt.Errorf("key %q does not decode: %w", obj.RawKey, err)
		}
		obj.Key = k
	}
	var err error
	if obj.Size, err = readSize(size); err != nil {
		return err
	}
	if obj.EventTime, err = readTime(eventTime); err != nil {
		return err
	}
	return nil
}

// snsEnvelope is the JSON document SNS delivers to a queue without raw
// message delivery
// (https://docs.aws.amazon.com/sns/latest/dg/sns-sqs-as-subscriber.html).
type snsEnvelope struct {
	Type    string `json:"Type"`
	Message string `json:"Message"`
}

// ebEvent is an EventBridge event from source aws.s3
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html).
type ebEvent struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       json.RawMessage `json:"time"`
	Region     string          `json:"region"`
	Detail     *struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object *struct {
			Key       *string         `json:"key"`
			Size      json.RawMessage `json:"size"`
			ETag      string          `json:"etag"`
			VersionID string          `json:"version-id"`
			Sequencer string          `json:"sequencer"`
		} `json:"object"`
		Reason       string `json:"reason"`
		DeletionType string `json:"deletion-type"`
	} `json:"detail"`
}

func (o Options) parseEventBridge(body []byte, unrecognized func(string, ...any) error) (*Notification, error) {
	var ev ebEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, unrecognized("an EventBridge event that does not decode: %v", err)
	}
	if ev.Source != "aws.s3" {
		return nil, unrecognized("an EventBridge event from source %q (detail-type %q)", ev.Source, ev.DetailType)
	}
	if ev.Detail == nil || ev.Detail.Object == nil || ev.Detail.Object.Key == nil {
		return nil, unrecognized("an EventBridge aws.s3 event %q without detail.object.key", ev.DetailType)
	}
	d := ev.Detail
	obj := Object{
		Bucket:    d.Bucket.Name,
		RawKey:    *d.Object.Key,
		ETag:      strings.Trim(d.Object.ETag, `"`),
		VersionID: d.Object.VersionID,
		Sequencer: d.Object.Sequencer,
		EventName: ebEventName(ev.DetailType, d.Reason, d.DeletionType),
		Region:    ev.Region,
	}
	obj.Deletion = IsDeletion(obj.EventName)
	n := &Notification{}
	if err := obj.finish(true, d.Object.Size, ev.Time, o.EventBridgeKeysRaw); err != nil {
		n.Failed = []*RecordError{{Bucket: obj.Bucket, RawKey: obj.RawKey, Err: err}}
		return n, nil
	}
	n.Objects = []Object{obj}
	return n, nil
}

// ebEventName maps an EventBridge detail-type (plus reason and deletion-type)
// to the S3 event name, following
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-mapping-troubleshooting.html.
func ebEventName(detailType, reason, deletionType string) string {
	switch detailType {
	case "Object Created":
		switch reason {
		case "PutObject":
			return "ObjectCreated:Put"
		case "POST Object", "PostObject":
			return "ObjectCreated:Post"
		case "CopyObject":
			return "ObjectCreated:Copy"
		case "CompleteMultipartUpload":
			return "ObjectCreated:CompleteMultipartUpload"
		}
		return "ObjectCreated:*"
	case "Object Deleted":
		family := "ObjectRemoved:"
		if reason == "Lifecycle Expiration" {
			family = "LifecycleExpiration:"
		}
		if deletionType == "Delete Marker Created" {
			return family + "DeleteMarkerCreated"
		}
		return family + "Delete"
	case "Object Restore Initiated":
		return "ObjectRestore:Post"
	case "Object Restore Completed":
		return "ObjectRestore:Completed"
	case "Object Restore Expired":
		return "ObjectRestore:Delete"
	case "Object Storage Class Changed":
		return "LifecycleTransition"
	case "Object Access Tier Changed":
		return "IntelligentTiering"
	case "Object ACL Updated":
		return "ObjectAcl:Put"
	case "Object Tags Added":
		return "ObjectTagging:Put"
	case "Object Tags Deleted":
		return "ObjectTagging:Delete"
	}
	return detailType
}

// readSize reads an object size written as a JSON number or a numeric
// string; absent or null is 0.
func readSize(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" {
		return 0, nil
	}
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("size %s: %w", excerpt(raw), err)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %s is not a byte count", excerpt(raw))
	}
	return n, nil
}

// zonelessTime is how moto writes eventTime: ISO 8601 without a zone, with
// microseconds ("2026-11-29T22:08:54.810987"). Fractions are accepted after
// the seconds even though the layout has none.
const zonelessTime = "2006-01-02T15:04:05"

// readTime reads an event time written as an RFC 3339 string (AWS), as an
// ISO 8601 string without a zone (moto; read as UTC) or as a JSON number of
// Unix seconds; absent, null or "" is the zero time.
func readTime(raw json.RawMessage) (time.Time, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" || s == `""` {
		return time.Time{}, nil
	}
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("event time %s: %w", excerpt(raw), err)
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t.UTC(), nil
		}
		if t, err := time.Parse(zonelessTime, s); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("event time %q is not an ISO 8601 time", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1e11 {
		return time.Time{}, fmt.Errorf("event time %s is neither a time string nor Unix seconds", excerpt(raw))
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	default:
		return "number"
	}
}

// keysOf returns up to 8 keys of an object, sorted, for an error message.
func keysOf(fields map[string]json.RawMessage) []string {
	keys := slices.Sorted(maps.Keys(fields))
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	return keys
}
