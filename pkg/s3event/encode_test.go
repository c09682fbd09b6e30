package s3event_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// replayObjects are the object versions the encoder tests announce: keys S3
// encodes in every way it does, with and without version and sequencer.
var replayObjects = []s3event.Object{
	{Bucket: "b", Key: "plain.csv", Size: 12, ETag: "0123456789abcdef0123456789abcdef",
		EventTime: time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC), Region: "eu-west-1"},
	{Bucket: "data-bucket", Key: "dt=2024-01-01/a b+c%d&e=f/ünï €.csv", Size: 1 << 40, ETag: `"5d41402abc4b2a76b9719d911017c592-3"`,
		VersionID: "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", Sequencer: s3event.ReplaySequencer(time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), 2),
		EventTime: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), Region: "us-east-1"},
	{Bucket: "b", Key: "folder/", VersionID: "null", Region: "ap-south-1"},
}

// wantParsed is what Parse gives back for an encoded obj on route r.
func wantParsed(obj s3event.Object, f s3event.Format, rawKeys bool) s3event.Object {
	obj.ETag = strings.Trim(obj.ETag, `"`)
	obj.EventName = "ObjectCreated:Put"
	obj.RawKey = s3event.EncodeKey(obj.Key)
	switch f {
	case s3event.FormatEventBridge:
		obj.Route = s3event.RouteEventBridge
		obj.EventTime = obj.EventTime.Truncate(time.Second)
		if rawKeys {
			obj.RawKey = obj.Key
		}
	case s3event.FormatSNS:
		obj.Route = s3event.RouteSNS
		obj.EventTime = obj.EventTime.Truncate(time.Millisecond)
	default:
		obj.Route = s3event.RouteS3
		obj.EventTime = obj.EventTime.Truncate(time.Millisecond)
	}
	if obj.EventTime.IsZero() {
		obj.EventTime = time.Unix(0, 0).UTC()
	}
	return obj
}

func TestEncoderParse(t *testing.T) {
	for _, f := range []s3event.Format{"", s3event.FormatS3, s3event.FormatEventBridge, s3event.FormatSNS} {
		for _, raw := range []bool{false, true} {
			e := s3event.Encoder{Format: f, RunID: "run-1", EventBridgeKeysRaw: raw}
			for _, obj := range replayObjects {
				t.Run(fmt.Sprintf("%s/raw=%v/%s", f, raw, obj.Key), func(t *testing.T) {
					body, err := e.Encode(obj)
					if err != nil {
						t.Fatal(err)
					}
					n, err := s3event.Options{EventBridgeKeysRaw: raw}.Parse(body)
					if err != nil {
						t.Fatalf("Parse: %v\n%s", err, body)
					}
					if len(n.Failed) != 0 || len(n.Objects) != 1 || n.TestEvent {
						t.Fatalf("Parse = %+v\n%s", n, body)
					}
					if diff := cmp.Diff(wantParsed(obj, f, raw), n.Objects[0], cmpopts.EquateComparable(time.Time{})); diff != "" {
						t.Errorf("Parse(Encode(obj)) (-want +got):\n%s\n%s", diff, body)
					}
					again, err := e.Encode(obj)
					if err != nil || string(again) != string(body) {
						t.Errorf("Encode is not repeatable:\n%s\n%s", body, again)
					}
				})
			}
		}
	}
}

// checkLambdaS3Event checks an S3 event as aws-lambda-go reads it.
func checkLambdaS3Event(t *testing.T, msg []byte, obj s3event.Object) {
	t.Helper()
	var ev events.S3Event
	if err := json.Unmarshal(msg, &ev); err != nil {
		t.Fatalf("events.S3Event: %v\n%s", err, msg)
	}
	if len(ev.Records) != 1 {
		t.Fatalf("events.S3Event has %d records", len(ev.Records))
	}
	r := ev.Records[0]
	got := s3event.Object{Bucket: r.S3.Bucket.Name, Key: r.S3.Object.URLDecodedKey, Size: r.S3.Object.Size,
		ETag: r.S3.Object.ETag, VersionID: r.S3.Object.VersionID, Sequencer: r.S3.Object.Sequencer,
		EventTime: r.EventTime, Region: r.AWSRegion}
	want := wantParsed(obj, s3event.FormatS3, false)
	want.RawKey, want.EventName, want.Route = "", "", 0
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(time.Time{})); diff != "" {
		t.Errorf("events.S3Event (-want +got):\n%s", diff)
	}
	if r.EventSource != "aws:s3" || r.EventName != "ObjectCreated:Put" || r.EventVersion != "2.1" ||
		r.S3.ConfigurationID != "s3sqs-replay:run-1" || r.S3.Bucket.Arn != "arn:aws:s3:::"+obj.Bucket {
		t.Errorf("events.S3Event record = %+v", r)
	}
}

