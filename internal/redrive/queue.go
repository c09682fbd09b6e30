package redrive

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queueReader receives every message of a queue once, holding each (hidden
// for the visibility timeout) until it is deleted or released. A message
// that comes back within the run, because its visibility timeout ran out,
// is not yielded again: its newer receipt handle replaces the old one.
type queueReader struct {
	sqs  SQSAPI
	url  string
	vis  time.Duration
	log  *slog.Logger
	held map[string]string // message id → latest receipt handle
	// wait is how long a receive waits for messages; two empty ones end
	// the run.
	wait int32
}

func (r *Redriver) newQueueReader(url string) *queueReader {
	return &queueReader{sqs: r.sqs, url: url, vis: r.opts.Visibility, log: r.log, held: map[string]string{}, wait: 1}
}

// receive yields the messages not seen before, up to ten at a time, until
// the queue has no more for this run: two receives in a row bring none,
// and no message is in flight but the ones held here. A message hidden by
// a receive whose answer was lost (fauxqs loses some) comes back after its
// visibility timeout: while the queue counts more messages in flight than
// are held here, receiving goes on, up to a visibility timeout after the
// last new message.
//
// On a FIFO queue a message held here holds back the later messages of its
// group, as SQS delivers a group in order: they are not received in this
// run.
func (q *queueReader) receive(ctx context.Context) iter.Seq2[[]types.Message, error] {
	return func(yield func([]types.Message, error) bool) {
		empty := 0
		lastNew := time.Now()
		for {
			out, err := q.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl:                    aws.String(q.url),
				MaxNumberOfMessages:         10,
				WaitTimeSeconds:             q.wait,
				VisibilityTimeout:           int32(q.vis / time.Second),
				MessageAttributeNames:       []string{"All"},
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			})
			if err != nil {
				yield(nil, fmt.Errorf("receive from %s: %w", q.url, err))
				return
			}
			var fresh []types.Message
			for _, m := range out.Messages {
				id := aws.ToString(m.MessageId)
				_, seen := q.held[id]
				q.held[id] = aws.ToString(m.ReceiptHandle)
				if !seen {
					fresh = append(fresh, m)
				}
			}
			if len(fresh) > 0 {
				empty, lastNew = 0, time.Now()
				if !yield(fresh, nil) {
					return
				}
				continue
			}
			if empty++; empty < 2 {
				continue
			}
			if time.Since(lastNew) > q.vis || !q.inFlightElsewhere(ctx) {
				return
			}
			empty = 0
		}
	}
}

// inFlightElsewhere reports whether the queue has more messages in flight
// than this run holds.
func (q *queueReader) inFlightElsewhere(ctx context.Context) bool {
	_, inFlight, err := q.counts(ctx)
	return err == nil && inFlight > int64(len(q.held))
}

// counts returns the queue's approximate visible and in-flight messages.
func (q *queueReader) counts(ctx context.Context) (visible, inFlight int64, err error) {
	out, err := q.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, 0, err
	}
	visible, _ = strconv.ParseInt(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], 10, 64)
	inFlight, _ = strconv.ParseInt(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], 10, 64)
	return visible, inFlight, nil
}

// left returns the messages the queue holds, by its approximate counts,
// or nil when they cannot be read.
func (q *queueReader) left(ctx context.Context) *int64 {
	v, f, err := q.counts(ctx)
	if err != nil {
		return nil
	}
	return new(v + f)
}

// deleteAttempts bounds the DeleteMessageBatch requests per message.
const deleteAttempts = 3

// delete deletes the messages with ids, and returns why each one that
// could not be deleted was not.
func (q *queueReader) delete(ctx context.Context, ids []string) map[string]string {
	failed := map[string]string{}
	pending := ids
	for attempt := 1; len(pending) > 0 && attempt <= deleteAttempts; attempt++ {
		var retry []string
		for start := 0; start < len(pending); start += 10 {
			batch := pending[start:min(start+10, len(pending))]
			entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
			for i, id := range batch {
				entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(q.held[id])}
			}
			out, err := q.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
			if err != nil {
				for _, id := range batch {
					failed[id] = err.Error()
				}
				retry = append(retry, batch...)
				continue
			}
			bad := map[int]string{}
			for _, f := range out.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				bad[i] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
			}
			for i, id := range batch {
				if why, ok := bad[i]; ok {
					failed[id] = why
					retry = append(retry, id)
					continue
				}
				delete(failed, id)
				delete(q.held, id)
			}
		}
		pending = retry
		if len(pending) > 0 && ctx.Err() == nil {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
	}
	return failed
}

// release makes the messages still held visible again at once, so that
// the next run, or another consumer, finds them without waiting for their
// visibility timeout.
func (q *queueReader) release(ctx context.Context) {
	ids := slices.Collect(maps.Keys(q.held))
	for start := 0; start < len(ids); start += 10 {
		batch := ids[start:min(start+10, len(ids))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, id := range batch {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(q.held[id]), VisibilityTimeout: 0}
		}
		out, err := q.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		switch {
		case err != nil:
			q.log.WarnContext(ctx, "messages not released; they come back after their visibility timeout", "queue", q.url, "messages", len(batch), "err", err)
		case len(out.Failed) > 0:
			q.log.WarnContext(ctx, "messages not released; they come back after their visibility timeout", "queue", q.url, "messages", len(out.Failed),
				"err", aws.ToString(out.Failed[0].Code)+": "+aws.ToString(out.Failed[0].Message))
		}
	}
	clear(q.held)
}
