package fanouthandler_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// event is one S3 event on an object of the stack's bucket, as the
// notification paths write it.
type event struct {
	key, eTag, versionID, sequencer string
	at                              time.Time
}

// putEvent writes n JSON Lines records to key and returns their values and
// the event of the PUT, with the ETag S3 gave it.
func putEvent(t *testing.T, st *fanoutstack.Stack, key, prefix string, n int, sequencer string) ([]string, event) {
	t.Helper()
	var b strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&b, `{"value":"%s%03d"}`+"\n", prefix, i)
		want = append(want, fmt.Sprintf("%s%03d", prefix, i))
	}
	out, err := st.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key), Body: strings.NewReader(b.String())})
	if err != nil {
		t.Fatal(err)
	}
	return want, event{key: key, eTag: strings.Trim(aws.ToString(out.ETag), `"`), sequencer: sequencer, at: time.Now()}
}

// raw is the S3 notification of e as S3 sends it to a queue.
func (e event) raw() string {
	obj := map[string]any{"key": e.key, "size": 1, "eTag": e.eTag}
	if e.versionID != "" {
		obj["versionId"] = e.versionID
	}
	if e.sequencer != "" {
		obj["sequencer"] = e.sequencer
	}
	b, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
		"eventTime": e.at.UTC().Format("2006-01-02T15:04:05.000Z"), "eventName": "ObjectCreated:Put",
		"s3": map[string]any{"bucket": map[string]string{"name": "lake"}, "object": obj},
	}}})
	return string(b)
}

// sns is the notification of e as SNS delivers it without raw message
// delivery.
func (e event) sns() string {
	b, _ := json.Marshal(map[string]string{"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:000000000000:lake", "Message": e.raw()})
	return string(b)
}

// eventBridge is e as EventBridge delivers it, with the sequencer written
// as given.
func (e event) eventBridge(sequencer string) string {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "detail-type": "Object Created", "source": "aws.s3", "region": "us-east-1",
		"time": e.at.UTC().Format(time.RFC3339),
		"detail": map[string]any{"bucket": map[string]string{"name": "lake"}, "reason": "PutObject",
			"object": map[string]any{"key": e.key, "size": 1, "etag": e.eTag, "sequencer": sequencer}},
	})
	return string(b)
}

