package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// blocked reports whether put(p) waits: it gives up after a moment.
func blocked(t *testing.T, q *entryPipe, p pending) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	return q.put(ctx, p) != nil
}

// takeOne receives one entry, making its room free.
func takeOne(q *entryPipe) pending {
	for p := range q.all() {
		return p
	}
	return pending{}
}

func TestEntryPipeBytes(t *testing.T) {
	q := newEntryPipe()
	mib := pending{entry: sqsbatch.Entry{Body: strings.Repeat("x", 1<<20)}}
	for i := range pipeBytes / (1 << 20) {
		if blocked(t, q, mib) {
			t.Fatalf("entry %d of a MiB waits; the pipe holds %d bytes", i, pipeBytes)
		}
	}
	if !blocked(t, q, mib) {
		t.Fatal("a MiB more than the pipe holds did not wait")
	}
	takeOne(q)
	if blocked(t, q, mib) {
		t.Fatal("a MiB waits after one was taken")
	}

	// Room reserved for a message being packed counts as well, and comes
	// back when it is released instead of put.
	q = newEntryPipe()
	w, err := q.reserve(context.Background(), 1<<20)
	if err != nil || w != 1<<20 {
		t.Fatalf("reserve = %d, %v", w, err)
	}
	if blocked(t, q, mib) {
		t.Fatal("a MiB beside a reserved MiB waits")
	}
	if !blocked(t, q, mib) {
		t.Fatal("a MiB beyond a reserved and a put MiB did not wait")
	}
	q.release(w)
	if blocked(t, q, mib) {
		t.Fatal("a MiB waits after the reserved MiB was released")
	}

	// An entry larger than the pipe counts as all of it.
	q = newEntryPipe()
	huge := pending{entry: sqsbatch.Entry{Body: strings.Repeat("x", pipeBytes+1)}}
	if blocked(t, q, huge) {
		t.Fatal("an entry larger than the pipe waits in an empty pipe")
	}
	if got := takeOne(q); got.weight != pipeBytes {
		t.Errorf("an entry larger than the pipe weighs %d, want %d", got.weight, pipeBytes)
	}
}

func TestEntryPipeCount(t *testing.T) {
	q := newEntryPipe()
	small := pending{entry: sqsbatch.Entry{Body: "x"}}
	for i := range pipeEntries {
		if blocked(t, q, small) {
			t.Fatalf("entry %d waits; the pipe holds %d", i, pipeEntries)
		}
	}
	if !blocked(t, q, small) {
		t.Fatal("an entry beyond the count did not wait")
	}
	// The entry that gave up gave its room back: after one is taken,
	// one fits, and no more.
	takeOne(q)
	if blocked(t, q, small) {
		t.Fatal("an entry waits after one was taken")
	}
	if !blocked(t, q, small) {
		t.Fatal("the pipe holds more than its count")
	}
}
