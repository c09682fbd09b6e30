package s3event_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// readTestdata returns the bytes of testdata/name.
func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("read testdata: %v", err)
	}
	return b
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// longKey is the 1,013-byte key of s3-multi-record-keys.json.
var longKey = "long/dt=2024-01-01/" + strings.Repeat("x", 990) + ".csv"

// multiRecordObjects are the objects of s3-multi-record-keys.json.
func multiRecordObjects(route s3event.Route) []s3event.Object {
	keys := []struct{ name, key string }{
		{"ObjectCreated:Put", "red flower.jpg"},
		{"ObjectCreated:Put", "c++/lib+x.so"},
		{"ObjectCreated:Copy", "events/date=2024-01-01/hour=07/part 0001.csv"},
		{"ObjectCreated:Post", "100% done/x.txt"},
		{"ObjectCreated:CompleteMultipartUpload", "données/日本語/ünï €.csv"},
		{"ObjectCreated:Put", "folder/sub/"},
		{"ObjectCreated:Put", longKey},
		{"ObjectCreated:Put", "a&b=c/q?x#y;z:@$,!'()~*.txt"},
	}
	sizes := []int64{5, 6, 7, 8, 9, 0, 10, 11}
	var out []s3event.Object
	for i, k := range keys {
		out = append(out, s3event.Object{
			Bucket:    "mybucket",
			Key:       k.key,
			Size:      sizes[i],
			ETag:      fmt.Sprintf("%032x", i+1),
			Sequencer: fmt.Sprintf("0055AED6DCD90281E%d", i),
			EventName: k.name,
			EventTime: time.Date(2024, 1, 1, 0, 0, i, 0, time.UTC),
			Region:    "us-west-2",
			Route:     route,
		})
	}
	return out
}

// ignoreRawKey leaves RawKey out of comparisons where the expected value is
// not written out by hand; TestParseRawKeyIsVerbatim checks it separately.
var ignoreRawKey = cmpopts.IgnoreFields(s3event.Object{}, "RawKey")

