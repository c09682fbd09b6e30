package claims_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/s3sqs/s3sqs/pkg/claims"
)

// This example delivers the records of one notified object version once,
// however many times its notification arrives: a second delivery finds the
// claim done or held, and a retry after a partial delivery resumes where
// the last one stopped.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	table := claims.NewTable(dynamodb.NewFromConfig(cfg), "s3sqs-claims", claims.TableOptions{})

	key := claims.ObjectKey("logs", "2026/12/04/events.jsonl", "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")
	c, err := table.Acquire(ctx, key, time.Now().Add(5*time.Minute))
	switch {
	case errors.Is(err, claims.ErrDone):
		return // delivered before: nothing to do
	case errors.Is(err, claims.ErrHeld):
		log.Fatal("another invocation is delivering it: retry after its lease")
	case err != nil:
		log.Fatal(err)
	}

	// deliver sends the object's records from offset on and returns the
	// offset of the first one it did not send.
	deliver := func(ctx context.Context, offset int64) (int64, error) { return offset, nil }
	next, err := deliver(ctx, c.ResumeAt)
	if err != nil {
		// The next holder starts at next, not at the beginning.
		if err := table.Release(ctx, c, next); err != nil {
			log.Print(err) // the lease runs out instead
		}
		log.Fatal(err)
	}
	if err := table.Done(ctx, c); errors.Is(err, claims.ErrLost) {
		log.Print("the lease ran out and another holder took the claim over")
	}
	fmt.Println("delivered from", c.ResumeAt, "taken over:", c.TakenOver)
}
