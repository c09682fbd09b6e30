package sqsbatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Queue names the queue a [Sender] sends to.
type Queue struct {
	// URL is the queue URL. When empty, Name is resolved with GetQueueUrl.
	URL string
	// Name is the queue name, used when URL is empty.
	Name string
	// OwnerAccountID is the account that owns the queue named by Name, for
	// a queue in another account. Empty means the caller's account.
	OwnerAccountID string
	// MaxMessageSize, when above zero, is used as the queue's
	// MaximumMessageSize instead of reading the queue's attributes, for
	// callers without sqs:GetQueueAttributes. Whether the queue is FIFO is
	// then taken from its name (".fifo"), and content-based deduplication is
	// assumed, leaving that check to SQS.
	MaxMessageSize int
}

// API is the part of the SQS client a [Sender] uses. *sqs.Client
// satisfies it.
type API interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ API = (*sqs.Client)(nil)

// resolve finds the queue URL and the limits that validation needs.
func (q Queue) resolve(ctx context.Context, client API) (string, queueLimits, error) {
	url := q.URL
	if url == "" {
		if q.Name == "" {
			return "", queueLimits{}, errors.New("sqsbatch: queue has neither URL nor Name")
		}
		in := &sqs.GetQueueUrlInput{QueueName: aws.String(q.Name)}
		if q.OwnerAccountID != "" {
			in.QueueOwnerAWSAccountId = aws.String(q.OwnerAccountID)
		}
		out, err := client.GetQueueUrl(ctx, in)
		if err != nil {
			return "", queueLimits{}, &StopError{Code: codeOf(err), Err: fmt.Errorf("get URL of queue %q: %w", q.Name, err)}
		}
		url = aws.ToString(out.QueueUrl)
	}
	if q.MaxMessageSize > 0 {
		return url, queueLimits{
			maxMessageSize:  min(q.MaxMessageSize, MaxBatchBytes),
			fifo:            strings.HasSuffix(url, ".fifo"),
			contentBasedDup: true,
		}, nil
	}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameMaximumMessageSize,
			types.QueueAttributeNameFifoQueue,
			types.QueueAttributeNameContentBasedDeduplication,
		},
	})
	if err != nil {
		return "", queueLimits{}, &StopError{Code: codeOf(err), Err: fmt.Errorf("get attributes of queue %s: %w", url, err)}
	}
	attrs := out.Attributes
	size, err := strconv.Atoi(attrs[string(types.QueueAttributeNameMaximumMessageSize)])
	if err != nil || size <= 0 {
		return "", queueLimits{}, fmt.Errorf("sqsbatch: queue %s has MaximumMessageSize %q", url, attrs[string(types.QueueAttributeNameMaximumMessageSize)])
	}
	return url, queueLimits{
		maxMessageSize:  min(size, MaxBatchBytes),
		fifo:            attrs[string(types.QueueAttributeNameFifoQueue)] == "true",
		contentBasedDup: attrs[string(types.QueueAttributeNameContentBasedDeduplication)] == "true",
	}, nil
}