const motoKey = "dt=2024-01-01/a b+c%d&e=f/ünï €.csv"
const motoRawKey = "dt%3D2024-01-01%2Fa+b%2Bc%25d%26e%3Df%2F%C3%BCn%C3%AF+%E2%82%AC.csv"

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file    string
		opts    s3event.Options
		want    *s3event.Notification
		wantErr string // the error's type, "*s3event.MalformedError" or "*s3event.UnrecognizedError"
		errHas  string // text the error must contain
		failed  []string
	}{
		{
			file: "s3-put.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{
				Bucket: "mybucket", Key: "HappyFace.jpg", RawKey: "HappyFace.jpg", Size: 1024,
				ETag: "d41d8cd98f00b204e9800998ecf8427e", VersionID: "096fKKXTRTtl3on89fVO.nfljtsv6qko",
				Sequencer: "0055AED6DCD90281E5", EventName: "ObjectCreated:Put",
				EventTime: ts("1970-01-01T00:00:00Z"), Region: "us-west-2", Route: s3event.RouteS3,
			}}},
		},
		{file: "s3-test-event.json", want: &s3event.Notification{Route: s3event.RouteS3, TestEvent: true}},
		{file: "s3-multi-record-keys.json", want: &s3event.Notification{Route: s3event.RouteS3, Objects: multiRecordObjects(s3event.RouteS3)}},
		{
			file: "s3-delete.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{
				Bucket: "mybucket", Key: "events/date=2024-01-01/part 0001.csv", Sequencer: "0055AED6DCD90281E6",
				EventName: "ObjectRemoved:Delete", EventTime: ts("2024-01-02T03:04:05.678Z"), Region: "us-west-2",
				Route: s3event.RouteS3, Deletion: true,
			}}},
		},
		{
			file: "s3-delete-marker.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{
				Bucket: "mybucket", Key: "HappyFace.jpg", VersionID: "1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
				Sequencer: "0055AED6DCD90281E7", EventName: "ObjectRemoved:DeleteMarkerCreated",
				EventTime: ts("2024-01-02T03:04:05.678Z"), Region: "us-west-2", Route: s3event.RouteS3, Deletion: true,
			}}},
		},
		{
			file: "s3-bad-escape.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{
				{Bucket: "mybucket", Key: "good one.csv", Size: 1, ETag: strings.Repeat("a", 32), Sequencer: "01",
					EventName: "ObjectCreated:Put", EventTime: ts("2024-01-01T00:00:00Z"), Region: "us-west-2", Route: s3event.RouteS3},
				{Bucket: "mybucket", Key: "also good.csv", Size: 4, ETag: strings.Repeat("d", 32), Sequencer: "04",
					EventName: "ObjectCreated:Put", EventTime: ts("2024-01-01T00:00:00Z"), Region: "us-west-2", Route: s3event.RouteS3},
			}},
			failed: []string{
				`s3event: record 1 (bucket "mybucket", key "bad%zzkey.csv"): key "bad%zzkey.csv" does not decode: invalid URL escape "%zz"`,
				`s3event: record 2 (bucket "mybucket", key "trailing%"): key "trailing%" does not decode: invalid URL escape "%"`,
			},
		},
		{
			file: "sns-s3-put.json",
			want: &s3event.Notification{Route: s3event.RouteSNS, Objects: []s3event.Object{
				{Bucket: "mybucket", Key: "dt=2024-01-01/a b+c.csv", Size: 12, ETag: strings.Repeat("e", 32), Sequencer: "0A",
					EventName: "ObjectCreated:Put", EventTime: ts("2024-01-01T00:00:00Z"), Region: "us-west-2", Route: s3event.RouteSNS},
				{Bucket: "mybucket", Key: "dt=2024-01-01/x=y%z.csv", Size: 13, ETag: strings.Repeat("f", 32), Sequencer: "0B",
					EventName: "ObjectCreated:Put", EventTime: ts("2024-01-01T00:00:00Z"), Region: "us-west-2", Route: s3event.RouteSNS},
			}},
		},
		{file: "sns-test-event.json", want: &s3event.Notification{Route: s3event.RouteSNS, TestEvent: true}},
		{file: "sns-not-json-message.json", wantErr: "*s3event.UnrecognizedError", errHas: `SNS notification whose Message is not JSON: "Hello world!"`},
		{file: "sns-malformed-message.json", wantErr: "*s3event.MalformedError", errHas: "malformed JSON in SNS Message"},
		{
			file: "eventbridge-object-created.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "example-key", Size: 5, ETag: "b1946ac92492d2347c6235b4d2611184",
				VersionID: "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e", Sequencer: "617f08299329d189", EventName: "ObjectCreated:Put",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridge,
			}}},
		},
		{
			file: "eventbridge-object-deleted.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "example-key", ETag: "d41d8cd98f00b204e9800998ecf8427e",
				VersionID: "1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF", Sequencer: "617f0837b476e463", EventName: "ObjectRemoved:DeleteMarkerCreated",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridge, Deletion: true,
			}}},
		},
		{
			file: "eventbridge-lifecycle-expiration.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "example-key", ETag: "d41d8cd98f00b204e9800998ecf8427e",
				VersionID: "mtB0cV.jejK63XkRNceanNMC.qXPWLeK", Sequencer: "617b398000000000", EventName: "LifecycleExpiration:DeleteMarkerCreated",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridge, Deletion: true,
			}}},
		},
		{
			file: "eventbridge-restore-completed.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "example-key", Size: 5, ETag: "b1946ac92492d2347c6235b4d2611184",
				VersionID: "KKsjUC1.6gIjqtvhfg5AdMI0eCePIiT3", EventName: "ObjectRestore:Completed",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridge,
			}}},
		},
		{
			file: "eventbridge-encoded-key.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "photos/dt=2024-01-01/my summer(2024)+1.jpg", Size: 5,
				ETag: "b1946ac92492d2347c6235b4d2611184", VersionID: "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
				Sequencer: "617f08299329d189", EventName: "ObjectCreated:Put",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridge,
			}}},
		},
		{
			file: "sns-eventbridge-created.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridgeSNS, Objects: []s3event.Object{{
				Bucket: "amzn-s3-demo-bucket1", Key: "photos/dt=2024-01-01/my summer(2024)+1.jpg", Size: 5,
				ETag: "b1946ac92492d2347c6235b4d2611184", VersionID: "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
				Sequencer: "617f08299329d189", EventName: "ObjectCreated:Put",
				EventTime: ts("2021-11-12T00:00:00Z"), Region: "ca-central-1", Route: s3event.RouteEventBridgeSNS,
			}}},
		},
		{file: "unrecognized-lambda-sqs-event.json", wantErr: "*s3event.UnrecognizedError", errHas: `Records with eventSource ["aws:sqs"]`},
		{file: "unrecognized-sns-subscription-confirmation.json", wantErr: "*s3event.UnrecognizedError", errHas: `SNS message of Type "SubscriptionConfirmation"`},
		{file: "unrecognized-eventbridge-ec2.json", wantErr: "*s3event.UnrecognizedError", errHas: `EventBridge event from source "aws.ec2"`},
		{file: "unrecognized-eventbridge-cloudtrail.json", wantErr: "*s3event.UnrecognizedError", errHas: `"AWS API Call via CloudTrail" without detail.object.key`},
		{file: "unrecognized-array.json", wantErr: "*s3event.UnrecognizedError", errHas: "a JSON array, not an object"},
		{file: "unrecognized-empty-records.json", wantErr: "*s3event.UnrecognizedError", errHas: "S3 event with no Records"},
		{file: "malformed-truncated.json", wantErr: "*s3event.MalformedError", errHas: "malformed JSON in body"},

		// Samples taken from moto_server (see testdata/README.md).
		{
			file: "moto-s3-sqs-put.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoRawKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				EventName: "ObjectCreated:Put", EventTime: ts("2026-11-29T22:35:15.502341Z"), Region: "us-east-1", Route: s3event.RouteS3,
			}}},
		},
		{
			file: "moto-s3-sqs-delete.json",
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoRawKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				EventName: "ObjectRemoved:Delete", EventTime: ts("2026-11-29T22:35:16.549179Z"), Region: "us-east-1",
				Route: s3event.RouteS3, Deletion: true,
			}}},
		},
		{file: "moto-s3-sqs-test-event.json", want: &s3event.Notification{Route: s3event.RouteS3, TestEvent: true}},
		{
			file: "moto-sns-wrapped-put.json",
			want: &s3event.Notification{Route: s3event.RouteSNS, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoRawKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				EventName: "ObjectCreated:Put", EventTime: ts("2026-11-29T22:35:15.502926Z"), Region: "us-east-1", Route: s3event.RouteSNS,
			}}},
		},
		{file: "moto-sns-wrapped-test-event.json", want: &s3event.Notification{Route: s3event.RouteSNS, TestEvent: true}},
		{
			// moto writes EventBridge keys unencoded; decoding them as AWS
			// keys fails on "%d&", and only this record fails.
			file: "moto-eventbridge-put.json",
			want: &s3event.Notification{Route: s3event.RouteEventBridge},
			failed: []string{
				`s3event: record 0 (bucket "capture", key "dt=2024-01-01/a b+c%d&e=f/ünï €.csv"): key "dt=2024-01-01/a b+c%d&e=f/ünï €.csv" does not decode: invalid URL escape "%d&"`,
			},
		},
		{
			file: "moto-eventbridge-put.json",
			opts: s3event.Options{EventBridgeKeysRaw: true},
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				VersionID: "null", Sequencer: "617f08299329d189", EventName: "ObjectCreated:*",
				EventTime: ts("2026-11-29T22:35:15Z"), Region: "us-east-1", Route: s3event.RouteEventBridge,
			}}},
		},
		{
			file: "moto-eventbridge-delete.json",
			opts: s3event.Options{EventBridgeKeysRaw: true},
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				VersionID: "null", Sequencer: "617f08299329d189", EventName: "ObjectRemoved:Delete",
				EventTime: ts("2026-11-29T22:35:16Z"), Region: "us-east-1", Route: s3event.RouteEventBridge, Deletion: true,
			}}},
		},
		{
			file: "moto-eventbridge-tags-added.json",
			opts: s3event.Options{EventBridgeKeysRaw: true},
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{
				Bucket: "capture", Key: motoKey, RawKey: motoKey, Size: 3, ETag: "764efa883dda1e11db47671c4a3bbd9e",
				VersionID: "null", Sequencer: "617f08299329d189", EventName: "ObjectTagging:Put",
				EventTime: ts("2026-11-29T22:35:15Z"), Region: "us-east-1", Route: s3event.RouteEventBridge,
			}}},
		},
	}

	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(fmt.Sprintf("%s/raw=%v", tt.file, tt.opts.EventBridgeKeysRaw), func(t *testing.T) {
			got, err := tt.opts.Parse(readTestdata(t, tt.file))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse: no error, want %s; got %+v", tt.wantErr, got)
				}
				if typ := fmt.Sprintf("%T", err); typ != tt.wantErr {
					t.Errorf("error type = %s, want %s (%v)", typ, tt.wantErr, err)
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error = %q, want it to contain %q", err, tt.errHas)
				}
				if got != nil {
					t.Errorf("Notification = %+v, want nil with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var failed []string
			for _, f := range got.Failed {
				failed = append(failed, f.Error())
			}
			if diff := cmp.Diff(tt.failed, failed); diff != "" {
				t.Errorf("failed records (-want +got):\n%s", diff)
			}
			got.Failed = nil
			opts := []cmp.Option{cmpopts.EquateEmpty()}
			if hasNoRawKeys(tt.want) {
				opts = append(opts, ignoreRawKey)
			}
			if diff := cmp.Diff(tt.want, got, opts...); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}

	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("testdata/%s has no case in TestParseTestdata", filepath.Base(f))
		}
	}
}

