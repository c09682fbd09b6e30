package partialbatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.uber.org/goleak"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

// msg returns a standard-queue message, or a FIFO one in group when group
// is not empty.
func msg(id, group string) events.SQSMessage {
	m := events.SQSMessage{MessageId: id, Body: "body of " + id, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:q"}
	if group != "" {
		m.Attributes = map[string]string{"MessageGroupId": group}
		m.EventSourceARN += ".fifo"
	}
	return m
}

// recorder is a Handler that fails the messages whose bodies name an id in
// fail, and records the ids of every call.
type recorder struct {
	fail  map[string]bool
	short bool // return one error too few
	mu    sync.Mutex
	calls [][]string
}

func (r *recorder) handle(_ context.Context, msgs []events.SQSMessage) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		ids = append(ids, m.MessageId)
		if r.fail[strings.TrimPrefix(m.Body, "body of ")] {
			errs[i] = fmt.Errorf("boom %s", m.MessageId)
		}
	}
	r.calls = append(r.calls, ids)
	if r.short {
		errs = errs[:len(errs)-1]
	}
	return errs
}

func set(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// itemIDs returns the ids that resp reports, checking that the list is not
// nil.
func itemIDs(t *testing.T, resp events.SQSEventResponse) []string {
	t.Helper()
	if resp.BatchItemFailures == nil {
		t.Fatal("BatchItemFailures is nil; want a list, [] when empty")
	}
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// summary writes each failure as "id/group/reason".
func summary(res partialbatch.Result) []string {
	out := []string{}
	for _, f := range res.Failures {
		out = append(out, f.MessageID+"/"+f.Group+"/"+string(f.Reason))
	}
	return out
}

func TestProcessStandard(t *testing.T) {
	a, b, c, d := msg("a", ""), msg("b", ""), msg("c", ""), msg("d", "")
	tests := []struct {
		name      string
		msgs      []events.SQSMessage
		rec       *recorder
		wantIDs   []string
		wantFails []string
		wantCalls [][]string
	}{
		{name: "all succeed", msgs: []events.SQSMessage{a, b, c}, rec: &recorder{},
			wantIDs: []string{}, wantFails: []string{}, wantCalls: [][]string{{"a", "b", "c"}}},
		{name: "some fail", msgs: []events.SQSMessage{a, b, c, d}, rec: &recorder{fail: set("d", "b")},
			wantIDs: []string{"b", "d"}, wantFails: []string{"b//handler", "d//handler"}, wantCalls: [][]string{{"a", "b", "c", "d"}}},
		{name: "duplicate id reported once", msgs: []events.SQSMessage{a, b, a}, rec: &recorder{fail: set("a")},
			wantIDs: []string{"a"}, wantFails: []string{"a//handler", "a//handler"}, wantCalls: [][]string{{"a", "b", "a"}}},
		{name: "empty batch", msgs: nil, rec: &recorder{},
			wantIDs: []string{}, wantFails: []string{}, wantCalls: nil},
		{name: "handler returns too few errors", msgs: []events.SQSMessage{a, b}, rec: &recorder{short: true},
			wantIDs: []string{"a", "b"}, wantFails: []string{"a//handler", "b//handler"}, wantCalls: [][]string{{"a", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, res, err := partialbatch.New(partialbatch.Options{}).Process(context.Background(), events.SQSEvent{Records: tt.msgs}, tt.rec.handle)
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			if got := itemIDs(t, resp); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("reported %q, want %q", got, tt.wantIDs)
			}
			if got := summary(res); !slices.Equal(got, tt.wantFails) {
				t.Errorf("failures %q, want %q", got, tt.wantFails)
			}
			if !slices.EqualFunc(tt.rec.calls, tt.wantCalls, slices.Equal) {
				t.Errorf("handler calls %q, want %q", tt.rec.calls, tt.wantCalls)
			}
			if res.Messages != len(tt.msgs) || res.Failed != len(tt.wantFails) || res.FIFO {
				t.Errorf("Result{Messages: %d, Failed: %d, FIFO: %v}, want {%d, %d, false}", res.Messages, res.Failed, res.FIFO, len(tt.msgs), len(tt.wantFails))
			}
		})
	}
}

func TestProcessEmptyResponseJSON(t *testing.T) {
	resp, _, err := partialbatch.New(partialbatch.Options{}).Process(context.Background(),
		events.SQSEvent{Records: []events.SQSMessage{msg("a", "")}}, (&recorder{}).handle)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"batchItemFailures":[]}`; string(b) != want {
		t.Errorf("response %s, want %s", b, want)
	}
}

func TestProcessFIFO(t *testing.T) {
	plain := func(id string) events.SQSMessage { // FIFO known by its ARN only
		m := msg(id, "")
		m.EventSourceARN += ".fifo"
		return m
	}
	grouped := func(id, group string) events.SQSMessage { // by its group only
		m := msg(id, group)
		m.EventSourceARN = strings.TrimSuffix(m.EventSourceARN, ".fifo")
		return m
	}
	tests := []struct {
		name      string
		skipGroup bool
		msgs      []events.SQSMessage
		fail      map[string]bool
		wantIDs   []string
		wantFails []string
		wantCalls [][]string
		blame     string // named by the error of every message not processed
	}{
		{name: "stop at first failure",
			msgs: []events.SQSMessage{msg("m1", "g1"), msg("m2", "g1"), msg("m3", "g2"), msg("m4", "g1")}, fail: set("m2"),
			wantIDs:   []string{"m2", "m3", "m4"},
			wantFails: []string{"m2/g1/handler", "m3/g2/fifo-earlier-failure", "m4/g1/fifo-earlier-failure"},
			wantCalls: [][]string{{"m1"}, {"m2"}}, blame: `"m2"`},
		{name: "skip only the failed group", skipGroup: true,
			msgs: []events.SQSMessage{msg("m1", "g1"), msg("m2", "g1"), msg("m3", "g2"), msg("m4", "g1"),
				msg("m5", "g2"), msg("m6", "g2"), msg("m7", "g3"), msg("m8", "g1")},
			fail:      set("m2", "m5"),
			wantIDs:   []string{"m2", "m4", "m5", "m6", "m8"},
			wantFails: []string{"m2/g1/handler", "m4/g1/fifo-group-failed", "m5/g2/handler", "m6/g2/fifo-group-failed", "m8/g1/fifo-group-failed"},
			wantCalls: [][]string{{"m1"}, {"m2"}, {"m3"}, {"m5"}, {"m7"}}},
		{name: "all succeed, one call per message in order",
			msgs:    []events.SQSMessage{msg("m1", "g1"), msg("m2", "g2"), msg("m3", "g1")},
			wantIDs: []string{}, wantFails: []string{}, wantCalls: [][]string{{"m1"}, {"m2"}, {"m3"}}},
		{name: "FIFO known by the queue ARN",
			msgs: []events.SQSMessage{plain("m1"), plain("m2"), plain("m3")}, fail: set("m2"),
			wantIDs: []string{"m2", "m3"}, wantFails: []string{"m2//handler", "m3//fifo-earlier-failure"},
			wantCalls: [][]string{{"m1"}, {"m2"}}, blame: `"m2"`},
		{name: "FIFO known by MessageGroupId on one record",
			msgs: []events.SQSMessage{msg("m1", ""), grouped("m2", "g"), msg("m3", "")}, fail: set("m1"),
			wantIDs: []string{"m1", "m2", "m3"}, wantFails: []string{"m1//handler", "m2/g/fifo-earlier-failure", "m3//fifo-earlier-failure"},
			wantCalls: [][]string{{"m1"}}, blame: `"m1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{fail: tt.fail}
			p := partialbatch.New(partialbatch.Options{SkipGroupOnError: tt.skipGroup})
			resp, res, err := p.Process(context.Background(), events.SQSEvent{Records: tt.msgs}, rec.handle)
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			if !res.FIFO {
				t.Error("Result.FIFO is false")
			}
			if got := itemIDs(t, resp); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("reported %q, want %q", got, tt.wantIDs)
			}
			if got := summary(res); !slices.Equal(got, tt.wantFails) {
				t.Errorf("failures %q, want %q", got, tt.wantFails)
			}
			if !slices.EqualFunc(rec.calls, tt.wantCalls, slices.Equal) {
				t.Errorf("handler calls %q, want %q", rec.calls, tt.wantCalls)
			}
			for _, f := range res.Failures {
				if f.Reason != partialbatch.ReasonHandler && !strings.Contains(f.Err.Error(), tt.blame) {
					t.Errorf("%s: error %q does not name %s", f.MessageID, f.Err, tt.blame)
				}
			}
		})
	}
}

