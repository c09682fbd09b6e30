package ingesthandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// These tests call Handle with mixed batches against an in-process S3 and
// the SQS stand-in, and assert the exact batchItemFailures, every record
// on the output queue and what is on the failure output.

func TestHandleGoodObjectsAndUnparseable(t *testing.T) {
	f := newFixture(t, "", nil)
	a := f.put("events/date=2024-01-01/hour=07/part 0001.jsonl", `{"id":1,"v":"a"}`+"\n"+`{"id":2,"v":"b","hour":"mine"}`+"\n\n"+`[3]`+"\n")
	b := f.put("events/date=2024-01-02/kind=a+b/x%y.csv", "k,v\r\n1,x\r\n2,y\r\n")
	c := f.put("events/région=Zürich/ünïcödé 日本語.jsonl", `{"n":"ü"}`+"\n")
	d := f.put("events/date=__HIVE_DEFAULT_PARTITION__/n=1/null.txt", "plain text\nsecond line\n")
	d.EventTime = d.EventTime.Truncate(time.Second) // as EventBridge writes it
	e := f.put("events/date=2024-01-03/e.jsonl", `{"e":1}`+"\n")
	// A record whose key has a malformed escape cannot be read: its
	// message fails, after its good object, e, is delivered (its retries
	// would fail the same way, and hold e back until the DLQ).
	bad := f.put("events/bad.jsonl", `{"never":1}`+"\n")
	mixed := strings.Replace(s3Body(bad, e), encodeKey(bad.Key), "events/bad%zz.jsonl", 1)
	h := f.handler(f.defaults(), nil, nil)

	resp, err := h.Handle(t.Context(), sqsEvent(
		msg{id: "m1", body: s3Body(a, b)},      // raw (S3 → SQS, or SNS raw delivery), two records
		msg{id: "m2", body: "not json at all"}, // malformed
		msg{id: "m3", body: snsBody(s3Body(c))},
		msg{id: "m4", body: `{"Records":[{"eventSource":"aws:sqs"}]}`}, // JSON, but no notification
		msg{id: "m5", body: eventBridgeBody(d)},
		msg{id: "m6", body: mixed},
	))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if diff := cmp.Diff([]string{"m2", "m4", "m6"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	// A JSON value that is not an object is wrapped in {"value": ...};
	// the record's own "hour" wins over the key's.
	want := wantRecords(t, a, b, c, d, e)
	checkOutput(t, f.sqs, f.out, want)
	if got := f.failed(time.Second); len(got) != 0 {
		t.Errorf("failure output holds %v; want nothing", got)
	}
	s := summaryOf(t, f.summary)
	if s.Messages != 6 || s.FailedMessages != 3 || !cmp.Equal(s.FailedBy, map[string]int{failParse: 3}) || s.Objects != 5 ||
		s.ObjectsDelivered != 5 || s.RecordsSent != int64(len(want)) || s.Records != int64(len(want)) || s.RecordsFailed != 0 {
		t.Errorf("summary %+v", s)
	}
	if !strings.Contains(f.logs.String(), `"field":"hour"`) {
		t.Errorf("the clash of the record's hour with the key's is not logged:\n%s", f.logs)
	}
	if n := strings.Count(f.logs.String(), `"msg":"message is not an S3 notification`); n != 3 {
		t.Errorf("%d log lines about unparseable messages, want 3:\n%s", n, f.logs)
	}
}

func TestHandleTestEventAndDeletion(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "deletions ignored"
		if keep {
			name = "deletions kept"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "", nil)
			a := f.put("in/day=3/a.jsonl", `{"x":1}`+"\n")
			gone := a
			gone.Key, gone.EventName, gone.Size, gone.ETag = "in/day=4/b.jsonl", "ObjectRemoved:Delete", 0, ""
			o := f.defaults()
			if keep {
				// IGNORE_DELETIONS=false, PARTITION_COLUMNS=typed
				o.ingest.Filter.KeepDeletions = true
				o.ingest.Partitions = recordjson.PartitionsTyped
			}
			h := f.handler(o, nil, nil)
			resp, err := h.Handle(t.Context(), sqsEvent(
				msg{id: "t1", body: testEventBody},
				msg{id: "t2", body: snsBody(testEventBody)},
				msg{id: "d1", body: s3Body(gone)},
				msg{id: "g1", body: snsBody(s3Body(a))},
			))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff([]string{}, failures(resp)); diff != "" {
				t.Errorf("batchItemFailures (-want +got):\n%s", diff)
			}
			want := wantRecords(t, a)
			if keep {
				for _, rec := range want {
					rec["day"] = 3.0
				}
				want[deletionID(gone.Object)] = map[string]any{
					"_deleted": true, "_event": "ObjectRemoved:Delete", "day": 4.0,
					"_file": map[string]any{
						"bucket": testBucket, "key": gone.Key, "versionId": nil, "eTag": nil,
						"eventTime": gone.EventTime.Format(time.RFC3339Nano), "offset": nil,
					},
				}
			}
			checkOutput(t, f.sqs, f.out, want)
			s := summaryOf(t, f.summary)
			wantSkipped := 1
			if keep {
				wantSkipped = 0
			}
			if s.TestEvents != 2 || s.Skipped["deletion"] != wantSkipped || s.FailedMessages != 0 {
				t.Errorf("summary %+v; want 2 test events and %d deletion skipped", s, wantSkipped)
			}
		})
	}
}

