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
	"github.com/s3sqs/s3sqs/pkg/internal/ddbattr"
)

// API is the part of the DynamoDB client a Table calls.
type API interface {
	claims.API
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// addedAttr marks a key AddOnce has added; noteAttr keeps its note.
const (
	addedAttr = "added"
	noteAttr  = "note"
)

// AddOnce adds c to the run's counters unless an AddOnce of the run with
// the same key has added them before, and reports whether it did: a
// planning made again (a retried request or step, a run started again
// with its id) so counts once. The key, note and the counters are written
// in one transaction: a planning is never counted twice, nor lost. note
// is kept with the key for Once: what the counted planning covered, which
// a planning made again must cover too.
func (t *Table) AddOnce(ctx context.Context, runID, k string, c Counters, note string) (bool, error) {
	record := types.Update{
		TableName:                 aws.String(t.name),
		Key:                       key(onceKey(runID, k)),
		UpdateExpression:          aws.String("SET #added = :true, #note = :note, #expires = :expires"),
		ConditionExpression:       aws.String("attribute_not_exists(#added)"),
		ExpressionAttributeNames:  map[string]string{"#added": addedAttr, "#note": noteAttr, "#expires": claims.ExpiresAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}, ":note": ddbattr.String(note), ":expires": ddbattr.Number(t.now().Add(t.ttl).Unix())},
	}
	items := []types.TransactWriteItem{{Update: &record}}
	if add, ok := t.addition(runID, c, nil); ok {
		items = append(items, types.TransactWriteItem{Update: &add})
	}
	for try := 1; ; try++ {
		_, err := t.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		switch reason := cancelReason(err); {
		case err == nil:
			return true, nil
		case reason == "ConditionalCheckFailed":
			return false, nil
		case reason != "TransactionConflict" || try == conflictTries:
			return false, fmt.Errorf("runstate: add %s to the counters of run %s in table %s: %w", k, runID, t.name, err)
		}
		// Another write of the run record was under way, which the SDK
		// does not retry: a few milliseconds, then twice as many...
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(5*time.Millisecond) << try))):
		}
	}
}

// Once reports whether an AddOnce of the run with key k has added its
// counters, and the note it kept: one strongly consistent GetItem.
func (t *Table) Once(ctx context.Context, runID, k string) (note string, added bool, err error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.name), Key: key(onceKey(runID, k)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", false, fmt.Errorf("runstate: read %s of run %s in table %s: %w", k, runID, t.name, err)
	}
	if out.Item == nil {
		return "", false, nil
	}
	return ddbattr.Text(out.Item[noteAttr]), true, nil
}

// conflictTries is how many times AddOnce tries a transaction that another
// write of the run record cancelled.
const conflictTries = 6

// cancelReason is the code of the first reason a cancelled transaction
// gives that is not "None", or "".
func cancelReason(err error) string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return ""
	}
	for _, r := range tce.CancellationReasons {
		if c := aws.ToString(r.Code); c != "None" && c != "" {
			return c
		}
	}
	return ""
}

func onceKey(runID, k string) string {
	return runKey(runID) + "#once#" + k
}