func TestProcessMissingID(t *testing.T) {
	tests := []struct {
		name        string
		msgs        []events.SQSMessage
		fail        map[string]bool
		wantMissing int // 0: no error
		wantIDs     []string
	}{
		{name: "failed message without id", msgs: []events.SQSMessage{msg("a", ""), msg("", ""), msg("c", "")},
			fail: set("", "c"), wantMissing: 1, wantIDs: []string{"c"}},
		{name: "FIFO message without id after a failure", msgs: []events.SQSMessage{msg("a", "g"), msg("", "g")},
			fail: set("a"), wantMissing: 1, wantIDs: []string{"a"}},
		{name: "succeeded message without id", msgs: []events.SQSMessage{msg("a", ""), msg("", ""), msg("c", "")},
			fail: set("c"), wantIDs: []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, res, err := partialbatch.New(partialbatch.Options{}).Process(context.Background(),
				events.SQSEvent{Records: tt.msgs}, (&recorder{fail: tt.fail}).handle)
			if got := itemIDs(t, resp); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("reported %q, want %q", got, tt.wantIDs)
			}
			if tt.wantMissing == 0 {
				if err != nil {
					t.Fatalf("Process: %v", err)
				}
				return
			}
			var me *partialbatch.MissingIDError
			if !errors.As(err, &me) {
				t.Fatalf("error %v (%T), want a *MissingIDError", err, err)
			}
			if me.Missing != tt.wantMissing || me.Failed != res.Failed || res.Failed != 2 {
				t.Errorf("MissingIDError{Missing: %d, Failed: %d}, Result.Failed %d; want %d, 2, 2", me.Missing, me.Failed, res.Failed, tt.wantMissing)
			}
			if msg := err.Error(); !strings.Contains(msg, "1 of 2 failed messages have no messageId") || !strings.Contains(msg, "whole batch") {
				t.Errorf("message %q does not say how many and why", msg)
			}
		})
	}
}

func TestProcessDeadlineBeforeStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, group := range []string{"", "g"} {
		t.Run("group="+group, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var calls atomic.Int32
			h := func(context.Context, []events.SQSMessage) []error { calls.Add(1); return []error{nil, nil, nil} }
			p := partialbatch.New(partialbatch.Options{DeadlineMargin: 2 * time.Second})
			msgs := []events.SQSMessage{msg("a", group), msg("b", group), msg("c", group)}
			resp, res, err := p.Process(ctx, events.SQSEvent{Records: msgs}, h)
			if err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("handler called %d times", n)
			}
			if got := itemIDs(t, resp); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Errorf("reported %q, want all", got)
			}
			if len(res.Failures) != 3 {
				t.Fatalf("%d failures, want 3", len(res.Failures))
			}
			for _, f := range res.Failures {
				if f.Reason != partialbatch.ReasonDeadline || !errors.Is(f.Err, partialbatch.ErrDeadline) {
					t.Errorf("%s: reason %s, error %v; want deadline, ErrDeadline", f.MessageID, f.Reason, f.Err)
				}
			}
		})
	}
}

// TestProcessDeadlineDuringWork lets the work context end while the handler
// waits on it: the message it held and those after it fail with reason
// deadline, and the send context is still open when work has ended.
func TestProcessDeadlineDuringWork(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name      string
		group     string
		wantCalls int
	}{
		{name: "standard", wantCalls: 1},
		{name: "FIFO", group: "g", wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const margin = 1800 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var calls int
			var sendErr error
			var gap time.Duration
			h := func(ctx context.Context, msgs []events.SQSMessage) []error {
				calls++
				<-ctx.Done()
				send := partialbatch.SendContext(ctx)
				sendErr = send.Err()
				workDL, _ := ctx.Deadline()
				sendDL, _ := send.Deadline()
				gap = sendDL.Sub(workDL)
				return slices.Repeat([]error{ctx.Err()}, len(msgs))
			}
			msgs := []events.SQSMessage{msg("a", tt.group), msg("b", tt.group)}
			resp, res, err := partialbatch.New(partialbatch.Options{DeadlineMargin: margin}).Process(ctx, events.SQSEvent{Records: msgs}, h)
			if err != nil {
				t.Fatal(err)
			}
			if calls != tt.wantCalls {
				t.Errorf("handler called %d times, want %d", calls, tt.wantCalls)
			}
			if sendErr != nil {
				t.Errorf("send context ended with work: %v", sendErr)
			}
			if gap != margin/2 {
				t.Errorf("send deadline %v after work deadline, want %v", gap, margin/2)
			}
			if got := itemIDs(t, resp); !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("reported %q, want both", got)
			}
			if got, want := summary(res), []string{"a/" + tt.group + "/deadline", "b/" + tt.group + "/deadline"}; !slices.Equal(got, want) {
				t.Errorf("failures %q, want %q", got, want)
			}
		})
	}
}

