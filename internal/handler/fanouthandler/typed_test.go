package fanouthandler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// TestTypedMethods calls each typed method with its payload already
// decoded, as Invoke does: each sends the object's records and writes one
// summary line of its kind.
func TestTypedMethods(t *testing.T) {
	st := fanoutstack.New(t, "")
	want, ev := putEvent(t, st, "typed/a.jsonl", "r", 30, "")
	// The same bytes again (the ETag stays), and the task that reads them.
	_, task, _ := st.Records(t, ev.key, 30)
	h, logs := st.Handler(t, engine.Options{}, nil)
	ctx := t.Context()
	obj := dataset.Object{Bucket: st.Bucket, Key: ev.key}

	rep, err := h.HandleRequest(ctx, engine.Request{Source: dataset.Source{Bucket: st.Bucket, Key: ev.key}, RunID: "typed-request"})
	if err != nil || rep.RunID != "typed-request" || rep.RecordsSent != 30 {
		t.Fatalf("HandleRequest: %+v, %v; want 30 records sent in run typed-request", rep, err)
	}
	if got := st.Sent(t); !cmp.Equal(got, want) {
		t.Errorf("HandleRequest sent %v, want %v", got, want)
	}

	resp, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: task, EventSource: "aws:sqs"}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS: %+v, %v; want no failures", resp, err)
	}
	if got := st.Sent(t); !cmp.Equal(got, want) {
		t.Errorf("HandleSQS sent %v, want %v", got, want)
	}

	if rep, err := h.HandleNotification(ctx, s3event.Message{Body: ev.raw()}); err != nil || rep.RecordsSent != 30 {
		t.Fatalf("HandleNotification: %+v, %v; want 30 records sent", rep, err)
	}
	if got := st.Sent(t); !cmp.Equal(got, want) {
		t.Errorf("HandleNotification sent %v, want %v", got, want)
	}

	job := fanouthandler.BatchJob{SchemaVersion: "2.0", InvocationID: "inv-1", JobID: "job-1",
		Tasks: []fanouthandler.BatchTask{{TaskID: "t1", Object: obj}}}
	bresp, err := h.HandleBatchOperations(ctx, job)
	if err != nil || len(bresp.Results) != 1 || bresp.Results[0].ResultCode != string(fanouthandler.Succeeded) || bresp.InvocationID != "inv-1" {
		t.Fatalf("HandleBatchOperations: %+v, %v; want task t1 Succeeded", bresp, err)
	}
	if got := st.Sent(t); !cmp.Equal(got, want) {
		t.Errorf("HandleBatchOperations sent %v, want %v", got, want)
	}

	res, err := h.HandleDistributedMap(ctx, fanouthandler.MapBatch{Items: []fanouthandler.MapItem{{Bucket: st.Bucket, Key: ev.key}}})
	if err != nil || res.Items != 1 || res.Succeeded != 1 || res.RecordsSent != 30 {
		t.Fatalf("HandleDistributedMap: %+v, %v; want one item Succeeded", res, err)
	}
	if got := st.Sent(t); !cmp.Equal(got, want) {
		t.Errorf("HandleDistributedMap sent %v, want %v", got, want)
	}

	var kinds []string
	for _, s := range summaries(t, logs.String()) {
		kinds = append(kinds, s.Kind)
	}
	if want := []string{"request", "sqs", "s3-event", "batch-operations", "distributed-map"}; !cmp.Equal(kinds, want) {
		t.Errorf("summary kinds %v, want %v", kinds, want)
	}
}

// TestUndecoded: a payload that Invoke takes for one kind but cannot
// decode as it is answered by no answer and the decoder's error, and one
// summary line of that kind with the error.
func TestUndecoded(t *testing.T) {
	st := fanoutstack.New(t, "")
	h, logs := st.Handler(t, engine.Options{}, nil)
	for _, tc := range []struct {
		kind, payload, wantErr string
	}{
		{"request", `{"bucket":"lake","prefixx":"a/"}`, "prefixx"},
		{"batch-operations", `{"invocationSchemaVersion":"9.9"}`, "9.9"},
		{"distributed-map", `{"Items":[],"Extra":1}`, "Extra"},
		{"sqs", `{"Records":[{"eventSource":"aws:sqs","messageId":5}]}`, "malformed SQS event"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			logs.Reset()
			out, err := h.Invoke(t.Context(), json.RawMessage(tc.payload))
			if out != nil || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Invoke(%s) = %v, %v; want no answer and an error that says %q", tc.payload, out, err, tc.wantErr)
			}
			var lines []string
			for line := range strings.SplitSeq(logs.String(), "\n") {
				var l struct {
					Message string                   `json:"message"`
					Err     string                   `json:"err"`
					Summary fanouthandler.Invocation `json:"summary"`
				}
				if json.Unmarshal([]byte(line), &l) == nil && l.Message == "fanout invocation" {
					lines = append(lines, l.Summary.Kind+": "+l.Err)
				}
			}
			if want := []string{tc.kind + ": " + err.Error()}; !cmp.Equal(lines, want) {
				t.Errorf("summary lines %q, want %q", lines, want)
			}
		})
	}
}