// poison refuses for good, as SQS does for a sender's fault, every record
// whose body says "poison". The failure record that carries such a record
// to the failure queue goes through.
func poison(api sqsbatch.API) *sqsfault.Client {
	return &sqsfault.Client{API: api, EntryErr: sqsfault.SenderFault("InvalidParameterValue", func(body string) bool {
		var fl engine.Failure
		isFailure := json.Unmarshal([]byte(body), &fl) == nil && fl.Source != ""
		return strings.Contains(body, "poison") && !isFailure
	})}
}

func TestHandleMissingSupersededAndPoisoned(t *testing.T) {
	f := newFixture(t, "", nil)
	good := f.put("p/k=1/good.jsonl", `{"ok":1}`+"\n"+`{"ok":2}`+"\n")
	missing := good
	missing.Key = "p/k=1/never-written.jsonl"
	old := f.put("p/k=2/overwritten.jsonl", `{"v":"old"}`+"\n")
	f.put(old.Key, `{"v":"new"}`+"\n") // its ETag no longer matches
	poisoned := f.put("p/k=3/tainted.jsonl", `{"ok":3}`+"\n"+`{"bad":"poison"}`+"\n"+`{"ok":4}`+"\n")
	h := f.handler(f.defaults(), poison(f.sqs), nil)

	resp, err := h.Handle(t.Context(), sqsEvent(
		msg{id: "missing", body: s3Body(missing)},
		msg{id: "superseded", body: s3Body(old)},
		msg{id: "poisoned", body: s3Body(poisoned)},
		msg{id: "good", body: s3Body(good)},
		msg{id: "good+missing", body: s3Body(good, missing)}, // good is a duplicate here
	))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	// The refused record is on the failure output: its message does not
	// come back.
	if diff := cmp.Diff([]string{}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	want := wantRecords(t, good, poisoned)
	for id, rec := range want {
		if rec["bad"] != nil {
			delete(want, id)
		}
	}
	checkOutput(t, f.sqs, f.out, want)
	got := f.failed(time.Second)
	fl, ok := got[failureAt{poisoned.Key, 9}]
	if !ok || len(got) != 1 {
		t.Fatalf("failure output %v; want the record at offset 9 of %s", got, poisoned.Key)
	}
	if fl.Code != "InvalidParameterValue" || fl.Message != "injected by the test" || !fl.SenderFault || fl.Attempts != 1 ||
		fl.Version != poisoned.ETag || !strings.Contains(fl.Body, `"bad":"poison"`) {
		t.Errorf("failure %+v", fl)
	}
	s := summaryOf(t, f.summary)
	if s.Skipped[engine.SkipNotFound] != 1 || s.Skipped[engine.SkipSuperseded] != 1 || s.Skipped["duplicate"] != 2 ||
		s.RecordsFailed != 1 || s.ObjectsFailed != 0 || s.ObjectsDelivered != 2 || s.FailedMessages != 0 {
		t.Errorf("summary %+v", s)
	}
	logs := f.logs.String()
	for _, w := range []string{"deleted before it was read", "overwritten since the notification"} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs do not say %q:\n%s", w, logs)
		}
	}
}

