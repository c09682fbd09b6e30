package simulate

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// DynamoModel is an in-process DynamoDB table keyed by
// claims.KeyAttribute, with the calls runstate.Table makes (GetItem,
// UpdateItem, TransactWriteItems of updates) and the expressions it
// writes: SET of values and if_not_exists, ADD of numbers, REMOVE, and conditions
// of attribute_not_exists, = and <= joined by OR. Each call is atomic, as
// DynamoDB makes a call on an item, and a transaction on all its items.
// TestConformanceDynamo holds it to moto_server. Writes fail at the
// faults' RunsErr rate, as a throttled table does after the SDK's
// retries.
type DynamoModel struct {
	F  *Faults
	mu sync.Mutex
	m  map[string]map[string]types.AttributeValue
	// Failed counts the writes that failed, by the run they were for;
	// Stops the writes that tried to stop a run with a reason
	// (runstate.Table.Stop), by run, whether its condition held or not.
	Failed, Stops map[string]int
}

// NewDynamoModel returns an empty table whose writes fail at f's rate.
func NewDynamoModel(f *Faults) *DynamoModel {
	return &DynamoModel{F: f, m: map[string]map[string]types.AttributeValue{}, Failed: map[string]int{}, Stops: map[string]int{}}
}

var _ runstate.API = (*DynamoModel)(nil)

// GetItem implements runstate.API.
func (d *DynamoModel) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, ok := d.m[keyOf(in.Key)]
	if !ok {
		return &dynamodb.GetItemOutput{}, nil
	}
	return &dynamodb.GetItemOutput{Item: maps.Clone(it)}, nil
}

// UpdateItem implements runstate.API.
func (d *DynamoModel) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	u := update{key: keyOf(in.Key), expr: aws.ToString(in.UpdateExpression), cond: aws.ToString(in.ConditionExpression),
		names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}
	if err := d.fault(ctx, "UpdateItem", u.key); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, stop := u.values[":reason"]; stop {
		d.Stops[runOfKey(u.key)]++
	}
	old := d.m[u.key]
	ok, err := u.holds(old)
	if err != nil {
		return nil, err
	}
	if !ok {
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = maps.Clone(old)
		}
		return nil, ccf
	}
	item, err := u.apply(old)
	if err != nil {
		return nil, err
	}
	d.m[u.key] = item
	out := &dynamodb.UpdateItemOutput{}
	if in.ReturnValues == types.ReturnValueAllNew || in.ReturnValues == types.ReturnValueUpdatedNew {
		out.Attributes = maps.Clone(item)
	}
	return out, nil
}

