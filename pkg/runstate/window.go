package runstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/internal/ddbattr"
)

// A run's rate budget is a window per second, an item of its own that
// Take adds to, conditionally, up to the run's rate.

// windowTTL is how long a budget window is kept: it is read only during
// its own second, so an hour is ample and keeps the table small.
const windowTTL = time.Hour

// Take takes up to n messages from the run's budget of the second that
// holds at: as many as the window of that second has left below limit.
// It returns how many it took (0 when the window is spent). It makes one
// conditional UpdateItem when the window has n left; otherwise that
// UpdateItem's refusal says what is left, and one more takes it.
func (t *Table) Take(ctx context.Context, runID string, at time.Time, n, limit int64) (int64, error) {
	n = min(n, limit)
	if n <= 0 {
		return 0, nil
	}
	k := key(windowKey(runID, at.Unix()))
	ok, taken, err := t.take(ctx, k, at, n, limit)
	switch {
	case err != nil:
		return 0, err
	case ok:
		return n, nil
	}
	left := min(n, limit-taken)
	if left <= 0 {
		return 0, nil
	}
	// Others may take the rest first: then this one gets none, and the
	// window is spent for it too.
	if ok, _, err := t.take(ctx, k, at, left, limit); !ok {
		return 0, err
	}
	return left, nil
}

// take adds n to the window k if that keeps it at most limit. It reports
// whether it did, and when not, how many the window had taken.
func (t *Table) take(ctx context.Context, k map[string]types.AttributeValue, at time.Time, n, limit int64) (bool, int64, error) {
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(t.name),
		Key:                      k,
		UpdateExpression:         aws.String("SET #expires = :expires ADD #taken :n"),
		ConditionExpression:      aws.String("attribute_not_exists(#taken) OR #taken <= :most"),
		ExpressionAttributeNames: map[string]string{"#taken": takenAttr, "#expires": claims.ExpiresAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n": ddbattr.Number(n), ":most": ddbattr.Number(limit - n), ":expires": ddbattr.Number(at.Add(windowTTL).Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, ddbattr.Int(ccf.Item[takenAttr]), nil
	case err != nil:
		return false, 0, fmt.Errorf("runstate: take from the budget %s in table %s: %w", ddbattr.Text(k[claims.KeyAttribute]), t.name, err)
	}
	return true, 0, nil
}

func windowKey(runID string, sec int64) string {
	return runKey(runID) + "#rate#" + strconv.FormatInt(sec, 10)
}
