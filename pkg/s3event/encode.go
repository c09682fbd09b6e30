package s3event

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Format is the shape of a notification that Encoder writes.
type Format string

// The formats Encoder writes; each is a shape Parse reads.
const (
	// FormatS3 is the S3 event notification, {"Records": [...]}, as S3
	// sends it to SQS (or SNS with raw message delivery). The empty Format
	// means FormatS3.
	FormatS3 Format = "s3"
	// FormatEventBridge is the EventBridge "Object Created" event from
	// source aws.s3, as an EventBridge rule sends it to SQS.
	FormatEventBridge Format = "eventbridge"
	// FormatSNS is the S3 event notification as a string inside a standard
	// SNS envelope, as an SNS subscription without raw message delivery
	// delivers it.
	FormatSNS Format = "sns"
)

// Formats lists the formats Encoder writes, the default first.
var Formats = []Format{FormatS3, FormatEventBridge, FormatSNS}

// ParseFormat returns the Format named s ("s3", "eventbridge" or "sns"); the
// empty string is FormatS3.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "", FormatS3:
		return FormatS3, nil
	case FormatEventBridge, FormatSNS:
		return f, nil
	}
	return "", fmt.Errorf("notification format %q is not one of s3, eventbridge, sns", s)
}

// ReplayMarker starts the text that marks a notification written by Encoder,
// in the fields S3 fills with values of the caller's choosing or of its own
// that no consumer relies on: s3.configurationId of an S3 event (the name of
// the bucket's notification configuration) and detail.request-id of an
// EventBridge event are ReplayMarker + ":" + Encoder.RunID;
// userIdentity.principalId, bucket.ownerIdentity.principalId and
// detail.requester are ReplayMarker.
const ReplayMarker = "s3sqs-replay"

// Encoder writes notifications announcing that objects were created, in the
// shapes S3, EventBridge and SNS deliver to SQS, so that an existing consumer
// of notifications receives objects that already exist as if S3 had just
// announced them. The zero value writes S3 event notifications and is ready
// to use. Encode is pure: the same Encoder and Object give the same bytes.
type Encoder struct {
	// Format is the shape to write; empty is FormatS3.
	Format Format
	// RunID names the replay in the marker fields (see ReplayMarker); empty
	// writes ReplayMarker + ":".
	RunID string
	// EventBridgeKeysRaw writes detail.object.key of EventBridge events as
	// the key itself. By default it is form-URL-encoded like the keys of S3
	// events (EncodeKey), which is how Parse reads it by default; see
	// Options.EventBridgeKeysRaw for why. Set both or neither.
	EventBridgeKeysRaw bool
	// Account is the AWS account written in the EventBridge event's
	// account field; empty writes "000000000000".
	Account string
	// TopicARN is the SNS envelope's TopicArn; empty writes
	// "arn:aws:sns:<region>:<account>:s3sqs-replay".
	TopicARN string
}

