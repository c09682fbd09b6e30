package ddbattr

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRoundTrip checks that what is written reads back as it was, and that
// what is absent or of another type reads as the zero value.
func TestRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
		if got := Int(Number(n)); got != n {
			t.Errorf("Int(Number(%d)) = %d", n, got)
		}
	}
	at := time.Date(2026, 12, 4, 22, 40, 1, 234_000_000, time.FixedZone("x", 3600))
	if got := Time(Millis(at)); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("Time(Millis(%v)) = %v", at, got)
	}
	if got := Text(String("run#1")); got != "run#1" {
		t.Errorf("Text(String) = %q", got)
	}
	if Int(nil) != 0 || Int(String("5")) != 0 || Int(&types.AttributeValueMemberN{Value: "1.5"}) != 0 {
		t.Error("Int of an absent, string or fractional attribute is not 0")
	}
	if !Time(nil).IsZero() || Text(nil) != "" || Text(Number(5)) != "" {
		t.Error("Time or Text of an absent or other attribute is not zero")
	}
}

func TestConditionFailed(t *testing.T) {
	refused := fmt.Errorf("put: %w", &types.ConditionalCheckFailedException{Message: aws.String("no")})
	if !ConditionFailed(refused) {
		t.Error("a wrapped ConditionalCheckFailedException is not a refused condition")
	}
	if ConditionFailed(errors.New("throttled")) || ConditionFailed(nil) {
		t.Error("another error is a refused condition")
	}
}
