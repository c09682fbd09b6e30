// Package esm emulates Lambda's SQS event source mapping for local runs: it
// long-polls a queue, invokes a function with each batch, deletes the
// messages that succeeded and leaves the reported failures to come back
// after their visibility timeout, so that the queue's redrive policy moves
// poison messages to its DLQ as on AWS.
package esm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// API is the part of the SQS client the poller uses.
type API interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// InvokeFunc invokes the function with an SQS event and returns its raw
// answer. An error means the invocation failed as a whole: a handler
// error, a crash or a timeout.
type InvokeFunc func(ctx context.Context, ev events.SQSEvent) ([]byte, error)

// Poller polls one queue for one function. Like the Lambda service with a
// single concurrent invocation, it runs one batch at a time.
type Poller struct {
	Client   API
	QueueURL string
	// QueueARN is the event source ARN put in the event.
	QueueARN string
	// BatchSize is the most messages per invocation (1 to 10); zero means 10.
	BatchSize int32
	// WaitSeconds is the long-poll wait; zero means 1.
	WaitSeconds int32
	Invoke      InvokeFunc
}

// Stats counts what Poll did.
type Stats struct {
	Invocations int
	Received    int
	Deleted     int
	// Failed counts messages left on the queue: reported in
	// batchItemFailures, or in a batch that failed as a whole.
	Failed int
	// WholeBatchFailures counts invocations that failed as a whole.
	WholeBatchFailures int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Invocations += o.Invocations
	s.Received += o.Received
	s.Deleted += o.Deleted
	s.Failed += o.Failed
	s.WholeBatchFailures += o.WholeBatchFailures
}

// Poll receives one batch and, if there is one, invokes the function with
// it. It returns what it did; an error is a failure to talk to SQS.
func (p *Poller) Poll(ctx context.Context) (Stats, error) {
	var st Stats
	out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         p.batchSize(),
		WaitTimeSeconds:             max(p.WaitSeconds, 1),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return st, fmt.Errorf("esm: receive from %s: %w", p.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return st, nil
	}
	st.Received = len(out.Messages)
	ev := Event(out.Messages, p.QueueARN)
	st.Invocations = 1
	answer, err := p.Invoke(ctx, ev)
	failed := map[string]bool{}
	whole := err != nil
	if !whole {
		var resp events.SQSEventResponse
		if jerr := json.Unmarshal(answer, &resp); jerr != nil {
			whole = true
		}
		for _, f := range resp.BatchItemFailures {
			// Lambda fails the whole batch when an identifier is empty or
			// not a message of the batch.
			if !hasMessage(out.Messages, f.ItemIdentifier) {
				whole = true
			}
			failed[f.ItemIdentifier] = true
		}
	}
	if whole {
		st.WholeBatchFailures = 1
		st.Failed = len(out.Messages)
		return st, nil
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		if failed[aws.ToString(m.MessageId)] {
			st.Failed++
			continue
		}
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(del) > 0 {
		res, err := p.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del})
		if err != nil {
			return st, fmt.Errorf("esm: delete from %s: %w", p.QueueURL, err)
		}
		st.Deleted = len(res.Successful)
	}
	return st, nil
}

func (p *Poller) batchSize() int32 {
	if p.BatchSize <= 0 {
		return 10
	}
	return min(p.BatchSize, 10)
}

func hasMessage(msgs []types.Message, id string) bool {
	for _, m := range msgs {
		if id != "" && aws.ToString(m.MessageId) == id {
			return true
		}
	}
	return false
}

// Event builds the SQS event Lambda would send for msgs.
func Event(msgs []types.Message, queueARN string) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, a := range m.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{StringValue: a.StringValue, BinaryValue: a.BinaryValue, DataType: aws.ToString(a.DataType)}
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId:         aws.ToString(m.MessageId),
			ReceiptHandle:     aws.ToString(m.ReceiptHandle),
			Body:              aws.ToString(m.Body),
			Md5OfBody:         aws.ToString(m.MD5OfBody),
			Attributes:        m.Attributes,
			MessageAttributes: attrs,
			EventSource:       "aws:sqs",
			EventSourceARN:    queueARN,
			AWSRegion:         "us-east-1",
		})
	}
	return ev
}
