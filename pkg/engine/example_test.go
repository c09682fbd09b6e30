package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// This example sends every record of the JSON Lines objects under a prefix
// to a queue from this process, as `s3sqs fanout` does, and writes the
// records SQS refused, with the reason, to a failure queue.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := engine.New(ctx, s3.NewFromConfig(cfg), sqs.NewFromConfig(cfg), engine.Options{
		Target:          sqsbatch.Queue{Name: "orders"},
		FailureQueueURL: "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-failures",
	})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := r.Run(ctx, engine.Request{
		RunID:  "orders-2026-12-04",
		Source: dataset.Source{Bucket: "exports", Prefix: "orders/2026/12/04/", Suffix: ".jsonl"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run %s: %d objects, %d records sent, %d failed, in %d requests\n",
		rep.RunID, rep.Objects, rep.RecordsSent, rep.RecordsFailed, rep.Requests)
}

// This example plans a dataset onto a work queue, where workers (the
// fanout function, or RunTasks in a program of yours) send its chunks, many
// at once.
func ExampleRunner_Run_queue() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := engine.New(ctx, s3.NewFromConfig(cfg), sqs.NewFromConfig(cfg), engine.Options{
		Target:       sqsbatch.Queue{Name: "orders"},
		WorkQueueURL: "https://sqs.eu-west-1.amazonaws.com/111122223333/s3sqs-work",
	})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := r.Run(ctx, engine.Request{Source: dataset.Source{Bucket: "exports", Manifest: "s3://exports/manifests/orders.csv"}, Queue: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run %s: %d tasks queued for %d objects\n", rep.RunID, rep.TasksQueued, rep.Objects)
}

// This example sends the records of the objects an SQS message of S3
// notifications names, as s3ingest does: with the key's partition values
// and the _file object, and says what became of each object.
func ExampleRunner_RunNotified() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := engine.New(ctx, s3.NewFromConfig(cfg), sqs.NewFromConfig(cfg), engine.Options{
		Target: sqsbatch.Queue{URL: "https://sqs.eu-west-1.amazonaws.com/111122223333/events"},
	})
	if err != nil {
		log.Fatal(err)
	}
	body := `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","eventTime":"2026-12-05T10:00:00.000Z",` +
		`"s3":{"bucket":{"name":"lake"},"object":{"key":"events/date%3D2026-12-05/a.jsonl","size":2048,"eTag":"9b2cf535f27731c974343645a3985328"}}}]}`
	enc := &worktask.IngestEncoding{Partitions: recordjson.PartitionsString, FileMetadata: true}
	res := r.RunNotified(ctx, []s3event.Message{{ID: "m-1", Body: body}}, engine.NotifiedOptions{Ingest: enc})
	for _, m := range res.Messages {
		if m.Failed != "" {
			fmt.Printf("message failed (%s): %v; it must come back\n", m.Failed, m.Err)
		}
		for _, o := range m.Objects {
			switch {
			case o.Failed != "":
				fmt.Printf("%s/%s failed (%s): %v\n", o.Object.Bucket, o.Object.Key, o.Failed, o.Err)
			case o.Skipped != "":
				fmt.Printf("%s/%s skipped: %s\n", o.Object.Bucket, o.Object.Key, o.Skipped)
			default:
				fmt.Printf("%s/%s: %d records sent\n", o.Object.Bucket, o.Object.Key, o.RecordsSent)
			}
		}
	}
}
