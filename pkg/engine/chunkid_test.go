package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// refuseQueue fails every send to one queue while refuse is set, as an
// unreachable work queue does.
type refuseQueue struct {
	sqsbatch.API
	url    string
	refuse atomic.Bool
}

func (q *refuseQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if q.refuse.Load() && aws.ToString(in.QueueUrl) == q.url {
		return nil, errors.New("refuseQueue: the work queue is unreachable")
	}
	return q.API.SendMessageBatch(ctx, in, opts...)
}

// TestChunkIDsCoverTheirRecords runs a chunk-mode task to a FIFO queue
// whose read breaks half-way: the records read go out in a short message,
// and the task fails, its continuation refused by the work queue. The
// task's message, delivered again, reads the chunk whole into a longer
// message that starts at the same record. SQS delivers both, under
// different record and deduplication ids, so no record is lost; a third
// attempt, and a redrive of the chunk (RunRecords), pack the same records
// again under the same id, and the queue drops them as duplicates.
func TestChunkIDsCoverTheirRecords(t *testing.T) {
	st := fanoutstack.New(t, ".fifo")
	values, task, size := st.Records(t, "cut.jsonl", 300)
	parsed, err := worktask.Parse(task)
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(values))
	for i, v := range values {
		lines[i] = fmt.Sprintf(`{"value":%q}`, v)
	}
	broken := &s3fault.CutAt{S3API: st.S3, At: int64(size / 2)}
	st.S3API = broken
	var work *refuseQueue
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeChunk}, func(api sqsbatch.API) sqsbatch.API {
		work = &refuseQueue{API: api, url: st.Work}
		return work
	})
	work.refuse.Store(true)
	msg := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "t1", Body: task, EventSource: "aws:sqs"}}}
	if resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), msg); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v: a task whose continuation cannot be queued fails", resp.BatchItemFailures)
	}
	broken.Heal()
	work.refuse.Store(false)
	if resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), msg); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v on the task's second delivery", resp.BatchItemFailures)
	}
	msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("%d messages on the FIFO target, want the short one and the whole chunk", len(msgs))
	}
	short, whole := msgs[0], msgs[1]
	n := int(broken.At / 17) // lines are 17 bytes
	if aws.ToString(short.Body) != strings.Join(lines[:n], "\n") || attr(short, engine.AttrFirst) != "0" || attr(short, engine.AttrCount) != strconv.Itoa(n) {
		t.Errorf("short message (first %s, count %s) does not hold the %d records read before the cut", attr(short, engine.AttrFirst), attr(short, engine.AttrCount), n)
	}
	if aws.ToString(whole.Body) != strings.Join(lines, "\n") || attr(whole, engine.AttrFirst) != "0" || attr(whole, engine.AttrCount) != "300" {
		t.Errorf("second message (first %s, count %s) is not the whole chunk", attr(whole, engine.AttrFirst), attr(whole, engine.AttrCount))
	}
	shortID, wholeID := attr(short, engine.AttrRecordID), attr(whole, engine.AttrRecordID)
	if shortID == wholeID {
		t.Errorf("the short and the whole message have one record id, %s", shortID)
	}
	if shortID != engine.ChunkMessageID(parsed.Chunk.Object, 0, int64(n-1)*17, n) {
		t.Errorf("short message's record id %s is not ChunkMessageID of its records", shortID)
	}

	// The same records packed again: the same id, which the FIFO queue
	// takes for a duplicate of the message it has.
	if resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), msg); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v on the task's third delivery", resp.BatchItemFailures)
	}
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, FailureQueueURL: st.Failure, Mode: worktask.ModeChunk})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := r.RunRecords(t.Context(), parsed, []int64{0}); res.Err != nil || res.Messages != 1 || res.RecordsSent != 300 {
		t.Fatalf("redrive of the chunk: %+v; want its 300 records in one message", res)
	}
	if again := localaws.Drain(t, st.SQS, st.Target, 2*time.Second); len(again) != 0 {
		t.Errorf("%d messages on the target after the same records were packed again (record id %s): want none, the queue drops them as duplicates of %s",
			len(again), attr(again[0], engine.AttrRecordID), wholeID)
	}
}

func attr(m types.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// TestFailureRecordID sends a record SQS refuses, in record and in chunk
// mode: its failure names the record id its message had, which a redrive
// sends it under, whether that id is the record's or the message's.
func TestFailureRecordID(t *testing.T) {
	for _, mode := range []worktask.Mode{worktask.ModeRecord, worktask.ModeChunk} {
		t.Run(string(mode), func(t *testing.T) {
			st := fanoutstack.New(t, "")
			st.Put(t, "r.txt", "bad\n")
			refuse := func(api sqsbatch.API) sqsbatch.API {
				return &sqsfault.Client{API: api, EntryErr: sqsfault.SenderFault("InvalidParameterValue", func(body string) bool { return body == "bad" })}
			}
			h, _ := st.Handler(t, engine.Options{Mode: mode}, refuse)
			if rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "r.txt"}); rep.RecordsFailed != 1 {
				t.Fatalf("report %+v; want the record failed", rep)
			}
			head, err := dataset.Head(t.Context(), st.S3, st.Bucket, "r.txt", "")
			if err != nil {
				t.Fatal(err)
			}
			want := engine.RecordID(head, 0)
			if mode == worktask.ModeChunk {
				want = engine.ChunkMessageID(head, 0, 0, 1)
			}
			msgs := localaws.Drain(t, st.SQS, st.Failure, time.Second)
			if len(msgs) != 1 {
				t.Fatalf("%d failures, want 1", len(msgs))
			}
			var f engine.Failure
			if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &f); err != nil || f.RecordID != want {
				t.Errorf("failure %s (%v); want record id %s", aws.ToString(msgs[0].Body), err, want)
			}
		})
	}
}
