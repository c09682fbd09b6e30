package sqsextended_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// This example sends records of any size to a queue, offloading those too
// large for it to S3, and reads them back on the other side.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s3c, sqsc := s3.NewFromConfig(cfg), sqs.NewFromConfig(cfg)

	// Sender side: offload what does not fit, then send with sqsbatch.
	sender, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{Name: "orders"}, sqsbatch.Options{})
	if err != nil {
		log.Fatal(err)
	}
	off, err := sqsextended.NewOffloader(s3c, sqsextended.OffloaderOptions{
		Bucket:         "my-offload-bucket",
		Prefix:         "orders/",
		MaxMessageSize: sender.MaxMessageSize(),
	})
	if err != nil {
		log.Fatal(err)
	}
	records := map[string]string{"orders.jsonl:1": `{"order":1}`, "orders.jsonl:2": `{"order":2,"pdf":"...2 MiB..."}`}
	var entries []sqsbatch.Entry
	for id, body := range records {
		e, offloaded, err := off.Entry(ctx, id, sqsbatch.Entry{ID: id, Body: body})
		if err != nil {
			log.Printf("record %s goes to the failure output: %v", id, err)
			continue
		}
		if offloaded {
			log.Printf("record %s offloaded to %s", id, off.Pointer(id, body))
		}
		entries = append(entries, e)
	}
	if _, err := sender.SendEntries(ctx, entries); err != nil {
		log.Fatal(err)
	}

	// Receiver side: resolve each message, delete its payload when done.
	out, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(sender.QueueURL()),
		MessageAttributeNames: sqsextended.AttributeNames(),
	})
	if err != nil {
		log.Fatal(err)
	}
	// Payloads are deleted after processing, so a second copy of a record
	// (SQS delivers one now and then) finds its payload gone: skip it.
	r := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{MaxPayloadBytes: 16 << 20, IgnorePayloadNotFound: true})
	deleteMessage := func(m types.Message) error {
		_, err := sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(sender.QueueURL()), ReceiptHandle: m.ReceiptHandle})
		return err
	}
	for _, m := range out.Messages {
		body, p, err := r.Resolve(ctx, m)
		var tooLarge *sqsextended.TooLargeError
		switch {
		case errors.Is(err, sqsextended.ErrSkip):
			log.Printf("message %s: %v; a copy was processed before", aws.ToString(m.MessageId), err)
			if err := deleteMessage(m); err != nil {
				log.Print(err)
			}
			continue
		case errors.As(err, &tooLarge):
			log.Printf("message %s cannot be read: %v", aws.ToString(m.MessageId), err)
			continue
		case err != nil:
			log.Printf("message %s: %v; it will be received again", aws.ToString(m.MessageId), err)
			continue
		}
		fmt.Println(len(body)) // process the record
		if err := deleteMessage(m); err != nil {
			log.Print(err)
			continue
		}
		if p != nil {
			if err := r.Delete(ctx, *p); err != nil {
				log.Print(err) // a lifecycle rule on the bucket removes it later
			}
		}
	}
}

func ExamplePointer_Body() {
	p := sqsextended.Pointer{Bucket: "my-offload-bucket", Key: "orders/Zürich.json"}
	fmt.Println(p.Body())
	// Output:
	// ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"my-offload-bucket","s3Key":"orders/Zürich.json"}]
}

func ExampleParsePointer() {
	for _, body := range []string{
		// Python's json.dumps
		`["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b", "s3Key": "Z\u00fcrich"}]`,
		// Java client 1.0
		`["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"b","s3Key":"k1"}]`,
		// a bare object, as .NET ports write it
		`{"S3Key":"k2","S3BucketName":"b"}`,
		// not a pointer
		`{"order":1}`,
	} {
		p, err := sqsextended.ParsePointer(body)
		if err != nil {
			fmt.Println("not a pointer")
			continue
		}
		fmt.Println(p)
	}
	// Output:
	// s3://b/Zürich
	// s3://b/k1
	// s3://b/k2
	// not a pointer
}