// hasNoRawKeys reports whether want leaves RawKey unset, in which case
// RawKey is not compared; TestParseRawKeyIsVerbatim checks it.
func hasNoRawKeys(want *s3event.Notification) bool {
	for _, o := range want.Objects {
		if o.RawKey == "" {
			return true
		}
	}
	return false
}

// TestParseRawKeyIsVerbatim checks that RawKey is the key exactly as written
// and that decoding it gives Key.
func TestParseRawKeyIsVerbatim(t *testing.T) {
	n, err := s3event.Parse(readTestdata(t, "s3-multi-record-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantRaw := []string{
		"red+flower.jpg",
		"c%2B%2B/lib%2Bx.so",
		"events/date%3D2024-01-01/hour%3D07/part+0001.csv",
		"100%25+done/x.txt",
		"donn%C3%A9es/%E6%97%A5%E6%9C%AC%E8%AA%9E/%C3%BCn%C3%AF+%E2%82%AC.csv",
		"folder/sub/",
		"long/dt%3D2024-01-01/" + strings.Repeat("x", 990) + ".csv",
		"a%26b%3Dc/q%3Fx%23y%3Bz%3A%40%24%2C%21%27%28%29~%2A.txt",
	}
	var gotRaw []string
	for _, o := range n.Objects {
		gotRaw = append(gotRaw, o.RawKey)
		if k, err := s3event.DecodeKey(o.RawKey); err != nil || k != o.Key {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q", o.RawKey, k, err, o.Key)
		}
	}
	if diff := cmp.Diff(wantRaw, gotRaw); diff != "" {
		t.Errorf("RawKey (-want +got):\n%s", diff)
	}
}

func TestParseInline(t *testing.T) {
	rec := func(fields string) string {
		return `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"` + fields + `}}}]}`
	}
	tests := []struct {
		name    string
		body    string
		want    *s3event.Notification
		wantErr string
		failed  string
	}{
		{name: "empty", body: "", wantErr: "found nothing"},
		{name: "spaces", body: " \n\t", wantErr: "found nothing"},
		{name: "null", body: "null", wantErr: "found JSON null"},
		{name: "string", body: `"Records"`, wantErr: "a JSON string, not an object"},
		{name: "number", body: `12`, wantErr: "a JSON number, not an object"},
		{name: "other object", body: `{"foo":1,"bar":2}`, wantErr: `found an object with keys ["bar" "foo"]`},
		{name: "not json", body: `Records: []`, wantErr: "malformed JSON in body"},
		{name: "Records not array", body: `{"Records":{}}`, wantErr: "Records that is not an array"},
		{name: "Records null", body: `{"Records":null}`, wantErr: "S3 event with no Records"},
		{name: "other Event", body: `{"Event":"s3:Other"}`, wantErr: `an object with Event "s3:Other"`},
		{name: "SNS inside SNS", body: `{"Type":"Notification","Message":"{\"Type\":\"Notification\",\"Message\":\"{}\"}"}`, wantErr: "SNS envelope inside an SNS envelope"},
		{name: "SNS Message not string", body: `{"Type":"Notification","Message":{}}`, wantErr: "Type or Message is not a string"},
		{name: "SNS Message array", body: `{"Type":"Notification","Message":"[1]"}`, wantErr: "SNS Message is not an S3 notification: found a JSON array"},
		{name: "EventBridge detail wrong type", body: `{"source":"aws.s3","detail-type":"Object Created","detail":{"object":{"key":5}}}`, wantErr: "EventBridge event that does not decode"},
		{
			name:   "time without zone is UTC",
			body:   `{"Records":[{"eventSource":"aws:s3","eventTime":"2026-11-29T22:08:54.810987","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
			want:   &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", EventName: "ObjectCreated:Put", EventTime: ts("2026-11-29T22:08:54.810987Z"), Route: s3event.RouteS3}}},
			failed: "",
		},
		{
			name: "time with offset is converted to UTC",
			body: `{"Records":[{"eventSource":"aws:s3","eventTime":"2024-01-01T02:00:00+02:00","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", EventName: "ObjectCreated:Put", EventTime: ts("2024-01-01T00:00:00Z"), Route: s3event.RouteS3}}},
		},
		{
			name: "size as string, s3: prefix, quoted eTag",
			body: rec(`,"size":"42","eTag":"\"abc\""`),
			want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", Size: 42, ETag: "abc", EventName: "ObjectCreated:Put", Route: s3event.RouteS3}}},
		},
		{
			name: "EventBridge time as Unix seconds",
			body: `{"source":"aws.s3","detail-type":"Object Created","time":1700000000.5,"detail":{"bucket":{"name":"b"},"object":{"key":"k"},"reason":"CopyObject"}}`,
			want: &s3event.Notification{Route: s3event.RouteEventBridge, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", EventName: "ObjectCreated:Copy", EventTime: time.Unix(1700000000, 5e8).UTC(), Route: s3event.RouteEventBridge}}},
		},
		{name: "bad size fails the record", body: rec(`,"size":-1`), want: &s3event.Notification{Route: s3event.RouteS3}, failed: "size -1 is not a byte count"},
		{name: "bad size type fails the record", body: rec(`,"size":{}`), want: &s3event.Notification{Route: s3event.RouteS3}, failed: "size {} is not a byte count"},
		{name: "bad time fails the record", body: `{"Records":[{"eventSource":"aws:s3","eventTime":"yesterday","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`, want: &s3event.Notification{Route: s3event.RouteS3}, failed: `event time "yesterday" is not an ISO 8601 time`},
		{name: "no key fails the record", body: `{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{}}}]}`, want: &s3event.Notification{Route: s3event.RouteS3}, failed: "no object key"},
		{name: "no bucket fails the record", body: `{"Records":[{"eventSource":"aws:s3","s3":{"object":{"key":"k"}}}]}`, want: &s3event.Notification{Route: s3event.RouteS3}, failed: "no bucket name"},
		{name: "key with invalid UTF-8 fails the record", body: `{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"%FF"}}}]}`, want: &s3event.Notification{Route: s3event.RouteS3}, failed: "not valid UTF-8"},
		{name: "record of another source fails the record", body: `{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}},{"eventSource":"aws:sqs"}]}`, want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", Route: s3event.RouteS3}}}, failed: `eventSource is "aws:sqs"`},
		{name: "record that is not an object fails the record", body: `{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}},7]}`, want: &s3event.Notification{Route: s3event.RouteS3, Objects: []s3event.Object{{Bucket: "b", Key: "k", RawKey: "k", Route: s3event.RouteS3}}}, failed: "record does not decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s3event.Parse([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tt.wantErr)
				}
				var ue *s3event.UnrecognizedError
				var me *s3event.MalformedError
				if !errors.As(err, &ue) && !errors.As(err, &me) {
					t.Errorf("error %T is neither *UnrecognizedError nor *MalformedError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var failed string
			if len(got.Failed) > 1 {
				t.Fatalf("%d failed records, want at most 1: %v", len(got.Failed), got.Failed)
			}
			if len(got.Failed) == 1 {
				failed = got.Failed[0].Error()
				var re *s3event.RecordError
				if !errors.As(got.Failed[0], &re) {
					t.Errorf("failed record is %T", got.Failed[0])
				}
			}
			if tt.failed == "" && failed != "" || !strings.Contains(failed, tt.failed) {
				t.Errorf("failed record = %q, want %q", failed, tt.failed)
			}
			got.Failed = nil
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorsUnwrapAndExcerpt(t *testing.T) {
	long := `{"Records": [` + strings.Repeat(`"é",`, 100)
	_, err := s3event.Parse([]byte(long))
	var me *s3event.MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("error = %T %v, want *MalformedError", err, err)
	}
	if me.Unwrap() == nil {
		t.Error("MalformedError.Unwrap() = nil, want the JSON error")
	}
	if len(me.Excerpt) > 120+3 || !strings.HasSuffix(me.Excerpt, "...") {
		t.Errorf("Excerpt = %q (%d bytes), want at most 120 bytes and \"...\"", me.Excerpt, len(me.Excerpt))
	}
	if !strings.HasPrefix(long, strings.TrimSuffix(me.Excerpt, "...")) {
		t.Errorf("Excerpt %q is not a prefix of the body", me.Excerpt)
	}

	n, err := s3event.Parse(readTestdata(t, "s3-bad-escape.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Failed) == 0 {
		t.Fatal("no failed records")
	}
	if errors.Unwrap(n.Failed[0]) == nil {
		t.Error("RecordError.Unwrap() = nil")
	}
	var esc url.EscapeError
	if !errors.As(n.Failed[0], &esc) {
		t.Errorf("RecordError does not wrap url.EscapeError: %v", n.Failed[0])
	}
}

func TestRouteString(t *testing.T) {
	for r, want := range map[s3event.Route]string{
		s3event.RouteS3: "s3", s3event.RouteSNS: "sns", s3event.RouteEventBridge: "eventbridge",
		s3event.RouteEventBridgeSNS: "eventbridge+sns", s3event.RouteUnknown: "Route(0)",
	} {
		if got := r.String(); got != want {
			t.Errorf("Route(%d).String() = %q, want %q", r, got, want)
		}
	}
}
