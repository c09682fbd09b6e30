package sqsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// This example sends records to a queue in another account, found by name,
// and writes the entries SQS did not accept to a failure output.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s, err := sqsbatch.New(ctx, sqs.NewFromConfig(cfg),
		sqsbatch.Queue{Name: "orders.fifo", OwnerAccountID: "111122223333"},
		sqsbatch.Options{MaxInFlight: 8})
	if err != nil {
		log.Fatal(err)
	}
	entries := []sqsbatch.Entry{{
		ID:              "orders.jsonl:1",
		Body:            `{"order":1}`,
		GroupID:         "customer-42",
		DeduplicationID: "orders.jsonl:1",
		Attributes: map[string]types.MessageAttributeValue{
			"source": {DataType: aws.String("String"), StringValue: aws.String("orders.jsonl")},
		},
	}}
	res, err := s.SendEntries(ctx, entries)
	var stop *sqsbatch.StopError
	if errors.As(err, &stop) {
		log.Printf("stopped (%s): every entry is in the failures", stop.Code)
	}
	for _, f := range res.Failures {
		fmt.Printf("failed %s: %s: %s (attempts %d, sender fault %v)\n", f.Entry.ID, f.Code, f.Message, f.Attempts, f.SenderFault)
	}
	fmt.Printf("sent %d in %d requests\n", res.Sent, res.Requests)
}
