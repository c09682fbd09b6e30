package fanouthandler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
)

// Copied from pkg/fanout's claim_test.go, whose engine tests use them too.

// sent drains the target and returns the records' values, sorted.
func (st *stack) sent(t *testing.T) []string {
	t.Helper()
	got, _ := received(localaws.Drain(t, st.sqs, st.target, 2*time.Second))
	slices.Sort(got)
	return got
}

func claimsStore(t *testing.T) *claims.Table {
	client, name := localaws.ClaimsTable(t)
	return claims.NewTable(client, name, claims.TableOptions{})
}