// TestHandleRecordRefusedForGood sends an object with one record that the
// output queue can never take: too large for it, with characters SQS
// rejects, or refused by SQS as the sender's fault. That record goes to
// the failure output with its code; the others are delivered, and the
// notification is not retried, since its retry would fail the same way.
func TestHandleRecordRefusedForGood(t *testing.T) {
	big := `{"big":"` + strings.Repeat("x", 2000) + `"}`
	tests := []struct {
		name   string
		record string // the middle record of three
		sqs    func(sqsbatch.API) sqsbatch.API
		// failBad is ON_BAD_RECORD=fail, failOnError FAIL_ON_ERROR=true.
		failBad, failOnError bool
		code                 string
		attempts             int
	}{
		{name: "too large", record: big, code: string(sqsbatch.RuleTooLarge)},
		{name: "too large with ON_BAD_RECORD=fail", record: big, failBad: true, code: string(sqsbatch.RuleTooLarge)},
		{name: "invalid characters", record: `{"s":"` + "\uffff" + `"}`, code: string(sqsbatch.RuleInvalidCharacters)},
		{
			name: "refused by SQS", record: `{"s":"poison"}`, code: "InvalidParameterValue", attempts: 1,
			sqs: func(api sqsbatch.API) sqsbatch.API { return poison(api) },
		},
		{name: "too large with FAIL_ON_ERROR", record: big, failOnError: true, code: string(sqsbatch.RuleTooLarge)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "", map[string]string{"MaximumMessageSize": "1024"})
			first, last := `{"n":1}`, `{"n":3}`
			obj := f.put("r/date=2024-06-01/one.jsonl", first+"\n"+tt.record+"\n"+last+"\n")
			o := f.defaults()
			o.ingest.FailBadRecords = tt.failBad
			o.ingest.FailOnError = tt.failOnError
			var client sqsbatch.API
			if tt.sqs != nil {
				client = tt.sqs(f.sqs)
			}
			h := f.handler(o, client, nil)
			resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(obj)}))
			if tt.failOnError {
				if err == nil || !strings.Contains(err.Error(), "FAIL_ON_ERROR") {
					t.Errorf("Handle: %v; want the FAIL_ON_ERROR error", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				if diff := cmp.Diff([]string{}, failures(resp)); diff != "" {
					t.Errorf("batchItemFailures (-want +got):\n%s", diff)
				}
			}
			want := wantRecords(t, obj)
			for id, rec := range want {
				if rec["n"] == nil {
					delete(want, id)
				}
			}
			if len(want) != 2 {
				t.Fatalf("%d records expected; want the first and the last", len(want))
			}
			checkOutput(t, f.sqs, f.out, want)
			got := f.failed(time.Second)
			at := failureAt{obj.Key, int64(len(first) + 1)}
			fl, ok := got[at]
			if !ok || len(got) != 1 {
				t.Fatalf("failure output %v; want only the record at %v", got, at)
			}
			if fl.Source != "s3://"+testBucket+"/"+obj.Key || fl.Version != obj.ETag || fl.Code != tt.code || fl.Message == "" ||
				!fl.SenderFault || fl.Attempts != tt.attempts || !strings.HasPrefix(fl.Body, tt.record[:6]) || !strings.HasPrefix(fl.RunID, "s3ingest-") {
				t.Errorf("failure %+v; want code %s after %d attempts", fl, tt.code, tt.attempts)
			}
			s := summaryOf(t, f.summary)
			if s.RecordsSent != 2 || s.RecordsFailed != 1 || s.BadRecords != 0 || s.ObjectsDelivered != 1 || s.ObjectsFailed != 0 {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

func TestHandleVersionedBucket(t *testing.T) {
	f := newFixture(t, "", nil)
	if _, err := f.s3.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{
		Bucket: aws.String(testBucket), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatal(err)
	}
	v1 := f.put("v/x=1/f.jsonl", `{"version":1}`+"\n")
	v2 := f.put(v1.Key, `{"version":2}`+"\n")
	gone := f.put("v/x=2/g.jsonl", `{"version":1}`+"\n")
	f.put(gone.Key, `{"version":2}`+"\n")
	if _, err := f.s3.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: aws.String(gone.Key), VersionId: aws.String(gone.VersionID)}); err != nil {
		t.Fatal(err)
	}
	if v1.VersionID == "" || v1.VersionID == v2.VersionID {
		t.Fatalf("versions %q and %q", v1.VersionID, v2.VersionID)
	}
	h := f.handler(f.defaults(), nil, nil)
	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "v1", body: s3Body(v1)}, msg{id: "v2", body: s3Body(v2)}, msg{id: "gone", body: s3Body(gone)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, %v", failures(resp), err)
	}
	// Each notification reads its own version, even the overwritten one.
	checkOutput(t, f.sqs, f.out, wantRecords(t, v1, v2))
	if s := summaryOf(t, f.summary); s.Skipped[engine.SkipSuperseded] != 1 || s.ObjectsDelivered != 2 {
		t.Errorf("a deleted version is superseded; summary %+v", s)
	}
}

