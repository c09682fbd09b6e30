package faultproxy

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultDelayFor is how long Rates.Delay delays an answer when
// Rates.DelayFor is zero.
const DefaultDelayFor = 2 * time.Second

// Rates sets how often each fault is injected. Each rate is a fraction from
// 0 to 1 of the eligible requests (of the entries, for EntryFailed). The
// zero value injects no fault.
//
// A request gets at most one of SQS500, SQSThrottled, ResetBefore and
// ResetAfter (SQS), or of S3500, ResetBefore, ResetAfter and BodyCut (S3),
// so each of these two sums must be at most 1. EntryFailed and Delay are
// drawn on their own and combine with the others.
type Rates struct {
	// EntryFailed fails each SendMessageBatch entry with Code InternalError
	// and SenderFault false, without sending it to the queue.
	EntryFailed float64
	// SQS500 answers an SQS request with HTTP 500 InternalError without
	// forwarding it.
	SQS500 float64
	// SQSThrottled answers an SQS request with RequestThrottled without
	// forwarding it.
	SQSThrottled float64
	// ResetBefore resets the connection without forwarding the request:
	// the request did not take effect.
	ResetBefore float64
	// ResetAfter forwards the request, which takes effect, then resets
	// the connection without an answer.
	ResetAfter float64
	// S3500 answers an S3 request with HTTP 500 InternalError without
	// forwarding it.
	S3500 float64
	// BodyCut sends only the headers and part of the body of an S3
	// GetObject answer, then closes the connection.
	BodyCut float64
	// Delay delays the answer by DelayFor.
	Delay float64
	// DelayFor is how long Delay delays; zero means DefaultDelayFor.
	DelayFor time.Duration
	// DelayPerInFlight delays every eligible answer (on top of Delay) by
	// this much per request the Proxy is handling when the request
	// arrives, itself included: a server whose latency rises with its
	// load. Zero adds nothing.
	DelayPerInFlight time.Duration
}

func (r Rates) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"EntryFailed", r.EntryFailed}, {"SQS500", r.SQS500}, {"SQSThrottled", r.SQSThrottled},
		{"ResetBefore", r.ResetBefore}, {"ResetAfter", r.ResetAfter}, {"S3500", r.S3500},
		{"BodyCut", r.BodyCut}, {"Delay", r.Delay},
	} {
		// The negated form also rejects NaN.
		if !(f.v >= 0 && f.v <= 1) {
			errs = append(errs, fmt.Errorf("faultproxy: rate %s = %v is not in [0, 1]", f.name, f.v))
		}
	}
	if s := r.SQS500 + r.SQSThrottled + r.ResetBefore + r.ResetAfter; s > 1 {
		errs = append(errs, fmt.Errorf("faultproxy: SQS500+SQSThrottled+ResetBefore+ResetAfter = %v, more than 1", s))
	}
	if s := r.S3500 + r.ResetBefore + r.ResetAfter + r.BodyCut; s > 1 {
		errs = append(errs, fmt.Errorf("faultproxy: S3500+ResetBefore+ResetAfter+BodyCut = %v, more than 1", s))
	}
	if r.DelayFor < 0 {
		errs = append(errs, errors.New("faultproxy: DelayFor is negative"))
	}
	if r.DelayPerInFlight < 0 {
		errs = append(errs, errors.New("faultproxy: DelayPerInFlight is negative"))
	}
	return errors.Join(errs...)
}

func (r Rates) delayFor() time.Duration {
	if r.DelayFor == 0 {
		return DefaultDelayFor
	}
	return r.DelayFor
}

// defaultS3Ops are the S3 operations that get faults when Options.Ops is
// nil: the ones the functions use on the data path, and not the set-up
// (buckets, notifications) a test does.
var defaultS3Ops = []string{"GetObject", "HeadObject", "ListObjectsV2", "PutObject"}

// Options configures a Proxy. The zero value injects no fault.
type Options struct {
	// Rates are the initial fault rates; see Proxy.SetRates.
	Rates Rates
	// Seed seeds the one source of every fault decision; zero is a seed
	// like any other.
	Seed int64
	// Ops lists the operations that can get faults, by name ("SendMessage",
	// "DeleteMessageBatch", "GetObject", ...). Nil means every SQS
	// operation and S3's GetObject, HeadObject, ListObjectsV2 and
	// PutObject. Other requests are forwarded untouched.
	Ops []string
	// Logger receives one debug record per injected fault and the errors
	// of the upstream; nil discards them.
	Logger *slog.Logger
}
