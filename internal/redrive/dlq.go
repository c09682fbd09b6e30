package redrive

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// MaxNativeRate is the highest rate StartMessageMoveTask accepts, in
// messages per second.
const MaxNativeRate = 500

// SourceError reports that the source queue of a DLQ cannot be told: no
// queue, or several, have it as their dead-letter queue. Name the queue to
// move to instead.
type SourceError struct {
	DLQ     string
	Sources []string
	// Err is why the queues could not be listed, if they could not.
	Err error
}

func (e *SourceError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("redrive: the source queue of %s cannot be found: %v", e.DLQ, e.Err)
	case len(e.Sources) == 0:
		return fmt.Sprintf("redrive: no queue has %s as its dead-letter queue", e.DLQ)
	}
	return fmt.Sprintf("redrive: %d queues have %s as their dead-letter queue (%s); a message does not say which it came from",
		len(e.Sources), e.DLQ, strings.Join(e.Sources, ", "))
}

// Unwrap returns the listing's error.
func (e *SourceError) Unwrap() error { return e.Err }

// SourceQueue returns the URL of the one queue whose RedrivePolicy names
// the DLQ at dlqURL: by ListDeadLetterSourceQueues; where that action is
// not available (fauxqs, or a role without sqs:ListDeadLetterSourceQueues),
// by the RedrivePolicy of every queue ListQueues lists, and else by the
// DLQ's RedriveAllowPolicy when it allows one queue only. It fails with a
// *SourceError when there is not exactly one.
func (r *Redriver) SourceQueue(ctx context.Context, dlqURL string) (string, error) {
	attrs, err := r.queueAttributes(ctx, dlqURL, types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedriveAllowPolicy)
	if err != nil {
		return "", &engine.QueueError{Role: engine.RoleDeadLetter, Queue: dlqURL, Err: err}
	}
	sources, listErr := r.deadLetterSources(ctx, dlqURL)
	if listErr != nil {
		r.log.InfoContext(ctx, "ListDeadLetterSourceQueues is not available; looking at each queue's RedrivePolicy", "err", listErr)
		if sources, err = r.scanSources(ctx, attrs[string(types.QueueAttributeNameQueueArn)]); err != nil {
			return "", &SourceError{DLQ: dlqURL, Err: errors.Join(listErr, err)}
		}
		if len(sources) == 0 {
			if url, ok := r.allowedSource(ctx, attrs[string(types.QueueAttributeNameRedriveAllowPolicy)]); ok {
				sources = []string{url}
			}
		}
	}
	if len(sources) != 1 {
		return "", &SourceError{DLQ: dlqURL, Sources: sources}
	}
	return sources[0], nil
}

func (r *Redriver) deadLetterSources(ctx context.Context, dlqURL string) ([]string, error) {
	var urls []string
	in := &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL), MaxResults: aws.Int32(1000)}
	for {
		out, err := r.sqs.ListDeadLetterSourceQueues(ctx, in)
		if err != nil {
			return nil, err
		}
		urls = append(urls, out.QueueUrls...)
		if out.NextToken == nil {
			return urls, nil
		}
		in.NextToken = out.NextToken
	}
}

// scanSources lists every queue and returns those whose RedrivePolicy's
// deadLetterTargetArn is dlqARN.
func (r *Redriver) scanSources(ctx context.Context, dlqARN string) ([]string, error) {
	var found []string
	in := &sqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	for {
		out, err := r.sqs.ListQueues(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, url := range out.QueueUrls {
			attrs, err := r.queueAttributes(ctx, url, types.QueueAttributeNameRedrivePolicy)
			if err != nil {
				continue // deleted meanwhile, or not ours to read
			}
			var p struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			}
			if json.Unmarshal([]byte(attrs[string(types.QueueAttributeNameRedrivePolicy)]), &p) == nil && p.DeadLetterTargetArn == dlqARN {
				found = append(found, url)
			}
		}
		if out.NextToken == nil {
			slices.Sort(found)
			return found, nil
		}
		in.NextToken = out.NextToken
	}
}

