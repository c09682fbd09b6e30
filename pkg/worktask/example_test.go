package worktask_test

import (
	"fmt"
	"log"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// This example writes the first chunk task of an object that a FIFO run
// reads in order, as the planner puts it on the work queue, and reads it
// back as a worker does; the worker's next link of the chain is the
// object's second chunk.
func Example() {
	obj := dataset.Object{Bucket: "logs", Key: "2026/12/04/events.jsonl", Size: 20 << 20, ETag: `"9b2cf535f27731c974343645a3985328"`}
	task := worktask.Task{
		RunID:     "backfill-2026-12",
		Chunk:     dataset.Chunk{Object: obj, Count: 3, End: 8 << 20, Format: dataset.FormatJSONL},
		Overrides: &worktask.Overrides{Mode: worktask.ModeRecord, MaxRate: worktask.SettingOf("500")},
		Chain:     &worktask.Chain{Step: 8 << 20, Total: obj.Size},
	}
	body, err := task.Marshal()
	if err != nil {
		log.Fatal(err)
	}

	got, err := worktask.Parse(body)
	if err != nil {
		log.Fatal(err) // a *worktask.MalformedError: the message goes to the DLQ
	}
	fmt.Println(got.RunID, got.Chunk.URI(), got.Chunk.Start, got.Chunk.End, got.Overrides.MaxRate)
	if next, ok := got.Next(); ok {
		fmt.Println("then chunk", next.Chunk.Index, "of", next.Chunk.Count, next.Chunk.Start, next.Chunk.End)
	}
	// Output:
	// backfill-2026-12 s3://logs/2026/12/04/events.jsonl 0 8388608 500
	// then chunk 1 of 3 8388608 16777216
}
