package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestCSVStrayQuote sends a CSV that Excel saved (a byte order mark first)
// with two broken lines, a quote that opens a field and never ends, and a
// bare quote: as a direct request and as a task from the work queue. Each
// broken line is one UnreadableRecord on the failure output, with its
// offset and a message naming its line and the quote; every other row is
// sent, keyed by clean column names; nothing is left for a continuation.
func TestCSVStrayQuote(t *testing.T) {
	st := fanoutstack.New(t, "")
	body := "\ufeffid,name\r\n1,ann\r\n2,\"bo\r\n3,cy\r\n4,d\"x\r\n5,eve\r\n"
	st.Put(t, "stray.csv", body)
	want := []string{`{"id":"1","name":"ann"}`, `{"id":"3","name":"cy"}`, `{"id":"5","name":"eve"}`}
	wantBad := map[int64]string{
		int64(strings.Index(body, "2,")): `(line 3): CSV extraneous or missing " in quoted-field`,
		int64(strings.Index(body, "4,")): `(line 5): CSV bare " in non-quoted-field (column 4)`,
	}
	check := func(t *testing.T, runID string) {
		t.Helper()
		bodies, _ := fanoutstack.Received(localaws.Drain(t, st.SQS, st.Target, 3*time.Second))
		if diff := cmp.Diff(want, bodies); diff != "" {
			t.Errorf("target (-want +got):\n%s", diff)
		}
		got := map[int64]engine.Failure{}
		for _, m := range localaws.Drain(t, st.SQS, st.Failure, time.Second) {
			var f engine.Failure
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); err != nil {
				t.Fatal(err)
			}
			got[f.Offset] = f
		}
		if len(got) != len(wantBad) {
			t.Errorf("failure output %+v, want the %d broken lines", got, len(wantBad))
		}
		for off, msg := range wantBad {
			f := got[off]
			if f.Code != "UnreadableRecord" || !strings.Contains(f.Message, msg) || f.RunID != runID || f.Source != "s3://lake/stray.csv" {
				t.Errorf("failure at offset %d: %+v, want UnreadableRecord saying %q", off, f, msg)
			}
		}
		if msgs := localaws.Drain(t, st.SQS, st.Work, time.Second); len(msgs) != 0 {
			t.Errorf("work queue holds %d messages, want no continuation", len(msgs))
		}
	}

	t.Run("request", func(t *testing.T) {
		h, _ := st.Handler(t, engine.Options{}, nil)
		rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "key": "stray.csv", "runId": "req"})
		if rep.Queued || rep.RecordsSent != 3 || rep.RecordsFailed != 2 {
			t.Errorf("report %+v: want 3 sent and 2 failed, inline", rep)
		}
		check(t, "req")
	})
	t.Run("task", func(t *testing.T) {
		h, _ := st.Handler(t, engine.Options{}, nil)
		task := fmt.Sprintf(`{"runId":"task","chunk":{"bucket":"lake","key":"stray.csv","size":%d,"index":0,"count":1,"start":0,"end":%d,"format":"csv","csv":{"header":["id","name"],"skipFirstLine":true}}}`, len(body), len(body))
		resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "t1", Body: task, EventSource: "aws:sqs"}}})
		if len(resp.BatchItemFailures) != 0 {
			t.Errorf("failures %v: the task reads to the end", resp.BatchItemFailures)
		}
		check(t, "task")
	})
}
