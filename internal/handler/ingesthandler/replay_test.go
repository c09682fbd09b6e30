package ingesthandler

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestIngestReplay replays a prefix with fanout's notification mode, in
// each format, to a queue, and hands the queue's messages to s3ingest as
// the SQS event Lambda would build of them: every record of every object
// under the prefix arrives once, and nothing fails.
func TestIngestReplay(t *testing.T) {
	for _, format := range s3event.Formats {
		t.Run(string(format), func(t *testing.T) {
			f := newFixture(t, "", nil)
			objs := []object{
				f.put("events/date=2024-01-01/part 0001.jsonl", `{"id":1}`+"\n"+`{"id":2}`+"\n"),
				f.put("events/date=2024-01-02/kind=a+b/x%y.csv", "k,v\r\n1,x\r\n2,y\r\n"),
				f.put("events/ünïcödé 日本語.jsonl", `{"n":"ü"}`+"\n"),
			}
			f.put("elsewhere/not-replayed.jsonl", `{"id":9}`+"\n")
			replayQueue := localaws.CreateQueue(t, f.sqs, "-replay", nil)
			runner, err := engine.New(t.Context(), f.s3, f.sqs, engine.Options{
				Target: sqsbatch.Queue{URL: replayQueue}, FailureQueueURL: f.failure,
				Mode: worktask.ModeNotification, Notification: engine.Notification{Format: format, Region: localaws.Region},
			})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := runner.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: testBucket, Prefix: "events/"}})
			if err != nil || rep.RecordsSent != int64(len(objs)) {
				t.Fatalf("replay: %+v, %v; want %d notifications", rep, err, len(objs))
			}
			var msgs []msg
			times := map[string]time.Time{}
			for i, m := range localaws.Drain(t, f.sqs, replayQueue, time.Second) {
				body := aws.ToString(m.Body)
				n, err := s3event.Parse([]byte(body))
				if err != nil || len(n.Objects) != 1 {
					t.Fatalf("replayed message %s: %+v, %v", body, n, err)
				}
				times[n.Objects[0].Key] = n.Objects[0].EventTime
				msgs = append(msgs, msg{id: fmt.Sprintf("m%d", i), body: body})
			}
			for i := range objs {
				// _file.eventTime is the replayed notification's.
				objs[i].EventTime = times[objs[i].Key]
			}
			resp, err := f.handler(f.defaults(), nil, nil).Handle(t.Context(), sqsEvent(msgs...))
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle: %v, failures %v", err, failures(resp))
			}
			checkOutput(t, f.sqs, f.out, wantRecords(t, objs...))
			if got := f.failed(time.Second); len(got) != 0 {
				t.Errorf("failure output holds %v", got)
			}
		})
	}
}

// TestReplayedAgainWithClaims replays an object's version to s3ingest
// twice, with its claims on: the second replay is a run of its own and
// sends the records again, while a notification of the first replay sent
// again (a retry, a resumed run) is the same notification, skipped as done.
func TestReplayedAgainWithClaims(t *testing.T) {
	f := newFixture(t, "", nil)
	a := f.put("events/date=2024-01-01/a.jsonl", `{"id":1}`+"\n"+`{"id":2}`+"\n"+`{"id":3}`+"\n")
	client, table := localaws.ClaimsTable(t)
	o := f.defaults()
	o.runner.Claims = claims.NewTable(client, table, claims.TableOptions{})
	h := f.handler(o, nil, nil)
	replayQueue := localaws.CreateQueue(t, f.sqs, "-replay", nil)
	runner, err := engine.New(t.Context(), f.s3, f.sqs, engine.Options{
		Target: sqsbatch.Queue{URL: replayQueue}, FailureQueueURL: f.failure,
		Mode: worktask.ModeNotification, Notification: engine.Notification{Region: localaws.Region},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range []string{"replay-1", "replay-2", "replay-1"} {
		if _, err := runner.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: testBucket, Key: a.Key}, RunID: run}); err != nil {
			t.Fatal(err)
		}
		ms := localaws.Drain(t, f.sqs, replayQueue, time.Second)
		if len(ms) != 1 {
			t.Fatalf("replay %s: %d notifications, want 1", run, len(ms))
		}
		resp, err := h.Handle(t.Context(), sqsEvent(msg{id: fmt.Sprintf("m%d", i), body: aws.ToString(ms[0].Body)}))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("replay %s: %v, %v", run, resp.BatchItemFailures, err)
		}
		want := int64(3)
		if i == 2 {
			want = 0 // replay-1's notification again
		}
		if s := summaryOf(t, f.summary); s.RecordsSent != want {
			t.Errorf("replay %s (#%d): %d records sent, want %d; summary %+v", run, i+1, s.RecordsSent, want, s)
		}
	}
	if n := len(localaws.Drain(t, f.sqs, f.out, time.Second)); n != 6 {
		t.Errorf("%d records arrived, want 6: the object's three, for each of the two replays", n)
	}
}