// Encode writes one notification announcing obj as created
// (ObjectCreated:Put; EventBridge reason PutObject). It reads obj's Bucket,
// Key, Size, ETag (quotes are dropped), VersionID, Sequencer, EventTime and
// Region, and ignores RawKey, EventName and Route: Parse of the result gives
// back those fields, with EventName "ObjectCreated:Put", except that an
// EventBridge event's time has whole seconds and an S3 event's milliseconds,
// as AWS writes them. A zero EventTime is written as the Unix epoch. An
// empty VersionID or Sequencer is left out, as S3 leaves them out.
//
// Encode refuses a deletion (obj.Deletion), an empty bucket or key, a
// negative size, and a Format it does not know.
func (e Encoder) Encode(obj Object) ([]byte, error) {
	if obj.Deletion {
		return nil, fmt.Errorf("s3event: encode %s/%s: a deletion is not announced as created", obj.Bucket, obj.Key)
	}
	if obj.Bucket == "" || obj.Key == "" {
		return nil, errors.New("s3event: encode: an object needs a bucket and a key")
	}
	if obj.Size < 0 {
		return nil, fmt.Errorf("s3event: encode %s/%s: negative size %d", obj.Bucket, obj.Key, obj.Size)
	}
	f, err := ParseFormat(string(e.Format))
	if err != nil {
		return nil, fmt.Errorf("s3event: encode: %w", err)
	}
	obj.ETag = trimQuotes(obj.ETag)
	if obj.EventTime.IsZero() {
		obj.EventTime = time.Unix(0, 0)
	}
	obj.EventTime = obj.EventTime.UTC()
	switch f {
	case FormatEventBridge:
		return json.Marshal(e.eventBridge(obj))
	case FormatSNS:
		msg, err := json.Marshal(e.s3Event(obj))
		if err != nil {
			return nil, err
		}
		return json.Marshal(e.snsEnvelope(obj, string(msg)))
	}
	return json.Marshal(e.s3Event(obj))
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

func (e Encoder) marker() string { return ReplayMarker + ":" + e.RunID }

func (e Encoder) account() string { return cmp.Or(e.Account, "000000000000") }

// id derives a stable identifier from the replay and the object version, so
// that encoding the same version twice gives the same bytes.
func (e Encoder) id(obj Object, what string) [16]byte {
	h := sha256.New()
	for _, s := range []string{what, e.RunID, obj.Bucket, obj.Key, obj.VersionID, obj.Sequencer} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// uuid writes id as a version 4 style UUID, the shape of the ids SNS and
// EventBridge write.
func uuid(id [16]byte) string {
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	h := hex.EncodeToString(id[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

type principal struct {
	PrincipalID string `json:"principalId"`
}

type outS3Event struct {
	Records []outS3Record `json:"Records"`
}

type outS3Record struct {
	EventVersion      string            `json:"eventVersion"`
	EventSource       string            `json:"eventSource"`
	AWSRegion         string            `json:"awsRegion"`
	EventTime         string            `json:"eventTime"`
	EventName         string            `json:"eventName"`
	UserIdentity      principal         `json:"userIdentity"`
	RequestParameters map[string]string `json:"requestParameters"`
	ResponseElements  map[string]string `json:"responseElements"`
	S3                outS3Entity       `json:"s3"`
}

type outS3Entity struct {
	SchemaVersion   string `json:"s3SchemaVersion"`
	ConfigurationID string `json:"configurationId"`
	Bucket          struct {
		Name          string    `json:"name"`
		OwnerIdentity principal `json:"ownerIdentity"`
		ARN           string    `json:"arn"`
	} `json:"bucket"`
	Object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size"`
		ETag      string `json:"eTag,omitempty"`
		VersionID string `json:"versionId,omitempty"`
		Sequencer string `json:"sequencer,omitempty"`
	} `json:"object"`
}

// s3TimeLayout is how S3 writes eventTime: milliseconds, always three digits.
const s3TimeLayout = "2006-01-02T15:04:05.000Z"

func (e Encoder) s3Event(obj Object) outS3Event {
	id := e.id(obj, "request")
	r := outS3Record{
		EventVersion:      "2.1",
		EventSource:       s3EventSource,
		AWSRegion:         obj.Region,
		EventTime:         obj.EventTime.Format(s3TimeLayout),
		EventName:         "ObjectCreated:Put",
		UserIdentity:      principal{ReplayMarker},
		RequestParameters: map[string]string{"sourceIPAddress": "127.0.0.1"},
		ResponseElements: map[string]string{
			"x-amz-request-id": fmt.Sprintf("%X", id[:8]),
			"x-amz-id-2":       e.marker(),
		},
	}
	s := &r.S3
	s.SchemaVersion = "1.0"
	s.ConfigurationID = e.marker()
	s.Bucket.Name = obj.Bucket
	s.Bucket.OwnerIdentity = principal{ReplayMarker}
	s.Bucket.ARN = "arn:aws:s3:::" + obj.Bucket
	s.Object.Key = EncodeKey(obj.Key)
	s.Object.Size = obj.Size
	s.Object.ETag = obj.ETag
	s.Object.VersionID = obj.VersionID
	s.Object.Sequencer = obj.Sequencer
	return outS3Event{Records: []outS3Record{r}}
}

type outEBEvent struct {
	Version    string      `json:"version"`
	ID         string      `json:"id"`
	DetailType string      `json:"detail-type"`
	Source     string      `json:"source"`
	Account    string      `json:"account"`
	Time       string      `json:"time"`
	Region     string      `json:"region"`
	Resources  []string    `json:"resources"`
	Detail     outEBDetail `json:"detail"`
}

type outEBDetail struct {
	Version string `json:"version"`
	Bucket  struct {
		Name string `json:"name"`
	} `json:"bucket"`
	Object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size"`
		ETag      string `json:"etag,omitempty"`
		VersionID string `json:"version-id,omitempty"`
		Sequencer string `json:"sequencer,omitempty"`
	} `json:"object"`
	RequestID       string `json:"request-id"`
	Requester       string `json:"requester"`
	SourceIPAddress string `json:"source-ip-address"`
	Reason          string `json:"reason"`
}

func (e Encoder) eventBridge(obj Object) outEBEvent {
	ev := outEBEvent{
		Version:    "0",
		ID:         uuid(e.id(obj, "eventbridge")),
		DetailType: "Object Created",
		Source:     "aws.s3",
		Account:    e.account(),
		Time:       obj.EventTime.Format(time.RFC3339),
		Region:     obj.Region,
		Resources:  []string{"arn:aws:s3:::" + obj.Bucket},
	}
	d := &ev.Detail
	d.Version = "0"
	d.Bucket.Name = obj.Bucket
	d.Object.Key = obj.Key
	if !e.EventBridgeKeysRaw {
		d.Object.Key = EncodeKey(obj.Key)
	}
	d.Object.Size = obj.Size
	d.Object.ETag = obj.ETag
	d.Object.VersionID = obj.VersionID
	d.Object.Sequencer = obj.Sequencer
	d.RequestID = e.marker()
	d.Requester = ReplayMarker
	d.SourceIPAddress = "127.0.0.1"
	d.Reason = "PutObject"
	return ev
}

type outSNSEnvelope struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	TopicARN         string `json:"TopicArn"`
	Subject          string `json:"Subject"`
	Message          string `json:"Message"`
	Timestamp        string `json:"Timestamp"`
	SignatureVersion string `json:"SignatureVersion"`
}

// snsEnvelope wraps an S3 event as SNS delivers it. The envelope is not
// signed (there is no Signature, SigningCertURL or UnsubscribeURL): a
// consumer that verifies SNS signatures refuses replays.
func (e Encoder) snsEnvelope(obj Object, msg string) outSNSEnvelope {
	topic := e.TopicARN
	if topic == "" {
		topic = "arn:aws:sns:" + obj.Region + ":" + e.account() + ":" + ReplayMarker
	}
	return outSNSEnvelope{
		Type:             "Notification",
		MessageID:        uuid(e.id(obj, "sns")),
		TopicARN:         topic,
		Subject:          "Amazon S3 Notification",
		Message:          msg,
		Timestamp:        obj.EventTime.Format(s3TimeLayout),
		SignatureVersion: "1",
	}
}

// RunSequencer returns a sequencer for the index-th version (0 for the
// oldest) of a key replayed by run runID: the same for the same run, so
// that a notification sent again (a retry, a resumed run) is the same
// notification, and another for another run, so that a consumer that
// keys its work on the object and its sequencer (as s3ingest does) takes
// a new replay of the same versions as new. It is 24 upper-case hex
// digits: 16 of the SHA-256 of runID, and the index (8 digits), so that
// one key's versions in one run increase under CompareSequencers. Like
// ReplaySequencer's, it orders a run's versions among themselves only.
func RunSequencer(runID string, index int) string {
	sum := sha256.Sum256([]byte(runID))
	return fmt.Sprintf("%016X%08X", sum[:8], uint32(max(index, 0)))
}

// ReplaySequencer returns a sequencer for the index-th version (0 for the
// oldest) of a key, last modified at lastModified, such that the sequencers
// of one key's versions, taken oldest first with nondecreasing times,
// increase under CompareSequencers. It is 24 upper-case hex digits: the
// milliseconds since the Unix epoch (16 digits; 0 before 1970) and the index
// (8 digits). It orders replayed versions among themselves only: S3's own
// sequencers of the same key are not comparable with it.
func ReplaySequencer(lastModified time.Time, index int) string {
	ms := max(lastModified.UnixMilli(), 0)
	return fmt.Sprintf("%016X%08X", uint64(ms), uint32(max(index, 0)))
}