// summaries returns the invocation summaries in logs, in order.
func summaries(t *testing.T, logs string) []fanouthandler.Invocation {
	t.Helper()
	var out []fanouthandler.Invocation
	for line := range strings.SplitSeq(logs, "\n") {
		var l struct {
			Message string                   `json:"message"`
			Summary fanouthandler.Invocation `json:"summary"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "fanout invocation" {
			out = append(out, l.Summary)
		}
	}
	return out
}

// deliver invokes h with one SQS event of one message and fails the test
// unless the message succeeds.
func deliver(t *testing.T, h *fanouthandler.Handler, id, body string) {
	t.Helper()
	resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: body, EventSource: "aws:sqs"}}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("message %s failed: %v", id, resp.BatchItemFailures)
	}
}

// TestNotificationDeliveredTwice delivers one S3 event again in later
// invocations, as S3 now and then does, as new SQS messages: raw, wrapped
// by SNS and, with a sequencer, through EventBridge with the sequencer in
// another case and length (equal by CompareSequencers). With claims the
// repeats are one run with the first, found done: the records arrive once,
// also without a sequencer (moto omits it).
func TestNotificationDeliveredTwice(t *testing.T) {
	for _, tt := range []struct{ name, sequencer string }{
		{"sequencer", "0055aed6dcd90281e5"},
		{"no sequencer", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := fanoutstack.New(t, "")
			want, ev := putEvent(t, st, "in/twice.jsonl", "r", 40, tt.sequencer)
			h, logs := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t), ReportS3URI: "s3://lake/reports"}, nil)
			deliveries := []string{ev.raw(), ev.sns(), ev.raw()}
			if tt.sequencer != "" {
				deliveries = append(deliveries, ev.eventBridge(strings.ToUpper(tt.sequencer)+"00"))
			}
			for i, body := range deliveries {
				deliver(t, h, fmt.Sprint("m", i+1), body)
			}
			if diff := cmp.Diff(want, st.Sent(t)); diff != "" {
				t.Errorf("records (-want +got):\n%s\n%s", diff, logs)
			}
			sums := summaries(t, logs.String())
			if len(sums) != len(deliveries) {
				t.Fatalf("%d summaries, want %d:\n%s", len(sums), len(deliveries), logs)
			}
			for i, s := range sums {
				if i > 0 && (s.TasksSkipped != 1 || s.RecordsRead != 0 || s.RunID != sums[0].RunID) {
					t.Errorf("delivery %d: summary %+v, want run %s with its one task skipped", i+1, s, sums[0].RunID)
				}
			}
			// The run report is the first delivery's, which sent the records.
			out, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String("reports/" + sums[0].RunID + "/manifest.json")})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Body.Close()
			var m engine.Manifest
			if err := json.NewDecoder(out.Body).Decode(&m); err != nil || m.RecordsSent != int64(len(want)) || m.TasksSkipped != 0 {
				t.Errorf("manifest %+v (%v), want the first delivery's", m, err)
			}
		})
	}
}

// TestNotificationDeliveredTwiceWithoutClaims delivers one S3 event twice
// without a claims table: both deliveries run, as one run id, and every
// record has one id in both, so that a consumer can drop the repeat.
func TestNotificationDeliveredTwiceWithoutClaims(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, ev := putEvent(t, st, "in/twice.jsonl", "r", 20, "0055AED6DCD90281E5")
	h, logs := st.Handler(t, engine.Options{}, nil)
	deliver(t, h, "m1", ev.raw())
	deliver(t, h, "m2", ev.sns())
	bodies, ids := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
	var twice []string
	for _, v := range want {
		twice = append(twice, v, v)
	}
	if diff := cmp.Diff(twice, bodies); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if len(ids) != len(want) {
		t.Errorf("%d record ids, want %d: %v", len(ids), len(want), ids)
	}
	for id, n := range ids {
		if n != 2 {
			t.Errorf("record id %s sent %d times, want 2", id, n)
		}
	}
	sums := summaries(t, logs.String())
	if len(sums) != 2 || sums[0].RunID != sums[1].RunID || !strings.HasPrefix(sums[0].RunID, "s3event-") {
		t.Errorf("summaries %+v, want two of one run named after the event", sums)
	}
}

// TestNotificationNewEvents sends three events of one key with claims: an
// overwrite with other bytes (another ETag) and then a PUT of the same
// bytes again (the same ETag, a later sequencer). Each is a new event, and
// its records are sent.
func TestNotificationNewEvents(t *testing.T) {
	st := fanoutstack.New(t, "")
	h, logs := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t)}, nil)
	first, ev1 := putEvent(t, st, "in/k.jsonl", "a", 5, "0055AED6DCD90281E5")
	deliver(t, h, "m1", ev1.raw())
	second, ev2 := putEvent(t, st, "in/k.jsonl", "b", 5, "0055AED6DCD90281E6")
	if ev2.eTag == ev1.eTag {
		t.Fatal("the overwrite has the first PUT's ETag")
	}
	deliver(t, h, "m2", ev2.raw())
	_, ev3 := putEvent(t, st, "in/k.jsonl", "b", 5, "0055AED6DCD90281E7")
	if ev3.eTag != ev2.eTag {
		t.Fatal("the same bytes have another ETag")
	}
	deliver(t, h, "m3", ev3.raw())
	want := slices.Concat(first, second, second)
	slices.Sort(want)
	if diff := cmp.Diff(want, st.Sent(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s\n%s", diff, logs)
	}
}

// TestNotificationOverwriteNullVersion overwrites an object whose events
// give the version id "null" (written while versioning was off) and one
// sequencer, as moto's EventBridge events do for an unversioned bucket:
// only the ETag tells the two events apart, and both are sent.
func TestNotificationOverwriteNullVersion(t *testing.T) {
	st := fanoutstack.New(t, "")
	h, logs := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t)}, nil)
	first, ev1 := putEvent(t, st, "in/k.jsonl", "a", 5, "617f08299329d189")
	ev1.versionID = "null"
	deliver(t, h, "m1", ev1.raw())
	second, ev2 := putEvent(t, st, "in/k.jsonl", "b", 5, "617f08299329d189")
	ev2.versionID = "null"
	deliver(t, h, "m2", ev2.raw())
	want := slices.Concat(first, second)
	slices.Sort(want)
	if diff := cmp.Diff(want, st.Sent(t)); diff != "" {
		t.Errorf("records (-want +got):\n%s\n%s", diff, logs)
	}
}

// TestNotificationTooOld skips an event older than MAX_FILE_AGE: nothing
// is sent, the message succeeds, and the skip is a warning that names the
// object and why, counted in the invocation's summary.
func TestNotificationTooOld(t *testing.T) {
	st := fanoutstack.New(t, "")
	_, ev := putEvent(t, st, "in/old.jsonl", "r", 3, "01")
	ev.at = time.Now().Add(-2 * time.Hour)
	st.Options.Filter = s3event.Filter{MaxFileAge: time.Hour}
	h, logs := st.Handler(t, engine.Options{}, nil)
	deliver(t, h, "m1", ev.raw())
	if got := st.Sent(t); len(got) != 0 {
		t.Errorf("sent %v, want nothing", got)
	}
	var warned bool
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var l struct{ Level, Msg, Object, Reason string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "object skipped" {
			warned = l.Level == "WARN" && l.Object == "s3://lake/in/old.jsonl" && l.Reason == "too-old"
		}
	}
	if !warned {
		t.Errorf("no warning names the object skipped as too old:\n%s", logs)
	}
	if sums := summaries(t, logs.String()); len(sums) != 1 || sums[0].Skipped != 1 {
		t.Errorf("summaries %+v, want one with the object skipped", sums)
	}
}
