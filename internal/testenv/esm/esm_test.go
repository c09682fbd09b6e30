package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

func TestPoller(t *testing.T) {
	c := sqs.NewFromConfig(localaws.SQS(t))
	dlq := localaws.CreateQueue(t, c, "-dlq", nil)
	attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, attrs.Attributes["QueueArn"])
	q := localaws.CreateQueue(t, c, "-src", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": redrive})
	for _, body := range []string{"ok-1", "poison", "ok-2", "crash"} {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	p := &Poller{Client: c, QueueURL: q, QueueARN: "arn:aws:sqs:us-east-1:000000000000:src", BatchSize: 10,
		Invoke: func(_ context.Context, ev events.SQSEvent) ([]byte, error) {
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				seen[m.Body]++
				switch m.Body {
				case "crash":
					if seen["crash"] == 1 {
						return nil, errors.New("handler crashed") // the whole batch comes back
					}
				case "poison":
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			return json.Marshal(resp)
		}}
	var total Stats
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		st, err := p.Poll(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		total.Add(st)
		if total.Deleted == 3 && seen["poison"] >= 2 && depth(t, c, dlq) > 0 {
			break
		}
	}
	if total.Deleted != 3 || total.WholeBatchFailures < 1 || seen["poison"] != 2 {
		t.Errorf("stats %+v, seen %v: want 3 deleted, a whole-batch failure, poison tried twice", total, seen)
	}
	dead := localaws.Drain(t, c, dlq, 2*time.Second)
	if len(dead) != 1 || aws.ToString(dead[0].Body) != "poison" {
		t.Errorf("DLQ holds %d messages, want the poison one", len(dead))
	}
}

func depth(t *testing.T, c *sqs.Client, url string) int {
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n)
	return n
}
