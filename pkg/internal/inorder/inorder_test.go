package inorder_test

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/internal/inorder"
)

// count yields 0..n-1 and notes when its iteration has returned.
func count(n int, returned *atomic.Bool) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		defer returned.Store(true)
		for i := range n {
			if !yield(i, nil) {
				return
			}
		}
	}
}

func TestMapKeepsOrderAndBound(t *testing.T) {
	var running, most atomic.Int32
	var returned atomic.Bool
	slow := func(ctx context.Context, i int) (int, error) {
		r := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		return i * i, nil
	}
	var got []int
	for v, err := range inorder.Map(t.Context(), count(200, &returned), 8, slow) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := make([]int, 200)
	for i := range want {
		want[i] = i * i
	}
	if !slices.Equal(got, want) {
		t.Errorf("results out of order or missing: %v", got)
	}
	if m := most.Load(); m > 8 || m < 2 {
		t.Errorf("at most %d calls ran at once; want 2..8 with n=8", m)
	}
	if !returned.Load() || running.Load() != 0 {
		t.Error("Map returned with its sequence or calls still running")
	}
}

func TestMapStopsEarlyWithoutLeaks(t *testing.T) {
	var returned atomic.Bool
	var running atomic.Int32
	cancelled := atomic.Int32{}
	f := func(ctx context.Context, i int) (int, error) {
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-ctx.Done():
			cancelled.Add(1)
			return 0, ctx.Err()
		case <-time.After(time.Duration(i%5) * time.Millisecond):
			return i, nil
		}
	}
	n := 0
	for _, err := range inorder.Map(t.Context(), count(1000, &returned), 16, f) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 10 {
			break
		}
	}
	if !returned.Load() || running.Load() != 0 {
		t.Errorf("after break: sequence returned %v, %d calls still running", returned.Load(), running.Load())
	}
}

func TestMapErrors(t *testing.T) {
	boom := errors.New("boom")
	t.Run("from f, in order", func(t *testing.T) {
		var returned atomic.Bool
		var got []int
		var gotErr error
		for v, err := range inorder.Map(t.Context(), count(50, &returned), 4, func(_ context.Context, i int) (int, error) {
			if i == 7 {
				return 0, boom
			}
			return i, nil
		}) {
			if err != nil {
				gotErr = err
				continue
			}
			got = append(got, v)
		}
		if !errors.Is(gotErr, boom) || !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Errorf("got %v then %v; want 0..6 then boom, and nothing after", got, gotErr)
		}
	})
	t.Run("from seq", func(t *testing.T) {
		seq := func(yield func(int, error) bool) {
			if yield(1, nil) {
				yield(0, boom)
			}
		}
		var errs []error
		var got []int
		for v, err := range inorder.Map(t.Context(), seq, 4, func(_ context.Context, i int) (int, error) { return i, nil }) {
			if err != nil {
				errs = append(errs, err)
			} else {
				got = append(got, v)
			}
		}
		if len(errs) != 1 || !errors.Is(errs[0], boom) || !slices.Equal(got, []int{1}) {
			t.Errorf("got %v, errors %v", got, errs)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var returned atomic.Bool
		var last error
		n := 0
		for _, err := range inorder.Map(ctx, count(1_000_000, &returned), 4, func(_ context.Context, i int) (int, error) { return i, nil }) {
			if err != nil {
				last = err
				break
			}
			if n++; n == 100 {
				cancel()
			}
		}
		if !errors.Is(last, context.Canceled) {
			t.Errorf("after cancel: %v, want context.Canceled yielded", last)
		}
		if !returned.Load() {
			t.Error("sequence still running")
		}
	})
}
