package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// Where notifications go.
const (
	notifyFanout = "fanout"
	notifyIngest = "s3ingest"
	// notesQueue is the notification queue's name.
	notesQueue = "notifications"
)

// Notification is an S3 event notification of one object that a scenario
// delivers through a notification queue, maybe twice.
type Notification struct {
	Key string
	// Twice delivers it a second time, as S3 now and then does.
	Twice bool
	// Old dates it 8 days back: a notification redriven from a DLQ.
	Old bool
}

// genNotifications picks the notifications of a scenario: to fanout or
// s3ingest, for some of its objects.
func genNotifications(rng *rand.Rand, sc *Scenario, off Off) {
	to, p := []string{"", notifyFanout, notifyIngest}[rng.IntN(3)], rng.Float64()
	if off["notifications"] {
		to = ""
	}
	sc.Settings.Notify = to
	for _, o := range sc.Objects {
		twice, old, pick := rng.Float64() < 0.3, rng.Float64() < 0.1, rng.Float64() < 0.3+p/2
		if to == "" || !pick {
			continue
		}
		sc.Notifications = append(sc.Notifications, Notification{Key: o.Key, Twice: twice && !off["duplicate-notification"], Old: old && !off["old-notification"]})
	}
}

// setUpNotify makes the notification queue, its messages and the
// s3ingest handler.
func (w *world) setUpNotify(ctx context.Context, opts engine.Options) error {
	if len(w.sc.Notifications) == 0 {
		return nil
	}
	w.notes = w.sqs.CreateQueue(notesQueue, 0, false)
	for _, n := range w.sc.Notifications {
		obj := dataset.Object{Bucket: dataBucket, Key: n.Key, ETag: w.etags[n.Key], VersionID: w.versions[n.Key]}
		b, _ := w.s3.Object(dataBucket, n.Key)
		obj.Size = int64(len(b))
		at := time.Now()
		if n.Old {
			at = at.Add(-8 * 24 * time.Hour)
		}
		note, err := s3event.Encoder{}.Encode(obj.Created(at))
		if err != nil {
			return err
		}
		body := string(note)
		w.sqs.Push(w.notes, &Message{ID: fmt.Sprintf("note-%d", w.sqs.nextSeq()), Body: body, Attributes: map[string]string{}})
		if n.Twice {
			w.sqs.Push(w.notes, &Message{ID: fmt.Sprintf("note-%d", w.sqs.nextSeq()), Body: body, Attributes: map[string]string{}})
		}
	}
	if w.sc.Settings.Notify != notifyIngest {
		return nil
	}
	// s3ingest's own runner: the same target (its output queue), failure
	// output and claims; its large objects go to fanout's work queue.
	opts.Mode = ""
	r, err := engine.New(ctx, &FaultS3{M: w.s3, F: w.faults}, NewFaultSQS(w.sqs, w.faults), opts)
	if err != nil {
		return err
	}
	io := ingesthandler.Options{DeadlineMargin: w.sc.Settings.Margin, FileMetadata: w.rng.IntN(2) == 0}
	if w.work != "" && w.rng.IntN(2) == 0 {
		io.HandoffBytes = 1 << 10
	}
	w.ingest = ingesthandler.New(r, io)
	return nil
}

// invokeNotes delivers an SQS event of notifications to their function.
func (w *world) invokeNotes(ctx context.Context, payload []byte) (any, error, *invocation) {
	if w.ingest == nil {
		return w.invoke(ctx, payload)
	}
	return w.invokeWith(ctx, payload, func(ctx context.Context, p []byte) (any, error) { return w.ingest.Invoke(ctx, p) })
}

// sqsEvent is the SQS event of msgs from queue name.
func sqsEvent(name string, msgs []*Message) []byte {
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.ID, ReceiptHandle: "rh-" + m.ID, Body: m.Body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + name,
			Attributes:     map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.Receives), "SentTimestamp": "1767225600000"},
		})
	}
	b, _ := json.Marshal(ev)
	return b
}
