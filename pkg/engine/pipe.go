package engine

import (
	"context"
	"iter"

	"golang.org/x/sync/semaphore"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Bounds of what waits between a group's readers and its sender (see
// entryPipe). Entries are counted by Entry.Size: in record mode the count
// binds, in chunk mode, where an entry may be a whole MiB, the bytes do.
const (
	pipeEntries = 64
	pipeBytes   = 2 << 20
)

// entryPipe carries the entries of a group's readers to its one Send: at
// most pipeEntries entries and pipeBytes bytes wait in it or are being
// packed for it (an entry larger than pipeBytes counts as pipeBytes), so
// that the memory of a run does not grow with the size of its messages or
// the number of chunks read at once while the readers outpace SQS. It is
// used by many putters and one receiver.
type entryPipe struct {
	ch    chan pending
	bytes *semaphore.Weighted
}

func newEntryPipe() *entryPipe {
	return &entryPipe{ch: make(chan pending, pipeEntries), bytes: semaphore.NewWeighted(pipeBytes)}
}

// reserve waits for room for an entry of up to n bytes, which the caller
// packs and then puts with the weight returned, or gives back with release.
// Room taken before an entry is built bounds the entries being built, as
// chunk-mode messages are, as well as those waiting.
func (q *entryPipe) reserve(ctx context.Context, n int) (int64, error) {
	w := min(int64(n), pipeBytes)
	if err := q.bytes.Acquire(ctx, w); err != nil {
		return 0, err
	}
	return w, nil
}

// release gives back room reserved for an entry that is not put.
func (q *entryPipe) release(weight int64) {
	if weight > 0 {
		q.bytes.Release(weight)
	}
}

// put hands p on, in the room reserved for it (p.weight), or else once
// there is room for it, or returns ctx's error; the room is then given back.
func (q *entryPipe) put(ctx context.Context, p pending) error {
	if p.weight == 0 {
		var err error
		if p.weight, err = q.reserve(ctx, p.entry.Size()); err != nil {
			return err
		}
	}
	select {
	case q.ch <- p:
		return nil
	case <-ctx.Done():
		q.release(p.weight)
		return ctx.Err()
	}
}

// close ends all once the putters are done.
func (q *entryPipe) close() { close(q.ch) }

// all yields the entries put, until close, making room for more as it
// takes each.
func (q *entryPipe) all() iter.Seq[pending] {
	return func(yield func(pending) bool) {
		for p := range q.ch {
			q.release(p.weight)
			if !yield(p) {
				return
			}
		}
	}
}

// pending is an entry on its way to the sender. Its Entry.Ref leads it
// back to the task of its group that read it (Source, the task's place in
// the group) and the records it carries. The entry carries it to the send
// and back in a failure, so that a send keeps nothing per entry: one
// object in record mode is a million entries.
type pending struct {
	entry  sqsbatch.Entry
	weight int64 // of the pipe's bytes it holds
}

// refOf is the Ref of an entry of the group's task-th task that carries
// the records held.
func refOf(task int, held span) sqsbatch.Ref {
	return sqsbatch.Ref{Offset: held.offset, Source: int32(task), Count: int32(held.count)}
}

// span is the records an entry carries: from offset, count of them.
type span struct {
	offset int64
	count  int
}
