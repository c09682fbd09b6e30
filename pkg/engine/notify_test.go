package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// replayed is what a replayed notification names.
type replayed struct {
	Key, ETag string
	Size      int64
}

// putReplayDataset writes objects whose keys S3 encodes in every way, one
// of them empty and one in a format no mode reads, and returns them.
func putReplayDataset(t *testing.T, st *fanoutstack.Stack) []replayed {
	t.Helper()
	var want []replayed
	for key, body := range map[string]string{
		"replay/dt=2024-01-01/a b+c%d&e=f/ünï €.jsonl": `{"value":"x"}` + "\n",
		"replay/empty.jsonl":   "",
		"replay/picture.jpeg":  "\xff\xd8\xff not records",
		"replay/plain.txt":     "one\ntwo\n",
		"other/not-under.json": "{}",
	} {
		out, err := st.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(key, "replay/") {
			want = append(want, replayed{Key: key, ETag: strings.Trim(aws.ToString(out.ETag), `"`), Size: int64(len(body))})
		}
	}
	slices.SortFunc(want, func(a, b replayed) int { return strings.Compare(a.Key, b.Key) })
	return want
}

// TestNotificationMode replays a prefix in each format: one message per
// object, the object not read, each message a notification that
// s3event.Parse and aws-lambda-go read back to the object it names, marked
// as a replay of the run and carrying the record id of the object's version.
func TestNotificationMode(t *testing.T) {
	for _, format := range s3event.Formats {
		t.Run(string(format), func(t *testing.T) {
			st := fanoutstack.New(t, "")
			want := putReplayDataset(t, st)
			progress := &engine.Progress{}
			h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeNotification, Notification: engine.Notification{Region: localaws.Region}, Progress: progress}, nil)
			rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{
				"bucket": st.Bucket, "prefix": "replay/", "runId": "replay-1", "notificationFormat": string(format)})
			if rep.Objects != len(want) || rep.RecordsSent != int64(len(want)) || rep.RecordsFailed != 0 {
				t.Errorf("report %+v; want %d objects, one message each", rep, len(want))
			}
			// Each notification counts the bytes it announces, as planning
			// does: status and progress reach 100%, not a byte an object.
			var size int64
			for _, o := range want {
				size += o.Size
			}
			if planned, read := progress.BytesPlanned.Load(), progress.BytesRead.Load(); planned != size || read != size {
				t.Errorf("bytes planned %d, read %d; want both %d", planned, read, size)
			}
			msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
			var got []replayed
			for _, m := range msgs {
				body := aws.ToString(m.Body)
				n, err := s3event.Parse([]byte(body))
				if err != nil || len(n.Objects) != 1 {
					t.Fatalf("Parse = %+v, %v\n%s", n, err, body)
				}
				o := n.Objects[0]
				if o.Bucket != st.Bucket || o.EventName != "ObjectCreated:Put" || o.Region != localaws.Region ||
					time.Since(o.EventTime) > time.Minute {
					t.Errorf("notification %+v", o)
				}
				lambdaCheck(t, format, body, o)
				obj := dataset.Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
				if id := aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue); id != engine.RecordID(obj, 0) {
					t.Errorf("%s: record id %q, want %q", o.Key, id, engine.RecordID(obj, 0))
				}
				got = append(got, replayed{Key: o.Key, ETag: o.ETag, Size: o.Size})
			}
			slices.SortFunc(got, func(a, b replayed) int { return strings.Compare(a.Key, b.Key) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("replayed objects (-want +got):\n%s", diff)
			}
		})
	}
}

