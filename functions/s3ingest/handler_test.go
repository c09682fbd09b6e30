package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
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

	"github.com/s3sqs/s3sqs/internal/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// These tests call Handle with mixed batches against an in-process S3 and
// the SQS stand-in, and assert the exact batchItemFailures and every
// record on the output queue.

func TestHandleGoodObjectsAndUnparseable(t *testing.T) {
	f := newFixture(t, "", nil)
	a := f.put("events/date=2024-01-01/hour=07/part 0001.jsonl", `{"id":1,"v":"a"}`+"\n"+`{"id":2,"v":"b","hour":"mine"}`+"\n\n"+`[3]`+"\n")
	b := f.put("events/date=2024-01-02/kind=a+b/x%y.csv", "k,v\r\n1,x\r\n2,y\r\n")
	c := f.put("events/région=Zürich/ünïcödé 日本語.jsonl", `{"n":"ü"}`+"\n")
	d := f.put("events/date=__HIVE_DEFAULT_PARTITION__/n=1/null.txt", "plain text\nsecond line\n")
	d.EventTime = d.EventTime.Truncate(time.Second) // as EventBridge writes it
	h := f.handler(f.config(nil), nil, nil)

	resp, err := h.Handle(t.Context(), sqsEvent(
		msg{id: "m1", body: s3Body(a, b)},      // raw (S3 → SQS, or SNS raw delivery), two records
		msg{id: "m2", body: "not json at all"}, // malformed
		msg{id: "m3", body: snsBody(s3Body(c))},
		msg{id: "m4", body: `{"Records":[{"eventSource":"aws:sqs"}]}`}, // JSON, but no notification
		msg{id: "m5", body: eventBridgeBody(d)},
	))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if diff := cmp.Diff([]string{"m2", "m4"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	// A JSON value that is not an object is wrapped in {"value": ...};
	// the record's own "hour" wins over the key's.
	want := wantRecords(t, a, b, c, d)
	checkOutput(t, f.sqs, f.out, want)
	s := summaryOf(t, f.summary)
	if s.Messages != 5 || s.FailedMessages != 2 || s.FailedBy[failParse] != 2 || s.Objects != 4 || s.ObjectsDelivered != 4 || s.RecordsSent != len(want) || s.Records != int64(len(want)) {
		t.Errorf("summary %+v", s)
	}
	if !strings.Contains(f.logs.String(), `"field":"hour"`) {
		t.Errorf("the clash of the record's hour with the key's is not logged:\n%s", f.logs)
	}
	if n := strings.Count(f.logs.String(), `"msg":"message is not an S3 notification`); n != 2 {
		t.Errorf("%d log lines about unparseable messages, want 2:\n%s", n, f.logs)
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
			env := map[string]string{}
			if keep {
				env[envIgnoreDeletions] = "false"
				env[envPartitionColumns] = "typed"
			}
			h := f.handler(f.config(env), nil, nil)
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
			if s.TestEvents != 2 || (s.Skipped["deletion"] == 1) == keep {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

func TestHandleMissingSupersededAndPoisoned(t *testing.T) {
	f := newFixture(t, "", nil)
	good := f.put("p/k=1/good.jsonl", `{"ok":1}`+"\n"+`{"ok":2}`+"\n")
	missing := good
	missing.Key = "p/k=1/never-written.jsonl"
	old := f.put("p/k=2/overwritten.jsonl", `{"v":"old"}`+"\n")
	f.put(old.Key, `{"v":"new"}`+"\n") // its ETag no longer matches
	poisoned := f.put("p/k=3/tainted.jsonl", `{"ok":3}`+"\n"+`{"bad":"poison"}`+"\n"+`{"ok":4}`+"\n")
	h := f.handler(f.config(nil), poisonSQS{f.sqs}, nil)

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
	if diff := cmp.Diff([]string{"poisoned"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	want := wantRecords(t, good, poisoned)
	for id, rec := range want {
		if rec["bad"] != nil {
			delete(want, id)
		}
	}
	checkOutput(t, f.sqs, f.out, want)
	s := summaryOf(t, f.summary)
	if s.Skipped[reasonNotFound] != 1 || s.Skipped[reasonSuperseded] != 1 || s.Skipped["duplicate"] != 2 || s.RecordsFailed != 1 || s.ObjectsFailed != 1 {
		t.Errorf("summary %+v", s)
	}
	logs := f.logs.String()
	for _, w := range []string{"deleted before it was read", "overwritten since the notification", "poisoned by the test"} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs do not say %q:\n%s", w, logs)
		}
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
	h := f.handler(f.config(nil), nil, nil)
	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "v1", body: s3Body(v1)}, msg{id: "v2", body: s3Body(v2)}, msg{id: "gone", body: s3Body(gone)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, %v", failures(resp), err)
	}
	// Each notification reads its own version, even the overwritten one.
	checkOutput(t, f.sqs, f.out, wantRecords(t, v1, v2))
	if s := summaryOf(t, f.summary); s.Skipped[reasonSuperseded] != 1 {
		t.Errorf("a deleted version is superseded; summary %+v", s)
	}
}

func TestHandleBadRecords(t *testing.T) {
	for _, skip := range []bool{false, true} {
		name := "fail"
		if skip {
			name = "skip"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "", map[string]string{"MaximumMessageSize": "1024"})
			bad := f.put("b/bad.jsonl", `{"a":1}`+"\n"+`{"a":`+"\n"+`{"a":"`+strings.Repeat("x", 2000)+`"}`+"\n"+`{"a":4}`+"\n")
			csvBad := f.put("b/bad.csv", "a,b\n1,2\n333\n4,5\n") // one field in row 3
			// An unterminated quote: package records cannot frame the rest
			// and ends the object with a read error, so it fails even when
			// bad records are skipped.
			broken := f.put("b/broken.csv", "a,b\n1,2\n3,\"x\n4,5\n")
			good := f.put("b/good.jsonl", `{"a":5}`+"\n")
			h := f.handler(f.config(map[string]string{envOnBadRecord: name}), nil, nil)
			resp, err := h.Handle(t.Context(), sqsEvent(
				msg{id: "bad", body: s3Body(bad)}, msg{id: "csv", body: s3Body(csvBad)},
				msg{id: "broken", body: s3Body(broken)}, msg{id: "good", body: s3Body(good)},
			))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			want := []string{"broken"}
			if !skip {
				want = []string{"bad", "csv", "broken"}
			}
			if diff := cmp.Diff(want, failures(resp), cmpEmpty); diff != "" {
				t.Errorf("batchItemFailures (-want +got):\n%s", diff)
			}
			recs := wantRecords(t, good)
			all := wantRecords(t, bad)
			for id, r := range all {
				if r["a"] == 1.0 || skip && r["a"] == 4.0 {
					recs[id] = r
				}
			}
			b := wantRecords(t, object{Object: csvBad.Object, content: "a,b\n1,2\n"})
			c := wantRecords(t, object{Object: csvBad.Object, content: "a,b\n1,2\n3,x\n4,5\n"})
			maps.Copy(recs, b)
			maps.Copy(recs, wantRecords(t, object{Object: broken.Object, content: "a,b\n1,2\n"}))
			if skip {
				for id, r := range c {
					if r["a"] == "4" {
						recs[id] = r
					}
				}
			}
			checkOutput(t, f.sqs, f.out, recs)
			// broken.csv is a read error, not a bad record.
			if s := summaryOf(t, f.summary); skip && s.BadRecords != 3 || !skip && s.BadRecords != 2 {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

var cmpEmpty = cmp.Transformer("empty", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

func TestHandleFIFOGroups(t *testing.T) {
	tests := []struct {
		name      string
		skipGroup string
		want      []string
		delivered []string // messages whose records arrive
	}{
		{name: "rest of batch", want: []string{"a2", "b1", "a3", "b2"}, delivered: []string{"a1"}},
		{name: "skip group", skipGroup: "true", want: []string{"a2", "a3"}, delivered: []string{"a1", "b1", "b2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, ".fifo", map[string]string{"ContentBasedDeduplication": "false"})
			objs := map[string]object{
				"a1": f.put("f/g=a/1.jsonl", `{"n":"a1"}`+"\n"),
				"a2": f.put("f/g=a/2.jsonl", `{"n":"a2"}`+"\n"+`{"n":"poison"}`+"\n"),
				"b1": f.put("f/g=b/1.jsonl", `{"n":"b1"}`+"\n"),
				"a3": f.put("f/g=a/3.jsonl", `{"n":"a3"}`+"\n"),
				"b2": f.put("f/g=b/2.jsonl", `{"n":"b2"}`+"\n"),
			}
			h := f.handler(f.config(map[string]string{envSkipGroupOnError: tt.skipGroup}), poisonSQS{f.sqs}, nil)
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
			maps.Copy(want, wantRecords(t, object{Object: objs["a2"].Object, content: `{"n":"a2"}` + "\n"}))
			got := checkOutput(t, f.sqs, f.out, want)
			// On a FIFO output queue the group is the object and the
			// deduplication id the record id.
			for _, m := range got {
				var body struct {
					File struct{ Key string } `json:"_file"`
				}
				_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &body)
				id := aws.ToString(m.MessageAttributes[AttrRecordID].StringValue)
				if g := m.Attributes["MessageGroupId"]; g != groupID(testBucket, body.File.Key) {
					t.Errorf("record of %s has group %q", body.File.Key, g)
				}
				if d := m.Attributes["MessageDeduplicationId"]; d != "" && d != id {
					t.Errorf("record %s has deduplication id %q", id, d)
				}
			}
			s := summaryOf(t, f.summary)
			if !s.FIFO || s.FailedMessages != len(tt.want) {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

// slowS3 blocks a read of the key "slow" until the read's context ends.
type slowS3 struct {
	dataset.GetAPI
}

func (s slowS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if strings.HasSuffix(aws.ToString(in.Key), "slow.jsonl") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.GetAPI.GetObject(ctx, in, opts...)
}

func TestHandleDeadline(t *testing.T) {
	f := newFixture(t, "", nil)
	var objs []object
	for _, k := range []string{"d/1.jsonl", "d/2.jsonl", "d/3.jsonl", "d/slow.jsonl", "d/5.jsonl", "d/6.jsonl"} {
		objs = append(objs, f.put(k, `{"k":"`+k+`"}`+"\n"))
	}
	cfg := f.config(map[string]string{envReadConcurrency: "1", envDeadlineMargin: "1s"})
	h := f.handler(cfg, nil, slowS3{f.s3})
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
	if diff := cmp.Diff([]string{"m4", "m5", "m6"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures (-want +got):\n%s", diff)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, objs[:3]...))
	if s := summaryOf(t, f.summary); s.FailedBy[failDeadline] != 3 {
		t.Errorf("summary %+v", s)
	}
}

func TestHandleHandoff(t *testing.T) {
	f := newFixture(t, "", nil)
	work := localaws.CreateQueue(t, f.sqs, "-work", nil)
	big := f.put("h/date=2024-05-05/big.jsonl", strings.Repeat(`{"n":1234567890}`+"\n", 1000)) // 17,000 bytes
	small := f.put("h/date=2024-05-05/small.jsonl", `{"n":1}`+"\n")
	cfg := f.config(map[string]string{envHandoffBytes: "10KiB", envFanoutWorkQueueURL: work, envChunkSize: "4KiB"})
	h := f.handler(cfg, nil, nil)
	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "big", body: s3Body(big)}, msg{id: "small", body: s3Body(small)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, %v", failures(resp), err)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, small))
	tasks := localaws.Drain(t, f.sqs, work, 1500*time.Millisecond)
	var covered int64
	for _, m := range tasks {
		task, err := worktask.Parse(aws.ToString(m.Body))
		if err != nil {
			t.Fatalf("task %s: %v", aws.ToString(m.Body), err)
		}
		c := task.Chunk
		var ov fanout.Overrides
		if err := json.Unmarshal(task.Overrides, &ov); err != nil {
			t.Fatalf("task overrides %s: %v", task.Overrides, err)
		}
		wantOv := fanout.Overrides{TargetQueueURL: f.out, Ingest: &fanout.IngestEncoding{
			Partitions: recordjson.PartitionsString, FileMetadata: true, EventTime: big.EventTime,
		}}
		if c.Key != big.Key || c.ETag != big.ETag || c.Format != dataset.FormatJSONL || c.Count != 5 || !cmp.Equal(ov, wantOv) {
			t.Errorf("task %+v, overrides %s", task, task.Overrides)
		}
		covered += c.End - c.Start
	}
	if len(tasks) != 5 || covered != big.Size {
		t.Errorf("%d tasks cover %d bytes; want 5 covering %d", len(tasks), covered, big.Size)
	}
	if s := summaryOf(t, f.summary); s.ObjectsHandedOff != 1 || s.Tasks != 5 {
		t.Errorf("summary %+v", s)
	}
}

// TestHandoffThroughFanout hands objects off to fanout's work queue, runs
// the tasks with a fanout.Runner, and checks that every record reaches the
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
		env     map[string]string
		key     string
		content string
		// check also compares with wantRecords (string partitions, _file).
		check bool
	}{
		{name: "jsonl", key: "h/date=2024-05-05/n=7/big.jsonl", content: jsonl, check: true},
		{name: "csv typed", key: "h/date=2024-05-05/n=007/ok=true/big.csv", content: csv, env: map[string]string{envPartitionColumns: "typed", envCSVNoQuotedNewlines: "true"}},
		{name: "text bare", key: "h/k=v/big.txt", content: text, env: map[string]string{envPartitionColumns: "false", envFileMetadata: "false"}},
		{
			name: "fifo", suffix: ".fifo", attrs: map[string]string{"ContentBasedDeduplication": "false"},
			key: "h/date=2024-05-05/big.jsonl", content: jsonl, env: map[string]string{envPartitionColumns: "typed"},
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
			env := map[string]string{envChunkSize: "4KiB"}
			for k, v := range tt.env {
				env[k] = v
			}
			ev := sqsEvent(msg{id: "m1", body: s3Body(obj)})

			// Inline: the reference.
			inlineEnv := maps.Clone(env)
			inlineEnv[envOutputQueueURL] = inlineOut
			inline := f.handler(f.config(inlineEnv), nil, nil)
			if resp, err := inline.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("inline Handle: %v, %v", failures(resp), err)
			}
			summaryOf(t, f.summary)

			// Handed off, then sent by fanout.
			handoffEnv := maps.Clone(env)
			handoffEnv[envHandoffBytes] = "10KiB"
			handoffEnv[envFanoutWorkQueueURL] = work
			h := f.handler(f.config(handoffEnv), nil, nil)
			if resp, err := h.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("hand-off Handle: %v, %v", failures(resp), err)
			}
			if s := summaryOf(t, f.summary); s.ObjectsHandedOff != 1 || s.Tasks < 2 {
				t.Fatalf("hand-off summary %+v", s)
			}
			runner, err := fanout.New(t.Context(), f.s3, f.sqs, fanout.Options{
				// fanout's own settings, which an ingest task ignores.
				Mode:    fanout.ModeChunk,
				Mapping: fanout.Mapping{BodyField: "n"},
				Send:    sqsbatch.Options{Backoff: func(int) time.Duration { return time.Millisecond }},
			})
			if err != nil {
				t.Fatalf("fanout.New: %v", err)
			}
			tasks := localaws.Drain(t, f.sqs, work, 1500*time.Millisecond)
			var read int64
			for _, m := range tasks {
				task, err := worktask.Parse(aws.ToString(m.Body))
				if err != nil {
					t.Fatalf("task %s: %v", aws.ToString(m.Body), err)
				}
				res, err := runner.RunTask(t.Context(), task)
				if err != nil || res.RecordsFailed != 0 || res.Continuation != nil {
					t.Fatalf("RunTask %s: %+v, %v", task.ID(), res, err)
				}
				read += res.RecordsRead
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
					gotRecs[aws.ToString(m.MessageAttributes[AttrRecordID].StringValue)] = body
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
					out[s.Attributes[AttrRecordID]] = s
				}
				return out
			}
			if diff := cmp.Diff(byID(want), byID(got)); diff != "" {
				t.Errorf("records sent through fanout differ from those sent inline (-inline +fanout):\n%s", diff)
			}
			if tt.suffix == ".fifo" {
				for _, m := range got {
					if m.Attributes["MessageGroupId"] != groupID(obj.Bucket, obj.Key) {
						t.Fatalf("group %q", m.Attributes["MessageGroupId"])
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

// TestInvokeJSON goes through aws-lambda-go's JSON path with a Lambda SQS
// event as AWS writes it (testdata/sqs-event-sns-wrapped.json).
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
	h := f.handler(f.config(map[string]string{envMaxFileAge: "off"}), nil, nil)
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, event)
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
	summaryOf(t, f.summary)
}

func TestHandleMissingMessageID(t *testing.T) {
	f := newFixture(t, "", nil)
	h := f.handler(f.config(nil), nil, nil)
	_, err := h.Handle(t.Context(), sqsEvent(msg{id: "", body: "garbage"}))
	if err == nil {
		t.Fatal("a failed message without an id must fail the whole batch")
	}
	resp, err := h.Handle(t.Context(), events.SQSEvent{})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("empty batch: %v, %v", resp, err)
	}
}
