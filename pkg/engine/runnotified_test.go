package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// notification is an S3 event notification of one record per key (as
// written, not escaped), in bucket lake, sent now.
func notification(keys ...string) string {
	var recs []string
	for _, k := range keys {
		recs = append(recs, `{"eventVersion":"2.1","eventSource":"aws:s3","eventTime":"`+time.Now().UTC().Format("2006-01-02T15:04:05.000Z")+
			`","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"lake"},"object":{"key":"`+k+`","size":8}}}`)
	}
	return `{"Records":[` + strings.Join(recs, ",") + `]}`
}

// TestRunNotifiedMessages holds RunNotified's answer per message against
// the stand-ins: one result per message in order, a message's objects in
// its order, a message that cannot be parsed failed as such (its good
// object sent all the same, and its failure not turned into its other
// object's), one with a record that cannot be read failed with that
// object's reason (ON_BAD_RECORD=fail),
// an object deleted before it was read skipped, and a repeated message id
// answered on its first copy only.
func TestRunNotifiedMessages(t *testing.T) {
	st := fanoutstack.New(t, "")
	for _, k := range []string{"a", "b", "c"} {
		st.Put(t, "in/"+k+".jsonl", `{"k":"`+k+`"}`+"\n")
	}
	// Not Parquet: its footer cannot be read.
	st.Put(t, "in/d.parquet", "not parquet")
	st.Put(t, "in/e.parquet", "not parquet")
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []s3event.Message{
		{ID: "two", Body: notification("in/a.jsonl", "in/b.jsonl")},
		{ID: "not-json", Body: "not json"},
		{ID: "mixed", Body: notification("in/bad%zz.jsonl", "in/c.jsonl", "in/d.parquet")},
		{ID: "broken", Body: notification("in/e.parquet")},
		{ID: "gone", Body: notification("in/gone.jsonl")},
		{ID: "two", Body: notification("in/a.jsonl")},
	}
	res := r.RunNotified(t.Context(), msgs, engine.NotifiedOptions{Ingest: &worktask.IngestEncoding{Partitions: recordjson.PartitionsOff}, FailBadRecords: true})
	type object struct {
		Key, Skipped, Failed string
		Sent                 int64
	}
	type message struct {
		Failed  string
		Objects []object
	}
	var got []message
	for _, m := range res.Messages {
		g := message{Failed: m.Failed}
		for _, o := range m.Objects {
			g.Objects = append(g.Objects, object{o.Object.Key, o.Skipped, o.Failed, o.RecordsSent})
		}
		got = append(got, g)
	}
	want := []message{
		{Objects: []object{{Key: "in/a.jsonl", Sent: 1}, {Key: "in/b.jsonl", Sent: 1}}},
		{Failed: engine.FailParse},
		{Failed: engine.FailParse, Objects: []object{{Key: "in/c.jsonl", Sent: 1}, {Key: "in/d.parquet", Failed: engine.FailBadRecord}}},
		{Failed: engine.FailBadRecord, Objects: []object{{Key: "in/e.parquet", Failed: engine.FailBadRecord}}},
		{Objects: []object{{Key: "in/gone.jsonl", Skipped: engine.SkipNotFound}}},
		{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if m := res.Messages[2]; m.Err == nil || strings.Contains(m.Err.Error(), "parquet") {
		t.Errorf("the mixed message's error %v; want its parse error only", m.Err)
	}
	if m := res.Messages[3]; m.Err == nil || !strings.Contains(m.Err.Error(), "s3://lake/in/e.parquet: bad-record: ") {
		t.Errorf("the broken message's error %v; want its object's, named", m.Err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Reason != s3event.SkipDuplicate {
		t.Errorf("skipped %+v; want the repeated a as a duplicate", res.Skipped)
	}
	if bodies := st.Sent(t); len(bodies) != 3 {
		t.Errorf("target holds %v; want a, b and c once each", bodies)
	}
}