func TestEncoderLambdaEvents(t *testing.T) {
	for _, obj := range replayObjects {
		t.Run(obj.Key, func(t *testing.T) {
			body, err := s3event.Encoder{RunID: "run-1"}.Encode(obj)
			if err != nil {
				t.Fatal(err)
			}
			checkLambdaS3Event(t, body, obj)

			body, err = s3event.Encoder{Format: s3event.FormatSNS, RunID: "run-1"}.Encode(obj)
			if err != nil {
				t.Fatal(err)
			}
			var sns events.SNSEntity
			if err := json.Unmarshal(body, &sns); err != nil {
				t.Fatalf("events.SNSEntity: %v\n%s", err, body)
			}
			if sns.Type != "Notification" || sns.Subject != "Amazon S3 Notification" || sns.MessageID == "" ||
				sns.TopicArn != "arn:aws:sns:"+obj.Region+":000000000000:s3sqs-replay" || sns.Timestamp.IsZero() {
				t.Errorf("events.SNSEntity = %+v", sns)
			}
			checkLambdaS3Event(t, []byte(sns.Message), obj)

			for _, raw := range []bool{false, true} {
				body, err = s3event.Encoder{Format: s3event.FormatEventBridge, RunID: "run-1", Account: "111122223333", EventBridgeKeysRaw: raw}.Encode(obj)
				if err != nil {
					t.Fatal(err)
				}
				checkLambdaEventBridge(t, body, obj, raw)
			}
		})
	}
}

// ebDetail is detail of an EventBridge "Object Created" event as AWS
// documents it (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html).
type ebDetail struct {
	Version string `json:"version"`
	Bucket  struct {
		Name string `json:"name"`
	} `json:"bucket"`
	Object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size"`
		ETag      string `json:"etag"`
		VersionID string `json:"version-id"`
		Sequencer string `json:"sequencer"`
	} `json:"object"`
	RequestID       string `json:"request-id"`
	Requester       string `json:"requester"`
	SourceIPAddress string `json:"source-ip-address"`
	Reason          string `json:"reason"`
}

func checkLambdaEventBridge(t *testing.T, body []byte, obj s3event.Object, raw bool) {
	t.Helper()
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("events.CloudWatchEvent: %v\n%s", err, body)
	}
	var d ebDetail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatalf("detail: %v\n%s", err, ev.Detail)
	}
	key := d.Object.Key
	if !raw {
		var err error
		if key, err = url.QueryUnescape(key); err != nil {
			t.Fatal(err)
		}
	}
	want := wantParsed(obj, s3event.FormatEventBridge, raw)
	got := s3event.Object{Bucket: d.Bucket.Name, Key: key, Size: d.Object.Size, ETag: d.Object.ETag,
		VersionID: d.Object.VersionID, Sequencer: d.Object.Sequencer, EventTime: ev.Time.UTC(), Region: ev.Region}
	want.RawKey, want.EventName, want.Route = "", "", 0
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(time.Time{})); diff != "" {
		t.Errorf("events.CloudWatchEvent (-want +got):\n%s\n%s", diff, body)
	}
	if ev.Source != "aws.s3" || ev.DetailType != "Object Created" || ev.Version != "0" || ev.AccountID != "111122223333" ||
		len(ev.Resources) != 1 || ev.Resources[0] != "arn:aws:s3:::"+obj.Bucket || ev.ID == "" {
		t.Errorf("events.CloudWatchEvent = %+v", ev)
	}
	if d.Reason != "PutObject" || d.RequestID != "s3sqs-replay:run-1" || d.Requester != "s3sqs-replay" || d.Version != "0" {
		t.Errorf("detail = %+v", d)
	}
}

