package partialbatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

// A Lambda handler for an SQS event source: decode the payload, process each
// message, answer with the messages that failed.
func ExampleProcessor_Process() {
	payload := []byte(`{"Records":[
		{"messageId":"m1","body":"ok","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:q"},
		{"messageId":"m2","body":"bad","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:q"},
		{"messageId":"m3","body":"ok","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:q"}]}`)
	ev, err := partialbatch.Decode(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	work := partialbatch.PerMessage(2, func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("cannot read the body")
		}
		return nil
	})
	resp, res, err := partialbatch.New(partialbatch.Options{}).Process(context.Background(), ev, work)
	if err != nil {
		fmt.Println(err) // return it to Lambda: the whole batch comes back
		return
	}
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	for _, f := range res.Failures {
		fmt.Printf("%s failed (%s): %v\n", f.MessageID, f.Reason, f.Err)
	}
	// Output:
	// {"batchItemFailures":[{"itemIdentifier":"m2"}]}
	// m2 failed (handler): cannot read the body
}

// A function wired to the wrong trigger fails loudly.
func ExampleDecode() {
	_, err := partialbatch.Decode([]byte(`{"Records":[]}`))
	fmt.Println(err)
	// Output:
	// partialbatch: the payload is not an SQS event, got: no records (Records is empty); check the function's trigger
}
