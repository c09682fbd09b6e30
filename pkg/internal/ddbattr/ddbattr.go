// Package ddbattr writes and reads the DynamoDB attribute values that the
// claims and run-state tables keep (strings, whole numbers, times as Unix
// milliseconds), and recognises a refused condition, so that both tables
// encode their items one way.
package ddbattr

import (
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// String returns s as a string attribute.
func String(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// Number returns n as a number attribute.
func Number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Millis returns t as a number attribute of Unix milliseconds.
func Millis(t time.Time) types.AttributeValue { return Number(t.UnixMilli()) }

// Int returns the whole number v holds, or 0 when v is absent, is not a
// number attribute or does not hold a whole number.
func Int(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, _ := strconv.ParseInt(n.Value, 10, 64)
	return i
}

// Time returns the time of v's Unix milliseconds, in UTC, or the zero time
// when v is absent.
func Time(v types.AttributeValue) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(Int(v)).UTC()
}

// Text returns the string v holds, or "" when v is absent or not a string
// attribute.
func Text(v types.AttributeValue) string {
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return ""
	}
	return s.Value
}

// ConditionFailed reports whether err is DynamoDB refusing a write's
// condition.
func ConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