func TestEncoderRefuses(t *testing.T) {
	for _, c := range []struct {
		e   s3event.Encoder
		obj s3event.Object
	}{
		{s3event.Encoder{}, s3event.Object{Bucket: "b", Key: "k", Deletion: true}},
		{s3event.Encoder{}, s3event.Object{Key: "k"}},
		{s3event.Encoder{}, s3event.Object{Bucket: "b"}},
		{s3event.Encoder{}, s3event.Object{Bucket: "b", Key: "k", Size: -1}},
		{s3event.Encoder{Format: "kinesis"}, s3event.Object{Bucket: "b", Key: "k"}},
	} {
		if body, err := c.e.Encode(c.obj); err == nil {
			t.Errorf("%+v.Encode(%+v) = %s, want an error", c.e, c.obj, body)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]s3event.Format{"": s3event.FormatS3, "s3": s3event.FormatS3,
		"eventbridge": s3event.FormatEventBridge, "sns": s3event.FormatSNS} {
		if got, err := s3event.ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"S3", "eventBridge", "sqs"} {
		if got, err := s3event.ParseFormat(in); err == nil {
			t.Errorf("ParseFormat(%q) = %q, want an error", in, got)
		}
	}
}

func TestReplaySequencer(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	// Oldest first, as ListObjectVersions' order reversed gives them:
	// times never decrease, and versions written within the same
	// millisecond keep their index order.
	times := []time.Time{time.Unix(-5, 0), t0, t0, t0.Add(time.Millisecond), t0.Add(time.Hour), t0.Add(time.Hour)}
	prev := ""
	for i, lm := range times {
		s := s3event.ReplaySequencer(lm, i)
		if len(s) != 24 || strings.ToUpper(s) != s {
			t.Errorf("ReplaySequencer(%v, %d) = %q, want 24 upper-case hex digits", lm, i, s)
		}
		if prev != "" && s3event.CompareSequencers(prev, s) >= 0 {
			t.Errorf("ReplaySequencer(%v, %d) = %q does not follow %q", lm, i, s, prev)
		}
		prev = s
	}
}

// FuzzEncodeKeyRoundTrip checks that any key survives every format of the
// encoder, read back by Parse and by aws-lambda-go.
func FuzzEncodeKeyRoundTrip(f *testing.F) {
	for _, k := range []string{"red flower.jpg", "c++/lib+x.so", "dt=2024-01-01/a b+c%d&e=f/ünï €.csv",
		"100%25 done", "folder/sub/", "a&b=c/q?x#y;z:@$,!'()~*.txt", "日本語/\t\n\"", "%", "+", " ", "%2B"} {
		f.Add(k, uint8(0))
	}
	f.Fuzz(func(t *testing.T, key string, which uint8) {
		if !utf8.ValidString(key) || key == "" {
			return // S3 keys are non-empty UTF-8
		}
		format := s3event.Formats[int(which)%len(s3event.Formats)]
		raw := which&0x80 != 0
		obj := s3event.Object{Bucket: "b", Key: key, Size: 1, Region: "us-east-1"}
		body, err := s3event.Encoder{Format: format, EventBridgeKeysRaw: raw}.Encode(obj)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s3event.Options{EventBridgeKeysRaw: raw}.Parse(body)
		if err != nil || len(n.Objects) != 1 || n.Objects[0].Key != key {
			t.Fatalf("Parse(Encode(%q)) as %s = %+v, %v\n%s", key, format, n, err, body)
		}
		msg := body
		switch format {
		case s3event.FormatEventBridge:
			return
		case s3event.FormatSNS:
			var sns events.SNSEntity
			if err := json.Unmarshal(body, &sns); err != nil {
				t.Fatal(err)
			}
			msg = []byte(sns.Message)
		}
		var ev events.S3Event
		if err := json.Unmarshal(msg, &ev); err != nil || len(ev.Records) != 1 || ev.Records[0].S3.Object.URLDecodedKey != key {
			t.Fatalf("events.S3Event of Encode(%q) = %+v, %v", key, ev, err)
		}
	})
}

func TestRunSequencer(t *testing.T) {
	prev := ""
	for i := range 3 {
		s := s3event.RunSequencer("replay-1", i)
		if len(s) != 24 || strings.ToUpper(s) != s || s != s3event.RunSequencer("replay-1", i) {
			t.Errorf("RunSequencer(replay-1, %d) = %q, want 24 upper-case hex digits, the same every time", i, s)
		}
		if prev != "" && s3event.CompareSequencers(prev, s) >= 0 {
			t.Errorf("RunSequencer(replay-1, %d) = %q does not follow %q", i, s, prev)
		}
		if other := s3event.RunSequencer("replay-2", i); other == s {
			t.Errorf("runs replay-1 and replay-2 share sequencer %q", s)
		}
		prev = s
	}
}
