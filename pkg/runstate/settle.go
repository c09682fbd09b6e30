package runstate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/claims"
)

// API is the part of the DynamoDB client a Table calls.
type API interface {
	claims.API
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// outcomeAttr holds the outcome of a delivery, as Settle records it on the
// delivery's item.
const outcomeAttr = "outcome"

// replaceable are the outcomes a later settlement of the same delivery
// replaces, each with the counter it takes back: SQS delivers a failed
// message again, and a run stopped by a cancel is started again.
var replaceable = []struct {
	outcome string
	back    Counters
}{
	{"failed", Counters{TasksFailed: -1}},
	{"stopped", Counters{TasksStopped: -1}},
}

// conflictTries is how many times Settle tries a transaction that another
// one on the run record cancelled (TransactionConflict), which the SDK
// does not retry: every task of a run settles on that record.
const conflictTries = 8

// Settle adds c to the run's counters for one delivery of a task: the
// message named by delivery, its SQS message id. A run so counts what
// became of each task message, however often SQS delivers it.
//
// c's task counters (TasksDone, TasksFailed, TasksSkipped, TasksHeld,
// TasksCancelled and TasksStopped; at most one of them not 0) are how the
// delivery ended; none means the task goes on in a continuation, which
// settles it. The first delivery of a message to settle records its
// outcome and adds c in one transaction. A later delivery adds only c's
// other counters (the work it did again), except that a message that
// failed or was stopped, and now ends otherwise, moves from TasksFailed or
// TasksStopped to its new outcome: the task is not failed once a later
// attempt has done it.
//
// A task not from a queue (a run sent in one process) may be settled with
// its task id as the delivery, so that the same run started again counts
// each task once. An empty delivery adds c as Add does.
func (t *Table) Settle(ctx context.Context, runID, delivery string, c Counters) error {
	if delivery == "" {
		return t.Add(ctx, runID, c)
	}
	outcome := outcomeOf(c)
	first := t.outcomeUpdate(runID, delivery, outcome, "attribute_not_exists(#outcome)")
	err := t.transact(ctx, runID, first, c)
	if !conditionFailed(err) {
		return err
	}
	for _, r := range replaceable {
		if r.outcome == outcome {
			continue
		}
		again := t.outcomeUpdate(runID, delivery, outcome, "#outcome = :was")
		again.ExpressionAttributeValues[":was"] = str(r.outcome)
		moved := c
		moved.TasksFailed += r.back.TasksFailed
		moved.TasksStopped += r.back.TasksStopped
		if err = t.transact(ctx, runID, again, moved); !conditionFailed(err) {
			return err
		}
	}
	work := c
	work.TasksDone, work.TasksFailed, work.TasksSkipped, work.TasksHeld, work.TasksCancelled, work.TasksStopped = 0, 0, 0, 0, 0, 0
	return t.Add(ctx, runID, work)
}

// AddOnce adds c to the run's counters unless an AddOnce of the run with
// the same key has added them before, and reports whether it did. The key
// and the counters are written in one transaction. A run sent in one
// process, started again with its id, so counts its planning once.
func (t *Table) AddOnce(ctx context.Context, runID, key string, c Counters) (bool, error) {
	first := t.outcomeUpdate(runID, key, "added", "attribute_not_exists(#outcome)")
	err := t.transact(ctx, runID, first, c)
	if conditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// outcomeOf names the outcome c's task counters say.
func outcomeOf(c Counters) string {
	switch {
	case c.TasksDone != 0:
		return "done"
	case c.TasksFailed != 0:
		return "failed"
	case c.TasksSkipped != 0:
		return "skipped"
	case c.TasksHeld != 0:
		return "held"
	case c.TasksCancelled != 0:
		return "cancelled"
	case c.TasksStopped != 0:
		return "stopped"
	}
	return "continued"
}

// outcomeUpdate is the update that records outcome on the item of a
// delivery of the run, if cond (on #outcome) holds.
func (t *Table) outcomeUpdate(runID, delivery, outcome, cond string) types.Update {
	return types.Update{
		TableName:                aws.String(t.name),
		Key:                      key(deliveryKey(runID, delivery)),
		UpdateExpression:         aws.String("SET #outcome = :outcome, #expires = :expires"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#outcome": outcomeAttr, "#expires": claims.ExpiresAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":outcome": str(outcome), ":expires": num(t.now().Add(t.ttl).Unix()),
		},
	}
}

// transact makes the update of a delivery's item and the addition of c to
// the run's counters in one transaction.
func (t *Table) transact(ctx context.Context, runID string, outcome types.Update, c Counters) error {
	items := []types.TransactWriteItem{{Update: &outcome}}
	if add, ok := t.addition(runID, c); ok {
		items = append(items, types.TransactWriteItem{Update: &add})
	}
	for try := 1; ; try++ {
		_, err := t.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil || conditionFailed(err) {
			return err
		}
		if !conflicted(err) || try == conflictTries {
			return fmt.Errorf("runstate: settle a delivery of run %s in table %s: %w", runID, t.name, err)
		}
		// Up to about 10 ms, then 20, 40...: other deliveries' settlements
		// end in a few milliseconds each.
		wait := time.Duration(rand.Int64N(int64(10*time.Millisecond) << (try - 1)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("runstate: settle a delivery of run %s in table %s: %w", runID, t.name, err)
		case <-time.After(wait):
		}
	}
}

// conditionFailed reports whether err is a transaction cancelled because
// its first item's condition failed.
func conditionFailed(err error) bool {
	var tce *types.TransactionCanceledException
	return errors.As(err, &tce) && len(tce.CancellationReasons) > 0 &&
		aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed"
}

// conflicted reports whether err is a transaction cancelled because
// another one wrote an item of it at the same time.
func conflicted(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		var tc *types.TransactionConflictException
		return errors.As(err, &tc)
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "TransactionConflict" {
			return true
		}
	}
	return false
}

func deliveryKey(runID, delivery string) string {
	return runKey(runID) + "#delivery#" + delivery
}
