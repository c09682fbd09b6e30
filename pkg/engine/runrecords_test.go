package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestRunRecords sends three records of a task by their offsets: only
// they arrive, with the record ids a whole run gives them, and an offset
// inside a record is reported missing.
func TestRunRecords(t *testing.T) {
	st := fanoutstack.New(t, "")
	_, body, _ := st.Records(t, "some.jsonl", 50)
	task, err := worktask.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, FailureQueueURL: st.Failure, Mapping: fanoutstack.SparkMapping})
	if err != nil {
		t.Fatal(err)
	}
	const line = 17 // {"value":"r000"} and a newline
	res, missing := r.RunRecords(t.Context(), task, []int64{40 * line, 3 * line, 17 * line, 17*line + 5})
	if res.Err != nil || res.RecordsSent != 3 || res.RecordsRead != 3 {
		t.Fatalf("result %+v; want 3 records read and sent", res)
	}
	if !cmp.Equal(missing, []int64{17*line + 5}) {
		t.Errorf("missing %v, want the offset inside record 17", missing)
	}
	msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
	got := map[string]string{}
	for _, m := range msgs {
		got[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)
	}
	// The task pins no version: its record ids are built without one.
	obj := dataset.Object{Bucket: "lake", Key: "some.jsonl"}
	want := map[string]string{}
	for _, i := range []int64{3, 17, 40} {
		want[fmt.Sprintf("r%03d", i)] = engine.RecordID(obj, i*line)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
}
