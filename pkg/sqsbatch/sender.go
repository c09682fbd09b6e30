package sqsbatch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/awserr"
)

// Defaults used when the matching [Options] field is zero.
const (
	DefaultMaxInFlight = 16
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
)

// Options configures a [Sender]. The zero value is ready to use.
type Options struct {
	// MaxInFlight is the most SendMessageBatch requests in flight at once.
	// If zero, DefaultMaxInFlight is used. At most MaxInFlight*10+10
	// entries are held in memory at any time, whatever the input's size.
	MaxInFlight int
	// MaxAttempts is the most requests an entry is part of before it fails.
	// If zero, DefaultMaxAttempts is used. The client's own retryer may
	// retry each request underneath; these attempts come on top.
	MaxAttempts int
	// Backoff returns the wait before retry number attempt (from 1). If
	// nil, exponential backoff with full jitter from DefaultBaseDelay,
	// capped at DefaultMaxDelay, is used.
	Backoff func(attempt int) time.Duration
	// ReplaceInvalidCharacters replaces characters SQS rejects in bodies
	// and string attribute values with U+FFFD instead of failing the entry.
	ReplaceInvalidCharacters bool
	// Logger receives a debug line for each retry. If nil, nothing is
	// logged.
	Logger *slog.Logger
}

// Sender sends entries to one queue. It is safe for concurrent use; each
// call to Send runs on its own.
type Sender struct {
	client      API
	queueURL    string
	limits      queueLimits
	maxInFlight int
	maxAttempts int
	backoff     func(int) time.Duration
	replace     bool
	log         *slog.Logger
}

