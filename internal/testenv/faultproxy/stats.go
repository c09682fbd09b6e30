package faultproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Stats counts what a Proxy saw and did. Each fault is counted when it is
// carried out, so a BodyCut drawn for an empty or failed GetObject, which
// cannot be cut, is not counted.
type Stats struct {
	// Requests counts the requests seen, by operation ("SendMessageBatch",
	// "GetObject", "query:Publish", ...), faulted or not.
	Requests map[string]int

	// EntriesFailed counts the SendMessageBatch entries answered as Failed.
	EntriesFailed int
	// SQS500, SQSThrottled and S3500 count the injected error answers.
	SQS500, SQSThrottled, S3500 int
	// ResetBefore and ResetAfter count the connections reset before and
	// after forwarding.
	ResetBefore, ResetAfter int
	// BodyCut counts the GetObject answers cut short.
	BodyCut int
	// Delayed counts the requests whose answer was delayed, when the
	// delay starts.
	Delayed int
	// ClientGone counts forwarded requests whose client had gone (or
	// whose connection the Proxy's Close ended) before the answer was
	// given: answers lost without an injected reset.
	ClientGone int
	// UpstreamErrors counts requests the upstream did not answer; the
	// client got HTTP 502.
	UpstreamErrors int

	// PeakInFlight is the most requests the Proxy handled at once (from
	// the end of reading a request to the end of its answer), since it
	// started or since ResetPeaks; PeakBytesInFlight is the most bytes of
	// request bodies it held at once in that time.
	PeakInFlight      int
	PeakBytesInFlight int64
}

// String returns the counts on one line, operations in name order, leaving
// out the zero fault counts.
func (s Stats) String() string {
	var b strings.Builder
	b.WriteString("requests:")
	for _, op := range slices.Sorted(maps.Keys(s.Requests)) {
		fmt.Fprintf(&b, " %s=%d", op, s.Requests[op])
	}
	b.WriteString("; faults:")
	n := 0
	for _, c := range []struct {
		name string
		n    int
	}{
		{"entry-failed", s.EntriesFailed}, {"sqs-500", s.SQS500}, {"sqs-throttled", s.SQSThrottled},
		{"s3-500", s.S3500}, {"reset-before", s.ResetBefore}, {"reset-after", s.ResetAfter},
		{"body-cut", s.BodyCut}, {"delayed", s.Delayed}, {"client-gone", s.ClientGone},
		{"upstream-errors", s.UpstreamErrors},
	} {
		if c.n != 0 {
			fmt.Fprintf(&b, " %s=%d", c.name, c.n)
			n++
		}
	}
	if n == 0 {
		b.WriteString(" none")
	}
	return b.String()
}
