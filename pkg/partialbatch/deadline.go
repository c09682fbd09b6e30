package partialbatch

import (
	"context"
	"fmt"
	"time"
)

// ErrDeadline is the cause (see context.Cause) of the contexts made by
// Contexts when they end on time, before the invocation's deadline; a
// message not started for that reason fails with it.
//
// It wraps context.DeadlineExceeded, so that code that stops on a
// deadline, such as pkg/sqsbatch's sender, stops on it too.
var ErrDeadline = fmt.Errorf("stopped before the invocation's deadline: %w", context.DeadlineExceeded)

// Bounds of the automatic margin.
const (
	minAutoMargin = 2 * time.Second
	maxAutoMargin = 30 * time.Second
)

// AutoMargin returns the margin used when none is set, for an invocation
// with left time to go: a tenth of left, at least 2s and at most 30s, but
// never more than half of left, so that a short timeout still gets work
// done. It is 0 when left is 0 or less.
func AutoMargin(left time.Duration) time.Duration {
	m := min(max(left/10, minAutoMargin), maxAutoMargin)
	return max(min(m, left/2), 0)
}

// Contexts derives from ctx's deadline the context in which work is started
// and the one in which its results are sent. work ends margin before the
// deadline; send ends margin/2 before it, so that what was read before work
// ended can still be sent and the answer given in time. work is a child of
// send, so it carries the same values. When they end on time, the cause of
// both is ErrDeadline; when ctx ends first, they carry its cause.
//
// A margin of zero or less means AutoMargin of the time left, measured with
// now (nil means time.Now). A ctx without a deadline is returned as both
// work and send. cancel releases the contexts' timers and must be called,
// as for context.WithDeadline.
func Contexts(ctx context.Context, margin time.Duration, now func() time.Time) (work, send context.Context, cancel context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, ctx, func() {}
	}
	if margin <= 0 {
		if now == nil {
			now = time.Now
		}
		margin = AutoMargin(dl.Sub(now()))
	}
	send, cancelSend := context.WithDeadlineCause(ctx, dl.Add(-margin/2), ErrDeadline)
	work, cancelWork := context.WithDeadlineCause(send, dl.Add(-margin), ErrDeadline)
	return work, send, func() { cancelWork(); cancelSend() }
}

// sendKey is the context key under which Process stores the send context.
type sendKey struct{}

// SendContext returns the send context that Processor.Process stored in the
// work context it hands its Handler (ctx or any context derived from it): use
// it for the calls that deliver what was read before the work context ended.
// Its values are those of the context given to Process, not the ones added to
// ctx since. Without a stored send context, SendContext returns ctx.
func SendContext(ctx context.Context) context.Context {
	if send, ok := ctx.Value(sendKey{}).(context.Context); ok {
		return send
	}
	return ctx
}

// Deadlines is Contexts for work that is not a batch of messages, such as
// a direct invocation: it returns the work context, from which SendContext
// returns the send context, as Process hands its Handler.
func Deadlines(ctx context.Context, margin time.Duration, now func() time.Time) (context.Context, context.CancelFunc) {
	work, send, cancel := Contexts(ctx, margin, now)
	return context.WithValue(work, sendKey{}, send), cancel
}