// New resolves the queue (its URL once, with GetQueueUrl when only a name is
// given, and its MaximumMessageSize and FifoQueue attributes unless
// overridden) and returns a Sender for it. A failure to resolve is a
// [*StopError] that wraps the AWS error.
func New(ctx context.Context, client API, q Queue, opts Options) (*Sender, error) {
	url, limits, err := q.resolve(ctx, client)
	if err != nil {
		return nil, err
	}
	s := &Sender{
		client:      client,
		queueURL:    url,
		limits:      limits,
		maxInFlight: opts.MaxInFlight,
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		replace:     opts.ReplaceInvalidCharacters,
		log:         opts.Logger,
	}
	if s.maxInFlight <= 0 {
		s.maxInFlight = DefaultMaxInFlight
	}
	if s.maxAttempts <= 0 {
		s.maxAttempts = DefaultMaxAttempts
	}
	if s.backoff == nil {
		s.backoff = jitterBackoff
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// QueueURL returns the URL of the queue the Sender sends to.
func (s *Sender) QueueURL() string { return s.queueURL }

// FIFO reports whether the queue is a FIFO queue.
func (s *Sender) FIFO() bool { return s.limits.fifo }

// MaxMessageSize returns the largest message, in bytes, the queue accepts.
func (s *Sender) MaxMessageSize() int { return s.limits.maxMessageSize }

// Result accounts for the entries of one Send.
type Result struct {
	// Sent is the number of entries SQS accepted.
	Sent int
	// Failed is len(Failures).
	Failed int
	// Requests is the number of SendMessageBatch requests made.
	Requests int
	// Retries is the number of times an entry was sent again.
	Retries int
	// Bytes is the size, as SQS counts it, of the entries accepted.
	Bytes int64
	// Failures holds every entry that was not accepted, in no set order.
	Failures []*EntryError
}

// SendEntries sends entries. See [Sender.Send]. Unlike Send, when it stops
// early it reports the entries it did not reach as failed too, so that every
// entry is either sent or in Result.Failures.
func (s *Sender) SendEntries(ctx context.Context, entries []Entry) (Result, error) {
	res, err := s.Send(ctx, slices.Values(entries))
	if err != nil {
		for i := res.Sent + res.Failed; i < len(entries); i++ {
			res.Failures = append(res.Failures, failure(&item{seq: i, entry: entries[i]}, err))
		}
		res.Failed = len(res.Failures)
	}
	return res, err
}

// Send sends every entry of entries, reading them as it goes so that memory
// does not grow with the input. Every entry read is either accepted or in
// Result.Failures.
//
// Entries that fail are not an error of Send: they are in the Result. Send
// returns an error only when it stopped early: a [*StopError] when SQS
// answered in a way no retry can fix, or the context's error when ctx ended.
// Entries it did not read are then neither sent nor reported.
func (s *Sender) Send(ctx context.Context, entries iter.Seq[Entry]) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	r := &run{
		Sender: s,
		ctx:    ctx,
		cancel: cancel,
		work:   make(chan []*item),
		done:   make(chan *outcome, s.maxInFlight),
	}
	if s.limits.fifo {
		r.inFlight = make(map[string]int)
		r.failedGroups = make(map[string]string)
	}
	var wg sync.WaitGroup
	for range s.maxInFlight {
		wg.Go(func() {
			for batch := range r.work {
				o := s.sendBatch(ctx, batch)
				if o.stop != nil {
					// Cancel here, not when the outcome is absorbed, so
					// that no worker starts another request meanwhile.
					cancel(o.stop)
				}
				r.done <- o
			}
		})
	}

	r.pack(entries)
	close(r.work)
	for r.outstanding > 0 {
		r.absorb(<-r.done)
	}
	wg.Wait()

	r.res.Failed = len(r.res.Failures)
	var stop *StopError
	switch {
	case r.stopErr == nil:
		return r.res, nil
	case errors.As(r.stopErr, &stop):
		return r.res, stop
	default:
		return r.res, fmt.Errorf("sqsbatch: send stopped: %w", r.stopErr)
	}
}

// item is an entry on its way: validated, with its request entry built once
// so that every field survives retries.
type item struct {
	seq      int
	entry    Entry
	size     int
	attempts int
	req      types.SendMessageBatchRequestEntry
	// code and msg say why the entry's last attempt did not succeed, so
	// that an entry whose attempts run out fails with its own reason, not
	// that of another entry of its request.
	code, msg string
}

// outcome is what a worker reports for one batch.
type outcome struct {
	batch    []*item
	sent     int
	bytes    int64
	requests int
	retries  int
	failures []*EntryError
	stop     *StopError
}

// run is the state of one Send. Only the goroutine that called Send touches
// it; workers talk to it through work and done.
type run struct {
	*Sender
	ctx    context.Context
	cancel context.CancelCauseFunc
	work   chan []*item
	done   chan *outcome

	res         Result
	outstanding int
	// stopErr is why the send stopped early, if it did.
	stopErr error
	// inFlight counts, per FIFO message group, the batches in flight that
	// hold it; failedGroups holds the reason a group failed for good.
	inFlight     map[string]int
	failedGroups map[string]string
}

// pack reads entries, validates them and hands full batches to the workers.
func (r *run) pack(entries iter.Seq[Entry]) {
	var (
		batch []*item
		bytes int
		seq   int
	)
	maxBytes := r.limits.maxMessageSize
	for e := range entries {
		n := seq
		seq++
		if r.ctx.Err() != nil {
			r.stop(context.Cause(r.ctx))
			r.res.Failures = append(r.res.Failures, failure(&item{seq: n, entry: e}, r.stopErr))
			break
		}
		if r.replace {
			sanitize(&e)
		}
		size := e.Size()
		if verr := validate(&e, size, r.limits); verr != nil {
			r.res.Failures = append(r.res.Failures, &EntryError{
				Entry: e, Seq: n, Code: string(verr.Rule), Message: verr.Detail, SenderFault: true, Err: verr,
			})
			if r.failedGroups != nil {
				r.blockGroup(e.GroupID, n, string(verr.Rule))
			}
			continue
		}
		if r.limits.fifo {
			if why, ok := r.failedGroups[e.GroupID]; ok {
				r.failGroup(&item{seq: n, entry: e}, why)
				continue
			}
			// An entry waits while its group is in flight, so that it
			// cannot overtake an earlier entry being retried.
			for r.inFlight[e.GroupID] > 0 && r.stopErr == nil {
				r.wait()
			}
			if why, ok := r.failedGroups[e.GroupID]; ok {
				r.failGroup(&item{seq: n, entry: e}, why)
				continue
			}
		}
		if len(batch) > 0 && bytes+size > maxBytes {
			r.dispatch(batch)
			batch, bytes = nil, 0
		}
		it := &item{seq: n, entry: e, size: size, req: requestEntry(&e)}
		batch = append(batch, it)
		bytes += size
		if len(batch) == MaxBatchEntries {
			r.dispatch(batch)
			batch, bytes = nil, 0
		}
		if r.stopErr != nil {
			break
		}
	}
	if len(batch) > 0 {
		r.dispatch(batch)
	}
}

// dispatch hands batch to a worker, absorbing finished batches while it
// waits. If the send has stopped, the batch fails instead.
func (r *run) dispatch(batch []*item) {
	if r.ctx.Err() != nil {
		r.stop(context.Cause(r.ctx))
	}
	if r.stopErr != nil {
		r.failAll(batch, r.stopErr)
		return
	}
	r.track(batch, 1)
	r.outstanding++
	for {
		select {
		case r.work <- batch:
			return
		case o := <-r.done:
			r.absorb(o)
		case <-r.ctx.Done():
			r.stop(context.Cause(r.ctx))
			r.track(batch, -1)
			r.outstanding--
			r.failAll(batch, r.stopErr)
			return
		}
	}
}

// wait absorbs one finished batch, or notes that the send has stopped.
func (r *run) wait() {
	select {
	case o := <-r.done:
		r.absorb(o)
	case <-r.ctx.Done():
		r.stop(context.Cause(r.ctx))
	}
}

// stop records why the send stops early and cancels the requests in flight.
func (r *run) stop(err error) {
	if r.stopErr == nil {
		r.stopErr = err
		r.cancel(err)
	}
}

// blockGroup makes the later entries of a FIFO group fail, because entry
// seq of the group failed for good with code.
func (r *run) blockGroup(group string, seq int, code string) {
	if _, ok := r.failedGroups[group]; !ok {
		r.failedGroups[group] = fmt.Sprintf("entry #%d of the group failed: %s", seq, code)
	}
}

// absorb adds a finished batch to the result.
func (r *run) absorb(o *outcome) {
	r.outstanding--
	r.track(o.batch, -1)
	r.res.Sent += o.sent
	r.res.Bytes += o.bytes
	r.res.Requests += o.requests
	r.res.Retries += o.retries
	r.res.Failures = append(r.res.Failures, o.failures...)
	for _, f := range o.failures {
		if r.failedGroups != nil {
			r.blockGroup(f.Entry.GroupID, f.Seq, f.Code)
		}
		if f.Stopped() {
			r.stop(f.Err)
		}
	}
}

// track counts the FIFO groups of batch in or out of flight.
func (r *run) track(batch []*item, delta int) {
	if r.inFlight == nil {
		return
	}
	for i, it := range batch {
		if !slices.ContainsFunc(batch[:i], func(p *item) bool { return p.entry.GroupID == it.entry.GroupID }) {
			r.inFlight[it.entry.GroupID] += delta
		}
	}
}

func (r *run) failAll(batch []*item, cause error) {
	for _, it := range batch {
		r.res.Failures = append(r.res.Failures, failure(it, cause))
	}
}

func (r *run) failGroup(it *item, why string) {
	r.res.Failures = append(r.res.Failures, &EntryError{
		Entry: it.entry, Seq: it.seq, Code: CodeGroupFailed, Message: why,
	})
}

// failure describes an entry that failed because of a request-level error
// or the end of the send.
func failure(it *item, cause error) *EntryError {
	return &EntryError{Entry: it.entry, Seq: it.seq, Code: codeOf(cause), Message: cause.Error(), Attempts: it.attempts, Err: cause}
}

// requestEntry builds the SQS request entry for e. Its Id is set per
// request.
func requestEntry(e *Entry) types.SendMessageBatchRequestEntry {
	req := types.SendMessageBatchRequestEntry{
		MessageBody:       aws.String(e.Body),
		MessageAttributes: e.Attributes,
		DelaySeconds:      e.DelaySeconds,
	}
	if e.GroupID != "" {
		req.MessageGroupId = aws.String(e.GroupID)
	}
	if e.DeduplicationID != "" {
		req.MessageDeduplicationId = aws.String(e.DeduplicationID)
	}
	return req
}

// batchIDs are the request entry ids: the entry's index in its request,
// which is unique per request, valid, and short.
var batchIDs = func() (ids [MaxBatchEntries]string) {
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}()

// sendBatch sends batch, retrying the entries that can succeed, and reports
// what happened to each entry.
func (s *Sender) sendBatch(ctx context.Context, batch []*item) *outcome {
	o := &outcome{batch: batch}
	pending := batch
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			o.fail(pending, context.Cause(ctx))
			return o
		}
		reqs := make([]types.SendMessageBatchRequestEntry, len(pending))
		for i, it := range pending {
			it.attempts++
			reqs[i] = it.req
			reqs[i].Id = aws.String(batchIDs[i])
		}
		o.requests++
		out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.queueURL), Entries: reqs}, exactBodies)

		var retry []*item
		switch {
		case err != nil && ctx.Err() != nil:
			o.fail(pending, context.Cause(ctx))
			return o
		case err != nil && !retryable(err):
			o.stop = &StopError{Code: codeOf(err), Err: err}
			o.fail(pending, o.stop)
			return o
		case err != nil:
			retry = pending
			for _, it := range retry {
				it.code, it.msg = codeOf(err), err.Error()
			}
		default:
			retry = o.settle(pending, out)
			if s.limits.fifo && len(retry) > 0 {
				s.warnReordered(ctx, pending, retry)
			}
		}
		if s.limits.fifo {
			retry = o.blockFailedGroups(retry)
		}
		if len(retry) == 0 {
			return o
		}
		if attempt >= s.maxAttempts {
			for _, it := range retry {
				o.failures = append(o.failures, &EntryError{Entry: it.entry, Seq: it.seq, Code: it.code, Message: it.msg, Attempts: it.attempts})
			}
			return o
		}
		d := s.backoff(attempt)
		s.log.DebugContext(ctx, "sqsbatch retry", "queue", s.queueURL, "entries", len(retry), "attempt", attempt, "code", retry[len(retry)-1].code, "delay", d)
		if !sleep(ctx, d) {
			o.fail(retry, context.Cause(ctx))
			return o
		}
		o.retries += len(retry)
		pending = retry
	}
}