// allowedSource returns the one queue a RedriveAllowPolicy allows
// ("redrivePermission": "byQueue" with one source queue ARN), when it
// allows one.
func (r *Redriver) allowedSource(ctx context.Context, policy string) (string, bool) {
	var p struct {
		RedrivePermission string   `json:"redrivePermission"`
		SourceQueueArns   []string `json:"sourceQueueArns"`
	}
	if json.Unmarshal([]byte(policy), &p) != nil || p.RedrivePermission != "byQueue" || len(p.SourceQueueArns) != 1 {
		return "", false
	}
	// arn:aws:sqs:region:account:name
	parts := strings.Split(p.SourceQueueArns[0], ":")
	if len(parts) != 6 {
		return "", false
	}
	out, err := r.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5]), QueueOwnerAWSAccountId: aws.String(parts[4])})
	if err != nil {
		return "", false
	}
	return aws.ToString(out.QueueUrl), true
}

func (r *Redriver) queueAttributes(ctx context.Context, url string, names ...types.QueueAttributeName) (map[string]string, error) {
	out, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// DLQ moves the messages of the dead-letter queue at dlqURL to the queue
// at toURL (by default its source queue, see SourceQueue): each message's
// body, message attributes and, between FIFO queues, its group and
// deduplication ids (the message id when it has none), at most Rate a
// second. A message is deleted from the DLQ only once the queue accepted
// it; one that was not accepted stays, and is made visible again when the
// run ends. With native, SQS's own StartMessageMoveTask moves them instead
// (see NativeMove).
func (r *Redriver) DLQ(ctx context.Context, dlqURL, toURL string, native bool) (*Summary, error) {
	if toURL == "" && !native {
		var err error
		if toURL, err = r.SourceQueue(ctx, dlqURL); err != nil {
			return newTally(r.opts, dlqURL, "").summary(), err
		}
	}
	if native {
		return r.NativeMove(ctx, dlqURL, toURL)
	}
	t := newTally(r.opts, dlqURL, toURL)
	attrs, err := r.queueAttributes(ctx, dlqURL, types.QueueAttributeNameFifoQueue, types.QueueAttributeNameApproximateNumberOfMessages)
	if err != nil {
		return t.summary(), &engine.QueueError{Role: engine.RoleDeadLetter, Queue: dlqURL, Err: err}
	}
	fifo := attrs[string(types.QueueAttributeNameFifoQueue)] == "true"
	target, err := sqsbatch.New(ctx, r.sqs, sqsbatch.Queue{URL: toURL}, r.opts.Send)
	if err != nil {
		return t.summary(), &engine.QueueError{Role: engine.RoleTarget, Queue: toURL, Err: err}
	}
	if target.FIFO() != fifo {
		return t.summary(), fmt.Errorf("redrive: %s is %s and %s is not: messages move between queues of one type", dlqURL, kind(fifo), toURL)
	}
	n, _ := strconv.Atoi(attrs[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	t.expect(n)
	q := r.newQueueReader(dlqURL)
	defer func() { t.sum.Left = q.left(context.WithoutCancel(ctx)) }()
	defer q.release(context.WithoutCancel(ctx))
	pace := newPace(r.opts.Rate)
	for msgs, err := range q.receive(ctx) {
		if err != nil {
			return t.summary(), err
		}
		items := make([]Item, len(msgs))
		entries := make([]sqsbatch.Entry, len(msgs))
		for i, m := range msgs {
			items[i] = Item{ID: aws.ToString(m.MessageId), From: dlqURL, To: toURL}
			entries[i] = moved(m, fifo)
		}
		if r.opts.DryRun {
			for _, it := range items {
				it.Outcome = WouldSend
				t.add(it)
			}
			continue
		}
		if err := pace.wait(ctx, len(msgs)); err != nil {
			return t.summary(), err
		}
		res, _ := target.SendEntries(ctx, entries)
		failed := map[int]*sqsbatch.EntryError{}
		for _, f := range res.Failures {
			failed[f.Seq] = f
		}
		var del []string
		for i := range items {
			if f, ok := failed[i]; ok {
				items[i].Outcome, items[i].Reason = Failed, f.Code+": "+f.Message
				continue
			}
			items[i].Outcome = Sent
			del = append(del, items[i].ID)
		}
		undeleted := q.delete(ctx, del)
		for _, it := range items {
			if why, ok := undeleted[it.ID]; ok {
				it.Outcome, it.Reason = Failed, "moved, but not deleted from the dead-letter queue ("+why+"); the next redrive moves it again"
			}
			t.add(it)
		}
	}
	return t.summary(), nil
}

func kind(fifo bool) string {
	if fifo {
		return "a FIFO queue"
	}
	return "a standard queue"
}

// moved returns the entry that moves message m: its body and message
// attributes, and on FIFO queues its group and deduplication ids.
func moved(m types.Message, fifo bool) sqsbatch.Entry {
	e := sqsbatch.Entry{Body: aws.ToString(m.Body)}
	if len(m.MessageAttributes) > 0 {
		e.Attributes = m.MessageAttributes
	}
	if fifo {
		e.GroupID = m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		e.DeduplicationID = cmp.Or(m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)], aws.ToString(m.MessageId))
	}
	return e
}

// nativePoll is how often NativeMove asks how far the move task is.
const nativePoll = 2 * time.Second

// NativeMove has SQS move the DLQ's messages with StartMessageMoveTask,
// to toURL or, when it is empty, each to the queue it came from, at Rate
// (at most MaxNativeRate; zero lets SQS choose), and waits for the task to
// end. SQS moves each message at least once and deletes it from the DLQ
// after; only one move task per DLQ runs at a time. In a dry run it starts
// nothing and counts the messages it would move.
func (r *Redriver) NativeMove(ctx context.Context, dlqURL, toURL string) (*Summary, error) {
	t := newTally(r.opts, dlqURL, toURL)
	attrs, err := r.queueAttributes(ctx, dlqURL, types.QueueAttributeNameQueueArn, types.QueueAttributeNameApproximateNumberOfMessages)
	if err != nil {
		return t.summary(), &engine.QueueError{Role: engine.RoleDeadLetter, Queue: dlqURL, Err: err}
	}
	n, _ := strconv.Atoi(attrs[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	t.expect(n)
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(attrs[string(types.QueueAttributeNameQueueArn)])}
	if toURL != "" {
		to, err := r.queueAttributes(ctx, toURL, types.QueueAttributeNameQueueArn)
		if err != nil {
			return t.summary(), &engine.QueueError{Role: engine.RoleTarget, Queue: toURL, Err: err}
		}
		in.DestinationArn = aws.String(to[string(types.QueueAttributeNameQueueArn)])
	}
	if r.opts.Rate > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(min(r.opts.Rate, MaxNativeRate)))
	}
	if r.opts.DryRun {
		t.sum.Total, t.sum.WouldSend = n, n
		t.prog.Done.Store(int64(n))
		return t.summary(), nil
	}
	if _, err := r.sqs.StartMessageMoveTask(ctx, in); err != nil {
		if awserr.Unsupported(err) {
			return t.summary(), fmt.Errorf("redrive: this SQS endpoint has no StartMessageMoveTask (fauxqs has none); run without -native to move the messages in this process: %w", err)
		}
		return t.summary(), fmt.Errorf("redrive: StartMessageMoveTask: %w", err)
	}
	tick := time.NewTicker(nativePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return t.summary(), fmt.Errorf("redrive: stopped waiting; the move task goes on in SQS (CancelMessageMoveTask stops it): %w", ctx.Err())
		case <-tick.C:
		}
		out, err := r.sqs.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: in.SourceArn, MaxResults: aws.Int32(1)})
		if err != nil || len(out.Results) == 0 {
			continue
		}
		task := out.Results[0]
		moved := int(task.ApproximateNumberOfMessagesMoved)
		if task.ApproximateNumberOfMessagesToMove != nil {
			t.prog.Total.Store(*task.ApproximateNumberOfMessagesToMove)
		}
		t.prog.Done.Store(int64(moved))
		t.prog.Sent.Store(int64(moved))
		switch aws.ToString(task.Status) {
		case "RUNNING", "CANCELLING":
			continue
		case "COMPLETED":
			t.sum.Total, t.sum.Sent = moved, moved
			return t.summary(), nil
		default: // FAILED, CANCELLED
			toMove := int(aws.ToInt64(task.ApproximateNumberOfMessagesToMove))
			t.sum.Sent = moved
			t.sum.Failed = max(toMove-moved, 0)
			t.sum.Total = t.sum.Sent + t.sum.Failed
			t.sum.Items = append(t.sum.Items, Item{ID: aws.ToString(task.TaskHandle), From: dlqURL, To: toURL, Outcome: Failed,
				Reason: fmt.Sprintf("the move task ended %s: %s; the messages not moved stay on the DLQ", aws.ToString(task.Status), aws.ToString(task.FailureReason))})
			return t.summary(), nil
		}
	}
}