func TestPerMessageBoundsConcurrency(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name        string
		concurrency int
		want        int32
	}{
		{name: "limit 3", concurrency: 3, want: 3},
		{name: "zero means DefaultConcurrency", concurrency: 0, want: partialbatch.DefaultConcurrency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var cur, peak, ran, atBarrier atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			// Every call waits until tt.want calls run at once: with less
			// concurrency than that, they wait for ctx and fail. The call
			// that completes the barrier gives a call over the limit 50ms
			// to start before it releases them all.
			fn := func(ctx context.Context, m events.SQSMessage) error {
				ran.Add(1)
				n := cur.Add(1)
				defer cur.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if n == tt.want {
					once.Do(func() {
						select {
						case <-time.After(50 * time.Millisecond):
						case <-ctx.Done():
						}
						atBarrier.Store(ran.Load())
						close(release)
					})
				}
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return fmt.Errorf("%s never saw %d at once: %w", m.MessageId, tt.want, ctx.Err())
				}
			}
			var msgs []events.SQSMessage
			for i := range 10 {
				msgs = append(msgs, msg(fmt.Sprint(i), ""))
			}
			errs := partialbatch.PerMessage(tt.concurrency, fn)(ctx, msgs)
			if len(errs) != len(msgs) {
				t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
			}
			if err := errors.Join(errs...); err != nil {
				t.Error(err)
			}
			if p := peak.Load(); p != tt.want {
				t.Errorf("at most %d calls at once, want %d", p, tt.want)
			}
			if n := atBarrier.Load(); n != tt.want {
				t.Errorf("%d calls started while %d were running, want %d", n, tt.want, tt.want)
			}
			if r := ran.Load(); r != 10 {
				t.Errorf("%d calls, want 10", r)
			}
		})
	}
}

func TestPerMessageContextEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	errFail := errors.New("odd")
	tests := []struct {
		name        string
		cancelFirst bool // cancel before the call
		cancelIn    string
		wantRan     []string
		wantErrs    []error // nil: success
	}{
		{name: "ended before", cancelFirst: true, wantRan: nil,
			wantErrs: []error{partialbatch.ErrDeadline, partialbatch.ErrDeadline, partialbatch.ErrDeadline}},
		{name: "ended by the first message", cancelIn: "0", wantRan: []string{"0"},
			wantErrs: []error{nil, partialbatch.ErrDeadline, partialbatch.ErrDeadline}},
		{name: "errors in message order", wantRan: []string{"0", "1", "2"},
			wantErrs: []error{nil, errFail, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tt.cancelFirst {
				cancel(partialbatch.ErrDeadline)
			}
			var ran []string // concurrency 1: one call at a time
			fn := func(_ context.Context, m events.SQSMessage) error {
				ran = append(ran, m.MessageId)
				if m.MessageId == tt.cancelIn {
					cancel(partialbatch.ErrDeadline)
				}
				if m.MessageId == "1" {
					return errFail
				}
				return nil
			}
			errs := partialbatch.PerMessage(1, fn)(ctx, []events.SQSMessage{msg("0", ""), msg("1", ""), msg("2", "")})
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("ran %q, want %q", ran, tt.wantRan)
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("%d errors, want %d", len(errs), len(tt.wantErrs))
			}
			for i, want := range tt.wantErrs {
				if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
					t.Errorf("message %d: error %v, want %v", i, errs[i], want)
				}
			}
		})
	}
}

