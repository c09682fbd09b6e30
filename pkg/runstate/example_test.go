package runstate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// This example is an operator's view of a run: it reads how far the run
// is, lowers its rate for every invocation that sends it, and pauses it.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	runs := runstate.NewTable(dynamodb.NewFromConfig(cfg), "s3sqs-claims", runstate.TableOptions{})

	run, err := runs.Get(ctx, "backfill-2026-12")
	if err != nil {
		log.Fatal(err) // runstate.ErrNoRun before its first task settles
	}
	fmt.Printf("%s: %d of %d tasks done, %d records sent, %d failed\n",
		run.State, run.TasksDone, run.TasksPlanned, run.RecordsSent, run.RecordsFailed)

	if _, err := runs.SetMaxRate(ctx, run.ID, 200); err != nil {
		log.Fatal(err)
	}
	if _, err := runs.SetState(ctx, run.ID, runstate.StatePaused); err != nil {
		log.Fatal(err)
	}
}

// This example is what each invocation of a run does before it sends: it
// waits for its share of the run-wide budget of messages per second and
// stops sending when the run is paused or cancelled.
func ExamplePacer() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	runs := runstate.NewTable(dynamodb.NewFromConfig(cfg), "s3sqs-claims", runstate.TableOptions{})
	p := runstate.NewPacer(runs, "backfill-2026-12", runstate.PacerOptions{MaxRate: 500})

	for range 100 { // batches of ten messages
		if state, err := p.State(ctx); err != nil || state != runstate.StateRunning {
			log.Printf("stopping: %s %v", state, err)
			return
		}
		if err := p.Wait(ctx, 10); err != nil {
			log.Fatal(err)
		}
		// send the batch
	}
}
