package sqsbatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// failure describes an entry that failed because of a request-level error
// or the end of the send.
func failure(it *item, cause error) *EntryError {
	return &EntryError{Entry: it.entry, Seq: it.seq, Code: codeOf(cause), Message: cause.Error(), Attempts: it.attempts, Err: cause}
}

// requestEntry builds the SQS request entry for e, pointing at e's own
// strings, so that it allocates nothing: e must outlive the requests. Its
// Id is set per request.
func requestEntry(e *Entry) types.SendMessageBatchRequestEntry {
	req := types.SendMessageBatchRequestEntry{
		MessageBody:       &e.Body,
		MessageAttributes: e.Attributes,
		DelaySeconds:      e.DelaySeconds,
	}
	if e.GroupID != "" {
		req.MessageGroupId = &e.GroupID
	}
	if e.DeduplicationID != "" {
		req.MessageDeduplicationId = &e.DeduplicationID
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
	o := &outcome{}
	pending := batch
	// One input for every attempt: a retry sends fewer entries of the same.
	var reqs [MaxBatchEntries]types.SendMessageBatchRequestEntry
	in := &sqs.SendMessageBatchInput{QueueUrl: &s.queueURL}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			o.fail(pending, context.Cause(ctx))
			return o
		}
		for i, it := range pending {
			it.attempts++
			reqs[i] = requestEntry(&it.entry)
			reqs[i].Id = &batchIDs[i]
		}
		in.Entries = reqs[:len(pending)]
		o.requests++
		timing := s.lim.begin()
		out, err := s.sendMessageBatch(ctx, in)

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
			if congested(err) {
				// A network error says nothing about the service's
				// load: only a throttle or a 5xx goes to the controller.
				o.throttled++
				s.lim.end(timing, true)
			}
		default:
			throttled := o.throttled
			retry = o.settle(pending, out)
			s.lim.end(timing, o.throttled > throttled)
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

// sendMessageBatch makes one SendMessageBatch request: itself when the
// client allows it (see direct), else through the client.
func (s *Sender) sendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
	if s.direct != nil && plainEntries(in.Entries) {
		return s.direct.sendMessageBatch(ctx, in)
	}
	return s.client.SendMessageBatch(ctx, in, exactBodies)
}

// settle records the accepted and permanently failed entries of a response
// and returns, in their original order, the entries worth retrying, each
// with the code and message of its failure.
func (o *outcome) settle(pending []*item, out *sqs.SendMessageBatchOutput) (retry []*item) {
	var answered [MaxBatchEntries]bool
	for _, ok := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(ok.Id))
		if err != nil || i < 0 || i >= len(pending) || answered[i] {
			continue
		}
		answered[i] = true
		o.sent++
		o.bytes += int64(pending[i].size)
	}
	var failed [MaxBatchEntries]*types.BatchResultErrorEntry
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
			if overloaded(it.code) {
				o.throttled++
			}
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
