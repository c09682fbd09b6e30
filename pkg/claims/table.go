package claims

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/internal/ddbattr"
)

// DefaultTTL is how long a claim is kept when TableOptions.TTL is zero.
const DefaultTTL = 7 * 24 * time.Hour

// The table's attributes. KeyAttribute is its partition key (a string);
// ExpiresAttribute is the one to turn DynamoDB's TTL on for.
const (
	KeyAttribute     = "claim"
	ExpiresAttribute = "expiresAt"

	stateAttr  = "state"
	ownerAttr  = "owner"
	leaseAttr  = "leaseUntil" // Unix milliseconds
	resumeAttr = "resumeAt"

	stateRunning = "running"
	stateOpen    = "open"
	stateDone    = "done"
)

// API is the part of the DynamoDB client a Table uses. *dynamodb.Client
// satisfies it.
type API interface {
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// TableOptions configures a Table. The zero value is ready to use.
type TableOptions struct {
	// TTL is how long after its last write a claim is kept (DynamoDB
	// deletes it some time after, through the table's TTL on
	// ExpiresAttribute); zero means DefaultTTL. Work delivered again after
	// that runs again.
	TTL time.Duration
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Table is a Store in a DynamoDB table whose partition key is the string
// attribute KeyAttribute. Each Acquire, Release and Done is one
// conditional UpdateItem (one write unit); an Acquire that is refused adds
// one strongly consistent GetItem.
type Table struct {
	client API
	name   string
	ttl    time.Duration
	now    func() time.Time
}

var _ Store = (*Table)(nil)

// NewTable returns the Store in table name.
func NewTable(client API, name string, opts TableOptions) *Table {
	t := &Table{client: client, name: name, ttl: opts.TTL, now: opts.Now}
	if t.ttl <= 0 {
		t.ttl = DefaultTTL
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// Acquire implements Store.
func (t *Table) Acquire(ctx context.Context, key string, until time.Time) (Claim, error) {
	now := t.now()
	c := Claim{Key: key, Owner: newOwner()}
	out, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(t.name),
		Key:                 t.key(key),
		UpdateExpression:    aws.String("SET #state = :running, #owner = :owner, #lease = :lease, #expires = :expires"),
		ConditionExpression: aws.String("attribute_not_exists(#claim) OR #state = :open OR (#state = :running AND #lease < :now)"),
		ExpressionAttributeNames: map[string]string{
			"#claim": KeyAttribute, "#state": stateAttr, "#owner": ownerAttr, "#lease": leaseAttr, "#expires": ExpiresAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":running": ddbattr.String(stateRunning), ":open": ddbattr.String(stateOpen), ":owner": ddbattr.String(c.Owner),
			":lease": ddbattr.Millis(until), ":now": ddbattr.Millis(now), ":expires": t.expires(now),
		},
		ReturnValues: types.ReturnValueAllOld,
	})
	if err == nil {
		c.ResumeAt = ddbattr.Int(out.Attributes[resumeAttr])
		c.TakenOver = ddbattr.Text(out.Attributes[stateAttr]) == stateRunning
		return c, nil
	}
	if !ddbattr.ConditionFailed(err) {
		return Claim{}, fmt.Errorf("claims: acquire %s in table %s: %w", key, t.name, err)
	}
	got, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.name), Key: t.key(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Claim{}, fmt.Errorf("claims: read %s in table %s: %w", key, t.name, err)
	}
	switch ddbattr.Text(got.Item[stateAttr]) {
	case stateDone:
		return Claim{}, fmt.Errorf("%w: %s", ErrDone, key)
	case stateRunning:
		lease := ddbattr.Time(got.Item[leaseAttr])
		return Claim{}, fmt.Errorf("%w: %s, until %s", ErrHeld, key, lease.Format(time.RFC3339))
	}
	// Released or taken between the two calls: a retry sorts it out.
	return Claim{}, fmt.Errorf("claims: acquire %s: the claim changed while it was read", key)
}

// Release implements Store.
func (t *Table) Release(ctx context.Context, c Claim, resumeAt int64) error {
	return t.settle(ctx, c, "SET #state = :open, #resume = :resume, #expires = :expires REMOVE #lease, #owner",
		map[string]types.AttributeValue{":open": ddbattr.String(stateOpen), ":resume": ddbattr.Number(resumeAt)}, "release")
}

// Done implements Store.
func (t *Table) Done(ctx context.Context, c Claim) error {
	return t.settle(ctx, c, "SET #state = :done, #expires = :expires REMOVE #lease, #owner",
		map[string]types.AttributeValue{":done": ddbattr.String(stateDone)}, "finish")
}

// settle updates c's item as update says, if c still holds it.
func (t *Table) settle(ctx context.Context, c Claim, update string, values map[string]types.AttributeValue, verb string) error {
	values[":owner"] = ddbattr.String(c.Owner)
	values[":running"] = ddbattr.String(stateRunning)
	values[":expires"] = t.expires(t.now())
	names := map[string]string{"#state": stateAttr, "#owner": ownerAttr, "#lease": leaseAttr, "#expires": ExpiresAttribute}
	if _, ok := values[":resume"]; ok {
		names["#resume"] = resumeAttr
	}
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       t.key(c.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#state = :running AND #owner = :owner"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case ddbattr.ConditionFailed(err):
		return fmt.Errorf("%w: %s", ErrLost, c.Key)
	case err != nil:
		return fmt.Errorf("claims: %s %s in table %s: %w", verb, c.Key, t.name, err)
	}
	return nil
}

func (t *Table) key(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{KeyAttribute: ddbattr.String(key)}
}

func (t *Table) expires(now time.Time) types.AttributeValue {
	return ddbattr.Number(now.Add(t.ttl).Unix())
}

func newOwner() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ObjectKey is the key of the marker s3ingest keeps for each object
// version it ingested: the bucket, the key and the pin (the version id, or
// the ETag where the bucket keeps no versions). Unlike a task's claim key,
// it holds nothing a listing does not know (no run id, no sequencer), so
// that a reconcile can look a listed object up.
func ObjectKey(bucket, key, pin string) string {
	sum := sha256.Sum256([]byte(bucket + "\x00" + key + "\x00" + pin))
	return "s3ingest-object/" + hex.EncodeToString(sum[:16])
}

// MarkDone records that the work key names is done, whoever did it: one
// unconditional UpdateItem (one write unit), kept for the table's TTL.
func (t *Table) MarkDone(ctx context.Context, key string) error {
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       t.key(key),
		UpdateExpression:          aws.String("SET #state = :done, #expires = :expires"),
		ExpressionAttributeNames:  map[string]string{"#state": stateAttr, "#expires": ExpiresAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":done": ddbattr.String(stateDone), ":expires": t.expires(t.now())},
	})
	if err != nil {
		return fmt.Errorf("claims: mark %s done in table %s: %w", key, t.name, err)
	}
	return nil
}

// Check reads one item of the table, so that a mistyped name or a
// missing permission is found before the first claim rather than at it.
func (t *Table) Check(ctx context.Context) error {
	_, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.name),
		Key:       t.key("s3sqs-check"),
	})
	if err != nil {
		return fmt.Errorf("cannot read DynamoDB table %s: %w", t.name, err)
	}
	return nil
}

// IsDone reports whether the work key names is recorded as done: one
// strongly consistent GetItem (one read unit for an item this small). A
// claim that is missing, open, or running (whether or not its lease
// lasts) is not done.
func (t *Table) IsDone(ctx context.Context, key string) (bool, error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.name), Key: t.key(key), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#state"), ExpressionAttributeNames: map[string]string{"#state": stateAttr},
	})
	if err != nil {
		return false, fmt.Errorf("claims: read %s in table %s: %w", key, t.name, err)
	}
	return ddbattr.Text(out.Item[stateAttr]) == stateDone, nil
}