func TestHandleBadRecords(t *testing.T) {
	tests := []struct {
		name    string
		failBad bool // ON_BAD_RECORD=fail
		want    []string
	}{
		// The unreadable records go to the failure output and their
		// messages succeed; broken.bin cannot be read.
		{name: "output", want: []string{"broken"}},
		// The unreadable records go to the failure output all the same,
		// and their messages fail too.
		{name: "fail", failBad: true, want: []string{"bad", "csv", "quote", "broken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "", map[string]string{"MaximumMessageSize": "1024"})
			// Line 2 is not JSON (a bad record); line 3 is too large for
			// the queue (a record SQS refuses, not a bad one).
			bad := f.put("b/bad.jsonl", `{"a":1}`+"\n"+`{"a":`+"\n"+`{"a":"`+strings.Repeat("x", 2000)+`"}`+"\n"+`{"a":4}`+"\n")
			csvBad := f.put("b/bad.csv", "a,b\n1,2\n333\n4,5\n") // one field in row 3
			// A quote that opens a field of line 3 and never ends: line 3
			// is one bad record, and row 4 is read.
			quote := f.put("b/quote.csv", "a,b\n1,2\n3,\"x\n4,5\n")
			// No known format: a read error, so its message fails
			// whatever ON_BAD_RECORD says.
			broken := f.put("b/broken.bin", "a,b\n1,2\n")
			good := f.put("b/good.jsonl", `{"a":5}`+"\n")
			o := f.defaults()
			o.ingest.FailBadRecords = tt.failBad
			h := f.handler(o, nil, nil)
			resp, err := h.Handle(t.Context(), sqsEvent(
				msg{id: "bad", body: s3Body(bad)}, msg{id: "csv", body: s3Body(csvBad)},
				msg{id: "quote", body: s3Body(quote)}, msg{id: "broken", body: s3Body(broken)}, msg{id: "good", body: s3Body(good)},
			))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff(tt.want, failures(resp)); diff != "" {
				t.Errorf("batchItemFailures (-want +got):\n%s", diff)
			}
			// Every readable record is delivered, in both modes.
			recs := wantRecords(t, good)
			for id, r := range wantRecords(t, bad) {
				if r["a"] == 1.0 || r["a"] == 4.0 {
					recs[id] = r
				}
			}
			for id, r := range wantRecords(t, object{Object: csvBad.Object, content: "a,b\n1,2\n3,x\n4,5\n"}) {
				if r["a"] != "3" {
					recs[id] = r
				}
			}
			for id, r := range wantRecords(t, quote) {
				if r["a"] != "3" {
					recs[id] = r
				}
			}
			checkOutput(t, f.sqs, f.out, recs)

			got := f.failed(time.Second)
			wantCodes := map[failureAt]string{
				{bad.Key, 8}:    "UnreadableRecord",
				{bad.Key, 14}:   string(sqsbatch.RuleTooLarge),
				{csvBad.Key, 8}: "UnreadableRecord",
				{quote.Key, 8}:  "UnreadableRecord",
			}
			gotCodes := map[failureAt]string{}
			for at, fl := range got {
				gotCodes[at] = fl.Code
				if fl.Message == "" || fl.Version == "" {
					t.Errorf("failure %+v without message or version", fl)
				}
			}
			if diff := cmp.Diff(wantCodes, gotCodes, cmp.AllowUnexported(failureAt{})); diff != "" {
				t.Errorf("failure output (-want +got):\n%s", diff)
			}
			// broken.bin is a read error, not a bad record.
			s := summaryOf(t, f.summary)
			if s.BadRecords != 3 || s.RecordsFailed != 4 || !cmp.Equal(s.FailedBy, map[string]int{failObject: len(tt.want)}) {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

func TestHandleFIFOGroups(t *testing.T) {
	tests := []struct {
		name      string
		skipGroup bool
		want      []string
		delivered []string // messages whose records arrive (but a poisoned one)
		failedBy  map[string]int
	}{
		{
			name: "rest of batch", want: []string{"a2", "b1", "a3", "b2"}, delivered: []string{"a1"},
			failedBy: map[string]int{failObject: 1, string(partialbatch.ReasonEarlierFailure): 3},
		},
		{
			name: "skip group", skipGroup: true, want: []string{"a2", "a3"}, delivered: []string{"a1", "b1", "b2"},
			failedBy: map[string]int{failObject: 1, string(partialbatch.ReasonGroupFailed): 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, ".fifo", map[string]string{"ContentBasedDeduplication": "false"})
			// a1's second record is refused for good: it goes to the
			// failure output and a1 succeeds. a2 cannot be read (it is not
			// any known format): it fails.
			objs := map[string]object{
				"a1": f.put("f/g=a/1.jsonl", `{"n":"a1"}`+"\n"+`{"n":"poison"}`+"\n"),
				"a2": f.put("f/g=a/2.bin", "n\na2\n"),
				"b1": f.put("f/g=b/1.jsonl", `{"n":"b1"}`+"\n"),
				"a3": f.put("f/g=a/3.jsonl", `{"n":"a3"}`+"\n"),
				"b2": f.put("f/g=b/2.jsonl", `{"n":"b2"}`+"\n"),
			}
			o := f.defaults()
			o.ingest.SkipGroupOnError = tt.skipGroup
			h := f.handler(o, poison(f.sqs), nil)
			var msgs []msg
			for _, id := range []string{"a1", "a2", "b1", "a3", "b2"} {
				msgs = append(msgs, msg{id: id, body: s3Body(objs[id]), group: id[:1]})
			}
			resp, err := h.Handle(t.Context(), sqsEvent(msgs...))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff(tt.want, failures(resp)); diff != "" {
				t.Errorf("batchItemFailures (-want +got):\n%s", diff)
			}
			var delivered []object
			for _, id := range tt.delivered {
				delivered = append(delivered, objs[id])
			}
			want := wantRecords(t, delivered...)
			for id, rec := range want {
				if rec["n"] == "poison" {
					delete(want, id)
				}
			}
			got := checkOutput(t, f.sqs, f.out, want)
			// On a FIFO output queue the group is the object (the hash
			// s3ingest has always used) and the deduplication id the
			// record id.
			for _, m := range got {
				var body struct {
					File struct{ Key string } `json:"_file"`
				}
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &body); err != nil || body.File.Key == "" {
					t.Fatalf("body %s: %v", aws.ToString(m.Body), err)
				}
				id := aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)
				// The hash s3ingest has always used: consumers that key on
				// the group see no change.
				sum := sha256.Sum256([]byte(testBucket + "\x00" + body.File.Key))
				group := hex.EncodeToString(sum[:16])
				if g := engine.GroupID(dataset.Object{Bucket: testBucket, Key: body.File.Key}); g != group {
					t.Errorf("engine.GroupID of %s is %s; want s3ingest's %s", body.File.Key, g, group)
				}
				if g := m.Attributes["MessageGroupId"]; g != group {
					t.Errorf("record of %s has group %q; want %s", body.File.Key, g, group)
				}
				if d := m.Attributes["MessageDeduplicationId"]; d != id {
					t.Errorf("record %s has deduplication id %q", id, d)
				}
			}
			fails := f.failed(time.Second)
			if fl, ok := fails[failureAt{objs["a1"].Key, 11}]; !ok || len(fails) != 1 || fl.Code != "InvalidParameterValue" {
				t.Errorf("failure output %v; want a1's second record", fails)
			}
			s := summaryOf(t, f.summary)
			if !s.FIFO || s.FailedMessages != len(tt.want) || !cmp.Equal(s.FailedBy, tt.failedBy) {
				t.Errorf("summary %+v; want failed by %v", s, tt.failedBy)
			}
		})
	}
}

// slowS3 blocks a read of the key "slow.jsonl" until the read's context
// ends.
type slowS3 struct {
	engine.S3API
}

func (s slowS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if strings.HasSuffix(aws.ToString(in.Key), "slow.jsonl") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.S3API.GetObject(ctx, in, opts...)
}

func TestHandleDeadline(t *testing.T) {
	f := newFixture(t, "", nil)
	var objs []object
	for _, k := range []string{"d/1.jsonl", "d/2.jsonl", "d/3.jsonl", "d/slow.jsonl", "d/5.jsonl", "d/6.jsonl"} {
		objs = append(objs, f.put(k, `{"k":"`+k+`"}`+"\n"))
	}
	o := f.defaults()
	o.ingest.ReadConcurrency, o.ingest.DeadlineMargin = 1, time.Second
	h := f.handler(o, nil, slowS3{f.s3})
	var msgs []msg
	for i, o := range objs {
		msgs = append(msgs, msg{id: "m" + string(rune('1'+i)), body: s3Body(o)})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	dl, _ := ctx.Deadline()
	// No goroutine of the pipeline (readers, feeder, sender workers)
	// outlives the call; HTTP connections kept alive may.
	keepAlive := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	}
	resp, err := h.Handle(ctx, sqsEvent(msgs...))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	goleak.VerifyNone(t, keepAlive...)
	if left := time.Until(dl); left < 300*time.Millisecond {
		t.Errorf("Handle answered %v before the deadline; the margin is 1s", left)
	}
	// The objects read before the deadline are delivered; the slow one
	// and those not started come back with their messages.
	if diff := cmp.Diff([]string{"m4", "m5", "m6"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, objs[:3]...))
	if s := summaryOf(t, f.summary); !cmp.Equal(s.FailedBy, map[string]int{string(partialbatch.ReasonDeadline): 3}) || s.ObjectsDelivered != 3 {
		t.Errorf("summary %+v", s)
	}
}

func TestHandleHandoff(t *testing.T) {
	f := newFixture(t, "", nil)
	work := localaws.CreateQueue(t, f.sqs, "-work", nil)
	big := f.put("h/date=2024-05-05/big.jsonl", strings.Repeat(`{"n":1234567890}`+"\n", 1000)) // 17,000 bytes
	small := f.put("h/date=2024-05-05/small.jsonl", `{"n":1}`+"\n")
	o := f.defaults()
	// HANDOFF_BYTES=10KiB, FANOUT_WORK_QUEUE_URL, CHUNK_SIZE=4KiB
	o.ingest.HandoffBytes = 10 << 10
	o.runner.WorkQueueURL = work
	o.runner.Plan.ChunkSize = 4 << 10
	h := f.handler(o, nil, nil)
	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "big", body: s3Body(big)}, msg{id: "small", body: s3Body(small)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, %v", failures(resp), err)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, small))
	tasks := localaws.Drain(t, f.sqs, work, 1500*time.Millisecond)
	var covered int64
	runs := map[string]bool{}
	wantOv := worktask.Overrides{TargetQueueURL: f.out, Ingest: &worktask.IngestEncoding{
		Partitions: recordjson.PartitionsString, FileMetadata: true, EventTime: big.EventTime,
	}}
	for _, m := range tasks {
		task, err := worktask.Parse(aws.ToString(m.Body))
		if err != nil {
			t.Fatalf("task %s: %v", aws.ToString(m.Body), err)
		}
		c := task.Chunk
		raw, err := json.Marshal(task.Overrides)
		if err != nil {
			t.Fatalf("task overrides %+v: %v", task.Overrides, err)
		}
		var ov worktask.Overrides
		if err := json.Unmarshal(raw, &ov); err != nil {
			t.Fatalf("task overrides %s: %v", raw, err)
		}
		// The overrides name the output queue and s3ingest's encoding,
		// and nothing else.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatalf("task overrides %s: %v", raw, err)
		}
		if keys := slices.Sorted(maps.Keys(fields)); !cmp.Equal(keys, []string{"ingest", "targetQueueUrl"}) {
			t.Errorf("task overrides %s; want only targetQueueUrl and ingest", raw)
		}
		if c.Key != big.Key || c.ETag != big.ETag || c.Format != dataset.FormatJSONL || c.Count != 5 || !cmp.Equal(ov, wantOv) {
			t.Errorf("task %+v, overrides %s", task, raw)
		}
		covered += c.End - c.Start
		runs[task.RunID] = true
	}
	if len(tasks) != 5 || covered != big.Size {
		t.Errorf("%d tasks cover %d bytes; want 5 covering %d", len(tasks), covered, big.Size)
	}
	if len(runs) != 1 {
		t.Errorf("the tasks of one object are in runs %v; want one", runs)
	}
	if s := summaryOf(t, f.summary); s.ObjectsHandedOff != 1 || s.Tasks != 5 || s.ObjectsDelivered != 2 {
		t.Errorf("summary %+v", s)
	}
}

// TestHandoffThroughFanout hands objects off to fanout's work queue, runs
// the tasks with an engine.Runner, and checks that every record reaches the
// output queue exactly as s3ingest sends it inline: the same body bytes
// (partition fields, _file), the same attributes and, on a FIFO queue, the
// same group and deduplication id.
func TestHandoffThroughFanout(t *testing.T) {
	jsonl := strings.Repeat(`{"n":1234567890,"s":"x\u00e9"}`+"\n"+`[1,2]`+"\n"+`{"date":"mine","v":true}`+"\n", 300)
	csv := "a,b\n" + strings.Repeat("1,hello\n22,world\n", 800)
	text := strings.Repeat("a line with \"quotes\" and \t tabs\n", 400)
	tests := []struct {
		name    string
		suffix  string
		attrs   map[string]string
		set     func(o *options)
		key     string
		content string
		// check also compares with wantRecords (string partitions, _file).
		check bool
	}{
		{name: "jsonl", key: "h/date=2024-05-05/n=7/big.jsonl", content: jsonl, check: true},
		{name: "csv typed", key: "h/date=2024-05-05/n=007/ok=true/big.csv", content: csv, set: func(o *options) {
			o.ingest.Partitions = recordjson.PartitionsTyped // PARTITION_COLUMNS=typed
			o.runner.Plan.CSV.NoQuotedNewlines = true        // CSV_NO_QUOTED_NEWLINES=true
		}},
		{name: "text bare", key: "h/k=v/big.txt", content: text, set: func(o *options) {
			o.ingest.Partitions = recordjson.PartitionsOff // PARTITION_COLUMNS=false
			o.ingest.FileMetadata = false                  // FILE_METADATA=false
		}},
		{
			name: "fifo", suffix: ".fifo", attrs: map[string]string{"ContentBasedDeduplication": "false"},
			key: "h/date=2024-05-05/big.jsonl", content: jsonl, set: func(o *options) { o.ingest.Partitions = recordjson.PartitionsTyped },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.suffix, tt.attrs)
			inlineOut := localaws.CreateQueue(t, f.sqs, "-inline"+tt.suffix, tt.attrs)
			work := localaws.CreateQueue(t, f.sqs, "-work", nil)
			obj := f.put(tt.key, tt.content)
			if obj.Size <= 10<<10 {
				t.Fatalf("object of %d bytes is too small to be handed off", obj.Size)
			}
			base := f.defaults()
			base.runner.Plan.ChunkSize = 4 << 10 // CHUNK_SIZE=4KiB
			if tt.set != nil {
				tt.set(&base)
			}
			ev := sqsEvent(msg{id: "m1", body: s3Body(obj)})

			// Inline: the reference.
			inlineOpts := base
			inlineOpts.runner.Target = sqsbatch.Queue{URL: inlineOut}
			inline := f.handler(inlineOpts, nil, nil)
			if resp, err := inline.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("inline Handle: %v, %v", failures(resp), err)
			}
			summaryOf(t, f.summary)

			// Handed off, then sent by fanout.
			handoffOpts := base
			handoffOpts.ingest.HandoffBytes = 10 << 10
			handoffOpts.runner.WorkQueueURL = work
			h := f.handler(handoffOpts, nil, nil)
			if resp, err := h.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("hand-off Handle: %v, %v", failures(resp), err)
			}
			// On a FIFO queue the object's chunks are one chained task,
			// which runs them in order (see worktask.Chain).
			if s := summaryOf(t, f.summary); s.ObjectsHandedOff != 1 || tt.suffix == "" && s.Tasks < 2 || tt.suffix != "" && s.Tasks != 1 {
				t.Fatalf("hand-off summary %+v", s)
			}
			runner, err := engine.New(t.Context(), f.s3, f.sqs, engine.Options{
				// fanout's own settings, which an ingest task ignores.
				Mode:    worktask.ModeChunk,
				Mapping: worktask.Mapping{BodyField: "n"},
				Send:    sqsbatch.Options{Backoff: func(int) time.Duration { return time.Millisecond }},
				// As fanout's function gives it.
			})
			if err != nil {
				t.Fatalf("engine.New: %v", err)
			}
			tasks := localaws.Drain(t, f.sqs, work, 1500*time.Millisecond)
			var read int64
			for _, m := range tasks {
				task, err := worktask.Parse(aws.ToString(m.Body))
				if err != nil {
					t.Fatalf("task %s: %v", aws.ToString(m.Body), err)
				}
				for {
					res := runner.RunTasks(t.Context(), []worktask.Task{task}, 0)[0]
					if res.Err != nil || res.RecordsFailed != 0 {
						t.Fatalf("RunTasks %s: %+v", task.ID(), res)
					}
					read += res.RecordsRead
					if res.Continuation == nil {
						break
					}
					if c := res.Continuation; c.Chain == nil || c.Chunk.Index != task.Chunk.Index+1 || c.ResumeAt != 0 {
						t.Fatalf("RunTasks %s: continuation %+v is not the chain's next link", task.ID(), c)
					}
					task = *res.Continuation
				}
			}

			want := drainAtLeast(t, f.sqs, inlineOut, int(read))
			got := drainAtLeast(t, f.sqs, f.out, len(want))
			if tt.check {
				// _file.line is known in an object's first chunk only,
				// inline as through fanout: it is left out here.
				wantRecs, gotRecs := wantRecords(t, obj), map[string]map[string]any{}
				for _, m := range got {
					var body map[string]any
					if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &body); err != nil {
						t.Fatalf("body %s: %v", aws.ToString(m.Body), err)
					}
					gotRecs[aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)] = body
				}
				for _, recs := range []map[string]map[string]any{wantRecs, gotRecs} {
					for _, r := range recs {
						if file, ok := r["_file"].(map[string]any); ok {
							delete(file, "line")
						}
					}
				}
				if diff := cmp.Diff(wantRecs, gotRecs); diff != "" {
					t.Errorf("records on the output queue (-want +got):\n%s", diff)
				}
			}
			if len(want) == 0 || int64(len(want)) != read || len(got) != len(want) {
				t.Fatalf("%d records inline; %d read by fanout, %d on its output", len(want), read, len(got))
			}
			byID := func(msgs []types.Message) map[string]sentMessage {
				out := map[string]sentMessage{}
				for _, m := range msgs {
					s := sentMessage{Body: aws.ToString(m.Body), Attributes: map[string]string{}}
					for k, v := range m.MessageAttributes {
						s.Attributes[k] = aws.ToString(v.DataType) + ":" + aws.ToString(v.StringValue)
					}
					s.Group = m.Attributes["MessageGroupId"]
					s.Dedup = m.Attributes["MessageDeduplicationId"]
					out[s.Attributes[engine.AttrRecordID]] = s
				}
				return out
			}
			if diff := cmp.Diff(byID(want), byID(got)); diff != "" {
				t.Errorf("records sent through fanout differ from those sent inline (-inline +fanout):\n%s", diff)
			}
			if tt.suffix == ".fifo" {
				group := engine.GroupID(dataset.Object{Bucket: obj.Bucket, Key: obj.Key})
				for _, m := range got {
					if m.Attributes["MessageGroupId"] != group {
						t.Fatalf("group %q; want %s", m.Attributes["MessageGroupId"], group)
					}
				}
			}
		})
	}
}

