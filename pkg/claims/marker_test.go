package claims_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
)

// TestMarkDone: IsDone is true only for a done claim (a marker or a claim
// whose holder finished), not for a held or released one; a marker keeps
// the table's TTL and a later Acquire of its key is refused as done.
func TestMarkDone(t *testing.T) {
	client, name := localaws.ClaimsTable(t)
	now := time.Unix(1_800_000_000, 0)
	store := claims.NewTable(client, name, claims.TableOptions{TTL: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	ctx := t.Context()
	key := claims.ObjectKey("b", "k", "v1")
	if key == claims.ObjectKey("b", "k", "v2") || key == claims.ObjectKey("b", "k\x00v1", "") {
		t.Fatalf("object keys of different versions collide: %s", key)
	}
	if done, err := store.IsDone(ctx, key); done || err != nil {
		t.Fatalf("IsDone before any write = %v, %v", done, err)
	}
	if err := store.MarkDone(ctx, key); err != nil {
		t.Fatal(err)
	}
	if done, err := store.IsDone(ctx, key); !done || err != nil {
		t.Fatalf("IsDone after MarkDone = %v, %v", done, err)
	}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{claims.KeyAttribute: &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		t.Fatal(err)
	}
	if exp := got.Item[claims.ExpiresAttribute].(*types.AttributeValueMemberN).Value; exp != strconv.FormatInt(now.Add(30*24*time.Hour).Unix(), 10) {
		t.Errorf("expiresAt = %s; want now + the 30-day TTL", exp)
	}
	if _, err := store.Acquire(ctx, key, now.Add(time.Minute)); !errors.Is(err, claims.ErrDone) {
		t.Errorf("Acquire of a marked key: %v; want ErrDone", err)
	}

	held := claims.ObjectKey("b", "held", "e")
	c, err := store.Acquire(ctx, held, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := store.IsDone(ctx, held); done {
		t.Error("a held claim is done")
	}
	if err := store.Release(ctx, c, 3); err != nil {
		t.Fatal(err)
	}
	if done, _ := store.IsDone(ctx, held); done {
		t.Error("a released claim is done")
	}
}
