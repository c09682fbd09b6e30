package runstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/internal/ddbattr"
)

// ErrPassedOver is wrapped by Park's error when a resume's Unpark passed
// over the message's number before the message was written (a slow write,
// a throttled table): the run is running again, and the caller, which
// still holds the message, should let it run.
var ErrPassedOver = errors.New("passed over by a resume before it was written")

// Park keeps body, a work-queue message of a cancelled run, for Unpark.
// It makes two UpdateItems: one that numbers the message on the run
// record, one that writes it, unless Unpark has passed over the number
// already (ErrPassedOver). When the second fails the number stays unused,
// and Unpark passes over it; the caller still holds the message.
func (t *Table) Park(ctx context.Context, runID string, body string) error {
	now := t.now()
	expires := ddbattr.Number(now.Add(t.ttl).Unix())
	out, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(t.name),
		Key:              key(runKey(runID)),
		UpdateExpression: aws.String("SET " + touch + " ADD #parked :one"),
		ExpressionAttributeNames: map[string]string{
			"#parked": parkedAttr, "#started": startedAttr, "#updated": updatedAttr, "#expires": claims.ExpiresAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": ddbattr.Number(1), ":now": ddbattr.Millis(now), ":expires": expires},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return fmt.Errorf("runstate: park a message of run %s in table %s: %w", runID, t.name, err)
	}
	n := ddbattr.Int(out.Attributes[parkedAttr])
	_, err = t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       key(parkedKey(runID, n)),
		UpdateExpression:          aws.String("SET #body = :body, #expires = :expires"),
		ConditionExpression:       aws.String("attribute_not_exists(#passed)"),
		ExpressionAttributeNames:  map[string]string{"#body": bodyAttr, "#expires": claims.ExpiresAttribute, "#passed": passedAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":body": ddbattr.String(body), ":expires": expires},
	})
	if ddbattr.ConditionFailed(err) {
		return fmt.Errorf("runstate: park message %d of run %s: %w", n, runID, ErrPassedOver)
	}
	if err != nil {
		return fmt.Errorf("runstate: park message %d of run %s in table %s: %w", n, runID, t.name, err)
	}
	return nil
}

// Unpark calls put with each parked message not yet put back, in the
// order they were parked, and records each that put took before it goes
// on to the next, so that an Unpark cut short (put failed, or the process
// ended) is taken up by the next one from the message it stopped at, and
// an Unpark after a complete one puts nothing. A message put whose record
// was lost is put again by the next Unpark. It returns how many messages
// put took; on put's error, that error wrapped. Two Unparks of one run at
// once may each put one message, after which one of them stops with an
// error.
//
// put is also given the message's number, which no other parking of the
// run shares: a task parked, put back and parked again has a new number,
// so that a FIFO queue's deduplication, keyed on it, drops a message put
// twice but never a task parked twice.
//
// A number without a message (a Park whose write failed, or has not
// happened yet) is passed over, and marked so: a Park that writes its
// message after that is refused (ErrPassedOver), and its task, whose
// message the caller still holds, runs again. Either the message is
// written first, and put back here, or it is refused: none is lost
// between the two.
func (t *Table) Unpark(ctx context.Context, runID string, put func(ctx context.Context, n int64, body string) error) (int64, error) {
	run, err := t.Get(ctx, runID)
	if errors.Is(err, ErrNoRun) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var done int64
	for i := run.Unparked + 1; i <= run.Parked; i++ {
		out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(t.name), Key: key(parkedKey(runID, i)), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return done, fmt.Errorf("runstate: read parked message %d of run %s in table %s: %w", i, runID, t.name, err)
		}
		body, ok := out.Item[bodyAttr].(*types.AttributeValueMemberS)
		if !ok {
			if body, err = t.passOver(ctx, runID, i); err != nil {
				return done, err
			}
			ok = body != nil
		}
		if ok {
			if err := put(ctx, i, body.Value); err != nil {
				return done, fmt.Errorf("runstate: put back parked message %d of run %s: %w", i, runID, err)
			}
			done++
		}
		if err := t.unparked(ctx, runID, i); err != nil {
			return done, err
		}
	}
	return done, nil
}

// passOver marks parked message i of the run, which has no message yet,
// as passed over, so that its Park can no longer write it. It returns the
// message when Park wrote it just before.
func (t *Table) passOver(ctx context.Context, runID string, i int64) (*types.AttributeValueMemberS, error) {
	k := key(parkedKey(runID, i))
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       k,
		UpdateExpression:          aws.String("SET #passed = :true, #expires = :expires"),
		ConditionExpression:       aws.String("attribute_not_exists(#body)"),
		ExpressionAttributeNames:  map[string]string{"#passed": passedAttr, "#body": bodyAttr, "#expires": claims.ExpiresAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}, ":expires": ddbattr.Number(t.now().Add(t.ttl).Unix())},
	})
	if err == nil {
		return nil, nil
	}
	if !ddbattr.ConditionFailed(err) {
		return nil, fmt.Errorf("runstate: pass over parked message %d of run %s in table %s: %w", i, runID, t.name, err)
	}
	// Written since it was read: take it.
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.name), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("runstate: read parked message %d of run %s in table %s: %w", i, runID, t.name, err)
	}
	body, _ := out.Item[bodyAttr].(*types.AttributeValueMemberS)
	return body, nil
}

// unparked records that parked message i of the run is back on the queue,
// if the last one recorded is i-1.
func (t *Table) unparked(ctx context.Context, runID string, i int64) error {
	cond := "#unparked = :prev"
	if i == 1 {
		cond = "attribute_not_exists(#unparked) OR " + cond
	}
	now := t.now()
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(t.name),
		Key:                 key(runKey(runID)),
		UpdateExpression:    aws.String("SET " + touch + " ADD #unparked :one"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{
			"#unparked": unparkedAttr, "#started": startedAttr, "#updated": updatedAttr, "#expires": claims.ExpiresAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": ddbattr.Number(1), ":prev": ddbattr.Number(i - 1), ":now": ddbattr.Millis(now), ":expires": ddbattr.Number(now.Add(t.ttl).Unix()),
		},
	})
	switch {
	case ddbattr.ConditionFailed(err):
		return fmt.Errorf("runstate: record parked message %d of run %s as put back: another resume of the run is putting them back", i, runID)
	case err != nil:
		return fmt.Errorf("runstate: record parked message %d of run %s as put back, in table %s: %w", i, runID, t.name, err)
	}
	return nil
}
