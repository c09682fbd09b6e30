package engine

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// aheadSet opens the first GET of a group's tasks ahead of their reads, so
// that a task starts on an answer already come rather than behind its own
// first-byte wait: at real latency, a short chunk's read is mostly that
// wait, and a lane that moves to its next chunk waits it again. When the
// read of the group's i-th task starts, the first GETs of the next tasks of
// the group not started, up to depth of them, are opened; a task's read
// gets its own opened GET in place of its first GetObject (see aheadGet).
// It is safe for concurrent use by the group's readers; close ends it once
// they have all returned.
type aheadSet struct {
	client dataset.GetAPI
	specs  []*taskSpec
	depth  int

	mu      sync.Mutex
	started []bool
	gets    []*aheadGet // by place in specs; nil: none opened
}

func newAheadSet(client dataset.GetAPI, specs []*taskSpec, concurrency int) *aheadSet {
	return &aheadSet{client: client, specs: specs, depth: aheadPerLane * max(concurrency, 1),
		started: make([]bool, len(specs)), gets: make([]*aheadGet, len(specs))}
}

// start marks the group-th task started, opens ahead the first GETs of the
// tasks after it (with contexts that end as a reader's ioCtx does: with
// readCtx, or when work ends), and returns the client the task reads with.
func (a *aheadSet) start(work, readCtx context.Context, group int) dataset.GetAPI {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started[group] = true
	for i, opened := group+1, 0; i < len(a.specs) && opened < a.depth; i++ {
		switch {
		case a.gets[i] != nil:
			if !a.started[i] {
				opened++
			}
		case !a.started[i] && work.Err() == nil && !a.specs[i].notify:
			if in, ok := firstInput(a.specs[i].task.Chunk); ok {
				a.gets[i] = openAhead(work, readCtx, a.client, in)
				opened++
			}
		}
	}
	if g := a.gets[group]; g != nil {
		return g
	}
	return a.client
}

// done ends the group-th task's opened GET once its read has returned,
// and lets it go: a group may hold thousands of tasks, and an answer
// kept for each (its body's buffers, its metadata) was about 24 KiB a
// task, kept until the group ended.
func (a *aheadSet) done(group int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	g := a.gets[group]
	a.gets[group] = nil
	a.mu.Unlock()
	if g != nil {
		g.end()
	}
}

// close ends every GET opened, once the group's readers have returned:
// those of tasks that never read are dropped unread.
func (a *aheadSet) close() {
	for _, g := range a.gets {
		if g != nil {
			g.end()
		}
	}
}

// firstInput is the first GET that records.Read makes for c, when it is
// one to open ahead: it follows how records opens a chunk (a range from
// just before the chunk's start, a range from 0, or the whole object).
// Should the two differ, the GET opened ahead is not used and the read
// makes its own, so a difference costs a GET, never a wrong answer.
// Parquet's reads are not opened ahead: its footer comes first.
func firstInput(c dataset.Chunk) (*s3.GetObjectInput, bool) {
	switch {
	case c.Format == dataset.FormatParquet:
		return nil, false
	case c.Compression == dataset.CompressionNone && c.Start > 0:
		return dataset.FirstInput(c.Object, c.Start-1, c.End-c.Start+1), true
	case c.Compression == dataset.CompressionNone && !c.Whole():
		return dataset.FirstInput(c.Object, 0, c.End), true
	}
	return dataset.FirstInput(c.Object, 0, 0), true
}

// aheadGet is a GET opened ahead for one task, and the client that task
// reads with: the task's first GetObject, when it asks for exactly the GET
// opened, gets its answer; any other call, or that one when the GET opened
// failed, goes to the client, so that a read fails (a changed or missing
// object, a throttle) as it does without a read ahead, with its own GET.
// Its answer's body, once handed on, is the reader's, which resumes it as
// any other when it breaks off.
type aheadGet struct {
	dataset.GetAPI
	in     *s3.GetObjectInput
	cancel context.CancelCauseFunc
	opened chan struct{} // closed when the GET has answered
	out    *s3.GetObjectOutput
	err    error

	mu sync.Mutex
	// used: a call has asked for the GET opened (or end has run);
	// handed: its answer went to that call, whose body it is; ended: end
	// has run.
	used, handed, ended bool
}

// openAhead starts the GET in, whose body is read with a context that ends
// with readCtx or when work ends, as a reader's ioCtx does.
func openAhead(work, readCtx context.Context, client dataset.GetAPI, in *s3.GetObjectInput) *aheadGet {
	ctx, cancel := context.WithCancelCause(readCtx)
	stopWatch := context.AfterFunc(work, func() { cancel(context.Cause(work)) })
	// The GET is given a copy: the SDK writes to its input (it sets
	// ChecksumMode), and the read's GET is compared with the one asked.
	sent := *in
	g := &aheadGet{GetAPI: client, in: in, opened: make(chan struct{}),
		cancel: func(err error) { stopWatch(); cancel(err) }}
	go func() {
		defer close(g.opened)
		g.out, g.err = client.GetObject(ctx, &sent)
	}()
	return g
}

// GetObject answers the first call that asks for the GET opened with its
// answer, and passes any other on.
func (g *aheadGet) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	g.mu.Lock()
	first := !g.used && len(optFns) == 0 && reflect.DeepEqual(in, g.in)
	g.used = g.used || first
	g.mu.Unlock()
	if first {
		select {
		case <-g.opened:
			if g.err == nil {
				g.mu.Lock()
				g.handed = true
				g.mu.Unlock()
				return g.out, nil
			}
		case <-ctx.Done():
		}
	}
	return g.GetAPI.GetObject(ctx, in, optFns...)
}

// end cancels the GET, waits for it to return and, when no read took its
// answer, closes its body. It is called once the task's read has
// returned, and may be called again.
func (g *aheadGet) end() {
	g.cancel(errAheadUnused)
	<-g.opened
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.handed && !g.ended && g.out != nil {
		g.out.Body.Close()
	}
	g.used, g.ended = true, true
}

// errAheadUnused ends a GET opened ahead that no read took, or whose read
// has ended.
var errAheadUnused = errors.New("fanout: the read opened ahead has ended")