func TestAutoMargin(t *testing.T) {
	tests := []struct {
		name       string
		left, want time.Duration
	}{
		{name: "none left", left: 0, want: 0},
		{name: "negative", left: -time.Second, want: 0},
		{name: "short: half", left: time.Second, want: 500 * time.Millisecond},
		{name: "3s: half", left: 3 * time.Second, want: 1500 * time.Millisecond},
		{name: "4s: minimum", left: 4 * time.Second, want: 2 * time.Second},
		{name: "10s: minimum", left: 10 * time.Second, want: 2 * time.Second},
		{name: "60s: a tenth", left: time.Minute, want: 6 * time.Second},
		{name: "5min: maximum", left: 5 * time.Minute, want: 30 * time.Second},
		{name: "15min: maximum", left: 15 * time.Minute, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partialbatch.AutoMargin(tt.left); got != tt.want {
				t.Errorf("AutoMargin(%v) = %v, want %v", tt.left, got, tt.want)
			}
		})
	}
}

func TestContexts(t *testing.T) {
	defer goleak.VerifyNone(t)
	dl := time.Now().Add(10 * time.Second)
	tests := []struct {
		name             string
		margin           time.Duration
		now              func() time.Time
		wantWork         time.Duration // before dl
		wantSend         time.Duration
		wantWorkCauseEnd bool // work has already ended, with ErrDeadline
	}{
		{name: "explicit margin", margin: 2 * time.Second, wantWork: 2 * time.Second, wantSend: time.Second},
		{name: "automatic margin", now: func() time.Time { return dl.Add(-time.Minute) },
			wantWork: 6 * time.Second, wantSend: 3 * time.Second},
		{name: "work already over", margin: 12 * time.Second, wantWork: 12 * time.Second, wantSend: 6 * time.Second,
			wantWorkCauseEnd: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancelCtx := context.WithDeadline(context.Background(), dl)
			defer cancelCtx()
			work, send, cancel := partialbatch.Contexts(ctx, tt.margin, tt.now)
			defer cancel()
			workDL, ok1 := work.Deadline()
			sendDL, ok2 := send.Deadline()
			if !ok1 || !ok2 {
				t.Fatalf("no deadline: work %v, send %v", ok1, ok2)
			}
			if got := dl.Sub(workDL); got != tt.wantWork {
				t.Errorf("work ends %v before the deadline, want %v", got, tt.wantWork)
			}
			if got := dl.Sub(sendDL); got != tt.wantSend {
				t.Errorf("send ends %v before the deadline, want %v", got, tt.wantSend)
			}
			if !workDL.Before(sendDL) || !sendDL.Before(dl) {
				t.Errorf("want work %v < send %v < ctx %v", workDL, sendDL, dl)
			}
			if send.Err() != nil {
				t.Errorf("send has ended: %v", send.Err())
			}
			if tt.wantWorkCauseEnd {
				if c := context.Cause(work); !errors.Is(c, partialbatch.ErrDeadline) {
					t.Errorf("work cause %v, want ErrDeadline", c)
				}
			} else if work.Err() != nil {
				t.Errorf("work has ended: %v", work.Err())
			}
			cancelCtx()
			if c := context.Cause(send); !errors.Is(c, context.Canceled) {
				t.Errorf("after ctx is canceled, send cause %v, want context.Canceled", c)
			}
		})
	}
}

func TestContextsWithoutDeadline(t *testing.T) {
	ctx := context.WithValue(context.Background(), struct{}{}, "v")
	work, send, cancel := partialbatch.Contexts(ctx, 0, nil)
	defer cancel()
	if work != ctx || send != ctx {
		t.Errorf("got work %v, send %v; want ctx for both", work, send)
	}
	if got := partialbatch.SendContext(ctx); got != ctx {
		t.Errorf("SendContext of a plain context = %v, want it back", got)
	}
}

// TestErrDeadlineIsADeadline checks that code which stops on a deadline,
// such as sqsbatch's sender, stops when a context made by Contexts ends on
// time.
func TestErrDeadlineIsADeadline(t *testing.T) {
	if !errors.Is(partialbatch.ErrDeadline, context.DeadlineExceeded) {
		t.Error("ErrDeadline does not wrap context.DeadlineExceeded")
	}
}
