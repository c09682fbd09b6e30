package main

import (
	"hash/fnv"
	"sync"
)

// tally checks that every key of a space is in exactly one chunk task. A
// message received twice (SQS delivers at least once) is one task: tasks
// are told apart by their message ids. It is safe for concurrent use.
type tally struct {
	mu    sync.Mutex
	space keySpace
	// first is a hash of the message id of each key's first task (0: none
	// yet); count is how many distinct tasks name the key.
	first []uint64
	count []uint32
	// redelivered counts messages received again; unknown counts tasks
	// that name no key of the space, and partial those whose chunk is not
	// the whole object in one chunk (the objects are far below a chunk).
	redelivered, unknown, partial int
	tasks                         int
}

func newTally(space keySpace) *tally {
	return &tally{space: space, first: make([]uint64, space.n), count: make([]uint32, space.n)}
}

// add counts the task of message msgID, which names key; whole says
// whether its chunk is the whole object.
func (t *tally) add(key, msgID string, whole bool) {
	h := fnv.New64a()
	h.Write([]byte(msgID))
	id := h.Sum64() | 1 // never 0, which means none
	i, ok := t.space.index(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !ok:
		t.unknown++
		t.tasks++
	case t.first[i] == id:
		t.redelivered++
	default:
		if t.first[i] == 0 {
			t.first[i] = id
		}
		t.count[i]++
		t.tasks++
		if !whole {
			t.partial++
		}
	}
}

// checkResult is what the tally found.
type checkResult struct {
	Keys, Tasks, Missing, Doubled, Unknown, Partial, Redelivered int
}

// Pass reports whether every key is in exactly one task, whole, and no
// task names anything else.
func (c checkResult) Pass() bool {
	return c.Missing == 0 && c.Doubled == 0 && c.Unknown == 0 && c.Partial == 0 && c.Tasks == c.Keys
}

func (t *tally) result() checkResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := checkResult{Keys: t.space.n, Tasks: t.tasks, Unknown: t.unknown, Partial: t.partial, Redelivered: t.redelivered}
	for _, n := range t.count {
		switch {
		case n == 0:
			r.Missing++
		case n > 1:
			r.Doubled++
		}
	}
	return r
}