// settle records the accepted and permanently failed entries of a response
// and returns, in their original order, the entries worth retrying, each
// with the code and message of its failure.
func (o *outcome) settle(pending []*item, out *sqs.SendMessageBatchOutput) (retry []*item) {
	answered := make([]bool, len(pending))
	for _, ok := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(ok.Id))
		if err != nil || i < 0 || i >= len(pending) || answered[i] {
			continue
		}
		answered[i] = true
		o.sent++
		o.bytes += int64(pending[i].size)
	}
	failed := make([]*types.BatchResultErrorEntry, len(pending))
	for j := range out.Failed {
		f := &out.Failed[j]
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(pending) || answered[i] {
			continue
		}
		answered[i] = true
		failed[i] = f
	}
	for i, it := range pending {
		f := failed[i]
		switch {
		case answered[i] && f == nil:
			// accepted
		case f != nil && f.SenderFault:
			o.failures = append(o.failures, &EntryError{
				Entry: it.entry, Seq: it.seq, Code: aws.ToString(f.Code), Message: aws.ToString(f.Message),
				SenderFault: true, Attempts: it.attempts,
			})
		case f != nil:
			it.code, it.msg = aws.ToString(f.Code), aws.ToString(f.Message)
			retry = append(retry, it)
		default:
			// SQS neither accepted nor rejected it; sending again is
			// the only way to know.
			it.code, it.msg = "NoResult", "the response did not mention the entry"
			retry = append(retry, it)
		}
	}
	return retry
}

