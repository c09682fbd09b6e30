package simulate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
)

// TestConformanceClaims holds the claims model to claims.Table over
// moto_server on what the engine, s3ingest and reconcile do with it: the
// same script of acquires, releases, dones, takeovers and markers gives
// the same answers on both. A lease runs out by the clock on the table
// (it is taken until a moment already past) and by the simulation's say
// on the model (Expire).
func TestConformanceClaims(t *testing.T) {
	client, name := localaws.ClaimsTable(t)
	table := claims.NewTable(client, name, claims.TableOptions{})
	model := NewClaimsModel(nil)
	got := [][]string{
		claimsScript(t.Context(), table, table, func() {}),
		claimsScript(t.Context(), model, ingested{model}, func() { model.Expire(nil) }),
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("moto_server (-) and the model (+) differ:\n%s", diff)
	}
}

// marking is what s3ingest and reconcile do with the markers.
type marking interface {
	MarkDone(ctx context.Context, key string) error
}

// claimsScript makes the calls of tasks' lives on s and returns what each
// answered; expire ends the leases taken until a moment already past.
func claimsScript(ctx context.Context, s claims.Store, r reconcile.Ingested, expire func()) []string {
	var out []string
	note := func(what string, v ...any) {
		for i, x := range v {
			if err, ok := x.(error); ok {
				v[i] = errName(err)
			}
		}
		out = append(out, fmt.Sprintf(what, v...))
	}
	later, past := time.Now().Add(time.Hour), time.Now().Add(-time.Second)
	acquire := func(key string, until time.Time) claims.Claim {
		c, err := s.Acquire(ctx, key, until)
		note("acquire %s: resumeAt=%d takenOver=%v %v", key, c.ResumeAt, c.TakenOver, err)
		return c
	}
	a := acquire("a", later)
	acquire("a", later)
	note("release a at 7: %v", s.Release(ctx, a, 7))
	note("release a again: %v", s.Release(ctx, a, 9))
	a = acquire("a", later)
	note("done a: %v", s.Done(ctx, a))
	note("done a again: %v", s.Done(ctx, a))
	note("release a after done: %v", s.Release(ctx, a, 1))
	acquire("a", later)
	done, err := r.IsDone(ctx, "a")
	note("is a done: %v %v", done, err)

	b := acquire("b", past)
	expire()
	b2 := acquire("b", later)
	note("done b by its first owner: %v", s.Done(ctx, b))
	note("release b by its first owner: %v", s.Release(ctx, b, 3))
	note("done b: %v", s.Done(ctx, b2))

	done, err = r.IsDone(ctx, "c")
	note("is c done before: %v %v", done, err)
	note("mark c: %v", s.(marking).MarkDone(ctx, "c"))
	done, err = r.IsDone(ctx, "c")
	note("is c done: %v %v", done, err)
	acquire("c", later)
	d := acquire("d", later)
	note("mark d while held: %v", s.(marking).MarkDone(ctx, "d"))
	note("done d: %v", s.Done(ctx, d))
	return out
}

// errName names err by the sentinel it wraps: the table's messages name
// the key, the model's do not.
func errName(err error) string {
	for _, e := range []error{claims.ErrDone, claims.ErrHeld, claims.ErrLost} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}