// lambdaCheck reads body as a Lambda function written with aws-lambda-go
// would, and checks that it names o and says it is a replay of run
// replay-1.
func lambdaCheck(t *testing.T, format s3event.Format, body string, o s3event.Object) {
	t.Helper()
	switch format {
	case s3event.FormatEventBridge:
		var ev events.CloudWatchEvent
		var d struct {
			Bucket    struct{ Name string } `json:"bucket"`
			Object    struct{ Key string }  `json:"object"`
			RequestID string                `json:"request-id"`
		}
		if err := json.Unmarshal([]byte(body), &ev); err != nil || json.Unmarshal(ev.Detail, &d) != nil {
			t.Fatalf("events.CloudWatchEvent of %s: %v", body, err)
		}
		if ev.Source != "aws.s3" || ev.DetailType != "Object Created" || d.Bucket.Name != o.Bucket ||
			d.Object.Key != s3event.EncodeKey(o.Key) || d.RequestID != "s3sqs-replay:replay-1" {
			t.Errorf("EventBridge event %+v, detail %+v; want %s", ev, d, o.Key)
		}
		return
	case s3event.FormatSNS:
		var sns events.SNSEntity
		if err := json.Unmarshal([]byte(body), &sns); err != nil || sns.Type != "Notification" {
			t.Fatalf("events.SNSEntity of %s: %+v, %v", body, sns, err)
		}
		body = sns.Message
	}
	var ev events.S3Event
	if err := json.Unmarshal([]byte(body), &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("events.S3Event of %s: %v", body, err)
	}
	r := ev.Records[0].S3
	if r.Bucket.Name != o.Bucket || r.Object.URLDecodedKey != o.Key || r.Object.Size != o.Size || r.Object.ETag != o.ETag ||
		r.ConfigurationID != "s3sqs-replay:replay-1" {
		t.Errorf("events.S3Event %+v; want %s", r, o.Key)
	}
}

// TestNotificationModeClaims delivers a notification-mode task twice: its
// object is announced once.
func TestNotificationModeClaims(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "once.csv", "a,b\n1,2\n")
	task := `{"runId":"r","chunk":{"bucket":"lake","key":"once.csv","size":8,"index":0,"count":1,"start":0,"end":8,"format":"text"},"overrides":{"mode":"notification"}}`
	h, _ := st.Handler(t, engine.Options{Claims: fanoutstack.ClaimsStore(t)}, nil)
	for range 2 {
		resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{taskMessage("t1", task)}})
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", resp.BatchItemFailures)
		}
	}
	msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the object's notification once", len(msgs))
	}
	n, err := s3event.Parse([]byte(aws.ToString(msgs[0].Body)))
	if err != nil || len(n.Objects) != 1 || n.Objects[0].Key != "once.csv" || n.Objects[0].Size != 8 {
		t.Errorf("Parse = %+v, %v", n, err)
	}
}

// TestNotificationModeRefused has SQS refuse one object's notification for
// good: it goes to the failure output under the record id of the object's
// version, the others reach the target.
func TestNotificationModeRefused(t *testing.T) {
	st := fanoutstack.New(t, "")
	st.Put(t, "r/good.jsonl", "{}\n")
	st.Put(t, "r/poison.jsonl", "{}\n")
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeNotification}, refusing(func(body string) bool {
		return strings.Contains(body, `"key":"r/poison.jsonl"`)
	}))
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "r/", "runId": "refused"})
	if rep.RecordsSent != 1 || rep.RecordsFailed != 1 {
		t.Errorf("report %+v; want one notification sent, one failed", rep)
	}
	sent := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
	if len(sent) != 1 || !strings.Contains(aws.ToString(sent[0].Body), `"key":"r/good.jsonl"`) {
		t.Errorf("target holds %v, want the good object's notification", localaws.Bodies(sent))
	}
	fl := onlyFailure(t, st)
	head, err := st.S3.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String("r/poison.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	obj := dataset.Object{Bucket: st.Bucket, Key: "r/poison.jsonl", ETag: strings.Trim(aws.ToString(head.ETag), `"`)}
	if fl.Source != "s3://lake/r/poison.jsonl" || fl.RecordID != engine.RecordID(obj, 0) || fl.Code != "InvalidParameterValue" ||
		!strings.Contains(fl.Body, "s3sqs-replay:refused") {
		t.Errorf("failure %+v", fl)
	}
}

// refusing has SQS refuse, for good (InvalidParameterValue), the entries
// whose bodies match.
func refusing(match func(body string) bool) func(sqsbatch.API) sqsbatch.API {
	return func(api sqsbatch.API) sqsbatch.API {
		return &sqsfault.Client{API: api, EntryErr: sqsfault.SenderFault("InvalidParameterValue", match)}
	}
}

// onlyFailure drains st's failure queue and returns the one failure it
// must hold.
func onlyFailure(t *testing.T, st *fanoutstack.Stack) engine.Failure {
	t.Helper()
	failed := localaws.Drain(t, st.SQS, st.Failure, time.Second)
	if len(failed) != 1 {
		t.Fatalf("%d failures, want 1", len(failed))
	}
	var fl engine.Failure
	if err := json.Unmarshal([]byte(aws.ToString(failed[0].Body)), &fl); err != nil {
		t.Fatal(err)
	}
	return fl
}
