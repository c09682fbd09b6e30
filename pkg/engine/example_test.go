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
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
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
