// Package inorder runs a function over a sequence with bounded concurrency
// and yields the results in the sequence's order, so that a consumer that
// records "everything before here is done" stays right while the slow
// parts (HeadObject calls, CSV headers, Parquet footers) overlap.
package inorder

import (
	"context"
	"iter"
	"sync"
)

// Map yields f of each item of seq, in seq's order, with up to n calls of
// f running at once (n < 1 means 1). An error from seq or f is yielded in
// its place and ends the sequence. When the consumer stops early, or ctx
// ends, the calls in flight see their context cancelled, and Map returns
// only after they and seq's iteration have returned: no goroutine outlives
// the loop.
func Map[T, U any](ctx context.Context, seq iter.Seq2[T, error], n int, f func(context.Context, T) (U, error)) iter.Seq2[U, error] {
	n = max(n, 1)
	return func(yield func(U, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		type slot struct {
			done chan struct{}
			u    U
			err  error
		}
		// slots holds the calls in seq's order: with the one the loop
		// waits on, n at most.
		slots := make(chan *slot, n-1)
		var (
			calls sync.WaitGroup
			cut   bool // seq was left part-way because ctx ended
		)
		go func() {
			defer close(slots)
			for t, err := range seq {
				s := &slot{done: make(chan struct{})}
				if err != nil {
					s.err = err
					close(s.done)
				}
				select {
				case slots <- s:
				case <-ctx.Done():
					cut = true
					return
				}
				if err != nil {
					return
				}
				calls.Go(func() {
					defer close(s.done)
					s.u, s.err = f(ctx, t)
				})
			}
		}()
		defer func() {
			cancel()
			for range slots {
			}
			calls.Wait()
		}()
		for s := range slots {
			<-s.done
			if !yield(s.u, s.err) || s.err != nil {
				return
			}
		}
		if cut {
			// Only ctx's parent can have ended it while the loop runs.
			var zero U
			yield(zero, context.Cause(ctx))
		}
	}
}
