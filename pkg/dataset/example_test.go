package dataset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
)

// This example lists a Spark output prefix, plans each object into 8 MiB
// chunks, and reads the records of each chunk. In fanout the chunks travel
// as SQS messages and many invocations read them in parallel.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := s3.NewFromConfig(cfg)
	planner := dataset.NewPlanner(client, dataset.PlanOptions{})
	src := dataset.Source{Bucket: "lake", Prefix: "exports/2024/", Suffix: ".jsonl.gz"}
	for obj, err := range dataset.Objects(ctx, client, src) {
		if err != nil {
			log.Fatal(err)
		}
		chunks, err := planner.Plan(ctx, obj)
		if err != nil {
			log.Fatal(err)
		}
		for _, ch := range chunks {
			task, _ := json.Marshal(ch) // small enough for an SQS message
			fmt.Println(ch.ID(), len(task))
			for rec, err := range records.Read(ctx, client, ch, records.Options{}) {
				if err != nil {
					log.Print(err) // a *records.RecordError names object and offset
					continue
				}
				fmt.Println(rec.Offset, string(rec.Value))
			}
		}
	}
}