// TransactWriteItems implements runstate.API, for Update items: every
// condition holds and every update is applied, or none is.
func (d *DynamoModel) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	us := make([]update, len(in.TransactItems))
	for i, t := range in.TransactItems {
		if t.Update == nil {
			return nil, fmt.Errorf("dynamo model: transaction item %d is not an Update", i)
		}
		us[i] = update{key: keyOf(t.Update.Key), expr: aws.ToString(t.Update.UpdateExpression), cond: aws.ToString(t.Update.ConditionExpression),
			names: t.Update.ExpressionAttributeNames, values: t.Update.ExpressionAttributeValues}
	}
	if len(us) > 0 {
		if err := d.fault(ctx, "TransactWriteItems", us[0].key); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	reasons := make([]types.CancellationReason, len(us))
	cancelled := false
	for i, u := range us {
		reasons[i].Code = aws.String("None")
		ok, err := u.holds(d.m[u.key])
		if err != nil {
			return nil, err
		}
		if !ok {
			reasons[i].Code, cancelled = aws.String("ConditionalCheckFailed"), true
		}
	}
	if cancelled {
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	items := make([]map[string]types.AttributeValue, len(us))
	for i, u := range us {
		var err error
		if items[i], err = u.apply(d.m[u.key]); err != nil {
			return nil, err
		}
	}
	for i, u := range us {
		d.m[u.key] = items[i]
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// fault fails a write at the faults' rate, counting it for its run.
func (d *DynamoModel) fault(ctx context.Context, op, key string) error {
	if d.F == nil {
		return nil
	}
	if err := d.F.tick(ctx); err != nil {
		return err
	}
	if d.F.healed.Load() || d.F.rng("runs."+op, key).Float64() >= d.F.rates.RunsErr {
		return nil
	}
	d.F.count(&d.F.Stats.RunsErr)
	d.mu.Lock()
	d.Failed[runOfKey(key)]++
	d.mu.Unlock()
	return &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "dynamo model: " + op + " " + key + " throttled"}
}

// Runs returns the ids of the runs the table holds a record of.
func (d *DynamoModel) Runs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for k := range d.m {
		if id, ok := strings.CutPrefix(k, "run#"); ok && !strings.Contains(id, "#") {
			ids = append(ids, id)
		}
	}
	return ids
}

// runOfKey is the run a key of runstate's belongs to.
func runOfKey(key string) string {
	id, _ := strings.CutPrefix(key, "run#")
	id, _, _ = strings.Cut(id, "#")
	return id
}

func keyOf(k map[string]types.AttributeValue) string {
	s, _ := k[claims.KeyAttribute].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

// update is one UpdateItem: its item's key and its expressions.
type update struct {
	key, expr, cond string
	names           map[string]string
	values          map[string]types.AttributeValue
}

// holds evaluates the condition on item (nil: no item).
func (u update) holds(item map[string]types.AttributeValue) (bool, error) {
	if u.cond == "" {
		return true, nil
	}
	for clause := range strings.SplitSeq(u.cond, " OR ") {
		clause = strings.TrimSpace(clause)
		if name, ok := strings.CutPrefix(clause, "attribute_not_exists("); ok {
			if _, has := item[u.names[strings.TrimSuffix(name, ")")]]; !has {
				return true, nil
			}
			continue
		}
		f := strings.Fields(clause)
		if len(f) != 3 {
			return false, fmt.Errorf("dynamo model: condition %q", clause)
		}
		a, b := item[u.names[f[0]]], u.values[f[2]]
		switch f[1] {
		case "=":
			if a != nil && equal(a, b) {
				return true, nil
			}
		case "<=":
			if n, ok := a.(*types.AttributeValueMemberN); ok && number(n) <= number(b) {
				return true, nil
			}
		default:
			return false, fmt.Errorf("dynamo model: operator %q", f[1])
		}
	}
	return false, nil
}

// apply returns item with the update applied.
func (u update) apply(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{claims.KeyAttribute: &types.AttributeValueMemberS{Value: u.key}}
	}
	clauses := updateClauses(u.expr)
	for _, name := range splitTop(clauses["REMOVE"]) {
		delete(out, u.names[name])
	}
	set, add := clauses["SET"], clauses["ADD"]
	for _, a := range splitTop(set) {
		name, value, ok := strings.Cut(a, " = ")
		if !ok {
			return nil, fmt.Errorf("dynamo model: SET %q", a)
		}
		attr := u.names[strings.TrimSpace(name)]
		value = strings.TrimSpace(value)
		if args, ok := strings.CutPrefix(value, "if_not_exists("); ok {
			_, v, _ := strings.Cut(strings.TrimSuffix(args, ")"), ", ")
			if _, has := out[attr]; has {
				continue
			}
			value = v
		}
		out[attr] = u.values[value]
	}
	for _, a := range splitTop(add) {
		f := strings.Fields(a)
		if len(f) != 2 {
			return nil, fmt.Errorf("dynamo model: ADD %q", a)
		}
		attr := u.names[f[0]]
		out[attr] = &types.AttributeValueMemberN{Value: strconv.FormatInt(number(out[attr])+number(u.values[f[1]]), 10)}
	}
	return out, nil
}

// updateClauses splits an update expression into its SET, ADD and REMOVE
// clauses, by keyword.
func updateClauses(expr string) map[string]string {
	out := map[string]string{}
	kw, start := "", 0
	f := strings.Fields(expr)
	for i, w := range f {
		if w != "SET" && w != "ADD" && w != "REMOVE" {
			continue
		}
		if kw != "" {
			out[kw] = strings.Join(f[start:i], " ")
		}
		kw, start = w, i+1
	}
	if kw != "" {
		out[kw] = strings.Join(f[start:], " ")
	}
	return out
}

// splitTop splits a list of actions at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func number(v types.AttributeValue) int64 {
	n, _ := v.(*types.AttributeValueMemberN)
	if n == nil {
		return 0
	}
	i, _ := strconv.ParseInt(n.Value, 10, 64)
	return i
}

func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && number(a) == number(b)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	}
	return false
}
