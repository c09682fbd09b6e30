package localaws

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var notName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// CreateQueue creates a queue named after the test and suffix (".fifo"
// makes a FIFO queue), with attrs, and deletes it when the test ends.
func CreateQueue(tb testing.TB, c *sqs.Client, suffix string, attrs map[string]string) string {
	tb.Helper()
	name := fmt.Sprintf("%.40s-%d", notName.ReplaceAllString(tb.Name(), "-"), time.Now().UnixNano()%1e12)
	all := map[string]string{}
	for k, v := range attrs {
		all[k] = v
	}
	if strings.HasSuffix(suffix, ".fifo") {
		all["FifoQueue"] = "true"
	}
	name += suffix
	out, err := c.CreateQueue(tb.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: all})
	if err != nil {
		tb.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	tb.Cleanup(func() {
		_, _ = c.DeleteQueue(tb.Context(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return url
}

// Drain receives and deletes every message of the queue until none has
// come for quiet, or until 60s pass, and returns them in the order
// received. Messages are received with a 2s visibility timeout, so that a
// receive whose answer is lost on the way (fauxqs does this now and then)
// hides its messages only briefly: when the queue still has messages in
// flight once quiet has passed, the drain waits for them once, past their
// visibility timeout.
func Drain(tb testing.TB, c *sqs.Client, url string, quiet time.Duration) []types.Message {
	tb.Helper()
	var got []types.Message
	deadline := time.Now().Add(60 * time.Second)
	last := time.Now()
	waited := false
	for time.Now().Before(deadline) {
		if time.Since(last) >= quiet {
			if _, inFlight, err := Depth(tb.Context(), c, url); waited || err != nil || inFlight == 0 {
				break
			}
			waited, last, quiet = true, time.Now(), max(quiet, 2500*time.Millisecond)
		}
		out, err := c.ReceiveMessage(tb.Context(), &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             1,
			VisibilityTimeout:           2,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			tb.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		last = time.Now()
		got = append(got, out.Messages...)
		del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
		}
		if _, err := c.DeleteMessageBatch(tb.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
			tb.Fatalf("delete: %v", err)
		}
	}
	return got
}

// Bodies returns the bodies of msgs, sorted.
func Bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	slices.Sort(out)
	return out
}

// Depth returns how many messages a queue holds visible and in flight.
func Depth(ctx context.Context, c *sqs.Client, url string) (visible, inFlight int, err error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, 0, err
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// ReceiveAll drains a queue for an accounting, deleting what it receives,
// for at most limit. fauxqs now and then loses a receive's answer, hiding
// its messages for their visibility timeout (2 s here): the drain ends
// only after four receives in a row came back empty, longer than that.
func ReceiveAll(ctx context.Context, c *sqs.Client, url string, limit time.Duration) []types.Message {
	var (
		got   []types.Message
		empty int
	)
	for deadline := time.Now().Add(limit); time.Now().Before(deadline) && empty < 4; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 2})
		if err != nil || len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		got = append(got, out.Messages...)
	}
	return got
}

// PurgeEvery purges url every d until the returned function is called, so
// that the stand-in, which keeps every message in memory, does not hold a
// benchmark's millions.
func PurgeEvery(ctx context.Context, c *sqs.Client, url string, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)})
			}
		}
	}()
	return func() {
		cancel()
		<-ended
	}
}
