package localaws

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/claims"
)

var tables atomic.Int64

// CreateClaimsTable creates a claims table (see pkg/claims) as the stacks
// do: partition key claims.KeyAttribute, on demand.
func CreateClaimsTable(ctx context.Context, c *dynamodb.Client, name string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(claims.KeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(claims.KeyAttribute), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		// A retry of a CreateTable whose first answer was lost (a loaded
		// moto_server): the names are unique, so the table is this one.
		err = nil
	}
	if err != nil {
		return fmt.Errorf("create claims table %s: %w", name, err)
	}
	return nil
}

// ClaimsTable creates a claims table in moto_server, named after the
// test, and returns a client for it and its name. The table goes when the
// test ends.
func ClaimsTable(tb testing.TB) (*dynamodb.Client, string) {
	tb.Helper()
	c := dynamodb.NewFromConfig(Moto(tb))
	name := fmt.Sprintf("claims-%d-%d", tables.Add(1), time.Now().UnixNano()%1e12)
	if err := CreateClaimsTable(tb.Context(), c, name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return c, name
}