// drainAtLeast drains a queue until n messages have come, or for at most
// 45s: under load the stand-in may hide a received batch for its
// visibility timeout (30s) before it comes again.
func drainAtLeast(t *testing.T, c *sqs.Client, queueURL string, n int) []types.Message {
	t.Helper()
	got := localaws.Drain(t, c, queueURL, 1500*time.Millisecond)
	for deadline := time.Now().Add(45 * time.Second); len(got) < n && time.Now().Before(deadline); {
		got = append(got, localaws.Drain(t, c, queueURL, 1500*time.Millisecond)...)
	}
	return got
}

// sentMessage is what a test compares of a message on an output queue.
type sentMessage struct {
	Body         string
	Attributes   map[string]string
	Group, Dedup string
}

// TestInvokeJSON goes through aws-lambda-go's JSON path, into Invoke as
// main starts it, with a Lambda SQS event as AWS writes it
// (testdata/sqs-event-sns-wrapped.json).
func TestInvokeJSON(t *testing.T) {
	f := newFixture(t, "", nil)
	content, err := os.ReadFile("testdata/sqs-event-sns-wrapped.object.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	obj := f.put("events/date=2024-01-01/a b.jsonl", string(content))
	event, err := os.ReadFile("testdata/sqs-event-sns-wrapped.json")
	if err != nil {
		t.Fatal(err)
	}
	o := f.defaults()
	h := f.handler(o, nil, nil)
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	out, err := lambda.NewHandler(h.Invoke).Invoke(ctx, event)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if want := `{"batchItemFailures":[{"itemIdentifier":"b2f2c4a4-1c1f-4e2b-9d47-0a7d3c6a1f10"}]}`; string(out) != want {
		t.Errorf("answer %s; want %s", out, want)
	}
	obj.EventTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	checkOutput(t, f.sqs, f.out, wantRecords(t, obj))
	if !strings.Contains(f.summary.String(), `"requestId":"req-1"`) {
		t.Errorf("summary without the request id: %s", f.summary)
	}
	if s := summaryOf(t, f.summary); s.TestEvents != 1 || s.FailedMessages != 1 || s.ObjectsDelivered != 1 {
		t.Errorf("summary %+v", s)
	}
}

func TestHandleMissingMessageID(t *testing.T) {
	f := newFixture(t, "", nil)
	h := f.handler(f.defaults(), nil, nil)
	_, err := h.Handle(t.Context(), sqsEvent(msg{id: "", body: "garbage"}))
	var missing *partialbatch.MissingIDError
	if !errors.As(err, &missing) {
		t.Fatalf("Handle: %v; a failed message without an id must fail the whole batch", err)
	}
	summaryOf(t, f.summary)
	resp, err := h.Handle(t.Context(), events.SQSEvent{})
	if err != nil || resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("empty batch: %+v, %v; want an empty list of failures", resp, err)
	}
}