// warnReordered logs the FIFO entries that SQS failed while accepting a
// later entry of the same group in the same request: that order cannot be
// restored, and the failed entry is retried all the same.
func (s *Sender) warnReordered(ctx context.Context, pending, retry []*item) {
	for _, it := range retry {
		for _, later := range pending {
			if later.seq > it.seq && later.entry.GroupID == it.entry.GroupID && !slices.Contains(retry, later) {
				s.log.WarnContext(ctx, "sqsbatch FIFO entry failed after a later entry of its group was accepted",
					"queue", s.queueURL, "group", it.entry.GroupID, "entry", it.seq, "later", later.seq)
				break
			}
		}
	}
}

// blockFailedGroups removes from retry, and fails, the entries whose FIFO
// group had an earlier entry fail for good in this batch.
func (o *outcome) blockFailedGroups(retry []*item) []*item {
	if len(o.failures) == 0 {
		return retry
	}
	keep := retry[:0:0]
	for _, it := range retry {
		i := slices.IndexFunc(o.failures, func(f *EntryError) bool {
			return f.Entry.GroupID == it.entry.GroupID && f.Seq < it.seq
		})
		if i < 0 {
			keep = append(keep, it)
			continue
		}
		o.failures = append(o.failures, &EntryError{
			Entry: it.entry, Seq: it.seq, Code: CodeGroupFailed, Attempts: it.attempts,
			Message: fmt.Sprintf("entry #%d of the group failed: %s", o.failures[i].Seq, o.failures[i].Code),
		})
	}
	return keep
}

func (o *outcome) fail(items []*item, cause error) {
	for _, it := range items {
		o.failures = append(o.failures, failure(it, cause))
	}
}

// retryable reports whether a request error may go away if the request is
// sent again: throttling (SQS's KMS throttling too), server errors and
// network errors, as the SDK's standard retryer classifies them.
func retryable(err error) bool {
	return awserr.Classify(err) == awserr.Retryable
}

// jitterBackoff is exponential backoff with full jitter.
func jitterBackoff(attempt int) time.Duration {
	d := DefaultBaseDelay << min(attempt-1, 16)
	if d > DefaultMaxDelay || d <= 0 {
		d = DefaultMaxDelay
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// sleep waits for d or until ctx ends, and reports whether it waited in full.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
