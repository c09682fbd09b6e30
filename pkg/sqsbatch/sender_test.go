package sqsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

func TestPackByCount(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	fc := &sqsfault.Client{API: c}
	s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	in := entries("small", 95)
	res, err := s.SendEntries(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 95 || res.Failed != 0 || res.Requests != 10 || res.Retries != 0 {
		t.Errorf("result sent=%d failed=%d requests=%d retries=%d, want 95, 0, 10, 0", res.Sent, res.Failed, res.Requests, res.Retries)
	}
	var sizes []int
	for _, r := range fc.Requests() {
		sizes = append(sizes, len(r.Entries))
	}
	slices.Sort(sizes)
	if want := []int{5, 10, 10, 10, 10, 10, 10, 10, 10, 10}; !slices.Equal(sizes, want) {
		t.Errorf("entries per request %v, want %v", sizes, want)
	}
	var want []string
	for _, e := range in {
		want = append(want, e.Body)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, localaws.Bodies(receiveAll(t, c, url, 95))); diff != "" {
		t.Errorf("received bodies (-want +got):\n%s", diff)
	}
}

func TestPackByBytes(t *testing.T) {
	attr := func(n int) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{"pad": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("a", n))}}
	}
	tests := []struct {
		name      string
		queueSize int // 0 means the default, 1 MiB
		body      int
		attrs     map[string]types.MessageAttributeValue
		n         int
		perReq    int
	}{
		// 3 x 349,000 = 1,047,000 fits in 1,048,576; a fourth does not.
		{name: "1MiB", body: 349_000, n: 10, perReq: 3},
		// 609 bytes of attribute each make three entries 1,048,827 bytes.
		{name: "1MiB attributes count", body: 349_000, attrs: attr(600), n: 10, perReq: 2},
		{name: "256KiB", queueSize: 262_144, body: 87_000, n: 10, perReq: 3},
		{name: "256KiB attributes count", queueSize: 262_144, body: 87_000, attrs: attr(400), n: 10, perReq: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t)
			var attrs map[string]string
			limit := 1 << 20
			if tt.queueSize > 0 {
				attrs = map[string]string{"MaximumMessageSize": fmt.Sprint(tt.queueSize)}
				limit = tt.queueSize
			}
			url := createQueue(t, c, false, attrs)
			fc := &sqsfault.Client{API: c}
			s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if s.MaxMessageSize() != limit {
				t.Fatalf("MaxMessageSize() = %d, want %d read from the queue", s.MaxMessageSize(), limit)
			}
			in := make([]sqsbatch.Entry, tt.n)
			for i := range in {
				in[i] = sqsbatch.Entry{ID: fmt.Sprint(i), Body: pad(fmt.Sprintf("big-%d-", i), tt.body), Attributes: tt.attrs}
			}
			// One entry just over the limit fails validation.
			in = append(in, sqsbatch.Entry{ID: "too-big", Body: strings.Repeat("z", limit+1)})
			res, err := s.SendEntries(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			wantReqs := (tt.n + tt.perReq - 1) / tt.perReq
			if res.Sent != tt.n || res.Requests != wantReqs {
				t.Errorf("sent %d in %d requests, want %d in %d", res.Sent, res.Requests, tt.n, wantReqs)
			}
			if got := failureCodes(res); !cmp.Equal(got, map[string]string{"too-big": string(sqsbatch.RuleTooLarge)}) {
				t.Errorf("failures %v, want only too-big as %s", got, sqsbatch.RuleTooLarge)
			}
			for i, r := range fc.Requests() {
				if len(r.Entries) > tt.perReq {
					t.Errorf("request %d has %d entries, want at most %d", i, len(r.Entries), tt.perReq)
				}
				if size := requestSize(r.Entries); size > limit {
					t.Errorf("request %d carries %d bytes, over the limit %d", i, size, limit)
				}
			}
			msgs := receiveAll(t, c, url, tt.n)
			for _, m := range msgs {
				if len(aws.ToString(m.Body)) != tt.body || len(m.MessageAttributes) != len(tt.attrs) {
					t.Fatalf("received body of %d bytes with %d attributes, want %d and %d", len(aws.ToString(m.Body)), len(m.MessageAttributes), tt.body, len(tt.attrs))
				}
			}
		})
	}
}

func TestValidationThroughSender(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	s, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := map[string]types.MessageAttributeValue{}
	for i := range 11 {
		tooMany[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	in := []sqsbatch.Entry{
		{ID: "good-1", Body: "fine"},
		{ID: "nul", Body: "bad\x00body"},
		{ID: "attrs", Body: "x", Attributes: tooMany},
		{ID: "name", Body: "x", Attributes: map[string]types.MessageAttributeValue{"has space": {DataType: aws.String("String"), StringValue: aws.String("v")}}},
		{ID: "empty", Body: ""},
		{ID: "good-2", Body: "also fine"},
	}
	checked := map[string]string{}
	for _, e := range in {
		if f := s.Check(e); f != nil {
			checked[e.ID] = f.Code
		}
	}
	res, err := s.SendEntries(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(failureCodes(res), checked); diff != "" {
		t.Errorf("Check disagrees with Send (-send +check):\n%s", diff)
	}
	want := map[string]string{
		"nul":   string(sqsbatch.RuleInvalidCharacters),
		"attrs": string(sqsbatch.RuleTooManyAttributes),
		"name":  string(sqsbatch.RuleInvalidAttribute),
		"empty": string(sqsbatch.RuleEmptyBody),
	}
	if diff := cmp.Diff(want, failureCodes(res)); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	for _, f := range res.Failures {
		var verr *sqsbatch.ValidationError
		if !errors.As(f, &verr) || verr.EntryID != f.Entry.ID || !f.SenderFault || f.Attempts != 0 {
			t.Errorf("failure %v: want a *ValidationError naming %q, SenderFault and no attempts", f, f.Entry.ID)
		}
	}
	if res.Sent != 2 || res.Requests != 1 {
		t.Errorf("sent %d in %d requests, want 2 in 1", res.Sent, res.Requests)
	}
	if diff := cmp.Diff([]string{"also fine", "fine"}, localaws.Bodies(receiveAll(t, c, url, 2))); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

func TestReplaceInvalidCharacters(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	s, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{URL: url}, sqsbatch.Options{ReplaceInvalidCharacters: true})
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]types.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v\x01")}}
	res, err := s.SendEntries(t.Context(), []sqsbatch.Entry{{ID: "x", Body: "a\x00b\xffc", Attributes: attrs}})
	if err != nil || res.Sent != 1 {
		t.Fatalf("sent %d, err %v; want 1 sent", res.Sent, err)
	}
	if got := aws.ToString(attrs["k"].StringValue); got != "v\x01" {
		t.Errorf("caller's attribute map was changed to %q", got)
	}
	m := receiveAll(t, c, url, 1)[0]
	if got, want := aws.ToString(m.Body), "a\uFFFDb\uFFFDc"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	if got, want := aws.ToString(m.MessageAttributes["k"].StringValue), "v\uFFFD"; got != want {
		t.Errorf("attribute %q, want %q", got, want)
	}
}

func TestPartialBatchFailure(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	fc := &sqsfault.Client{API: c, EntryErr: func(body string, attempt int) *types.BatchResultErrorEntry {
		switch {
		case strings.HasPrefix(body, "flaky") && attempt <= 2:
			return &types.BatchResultErrorEntry{Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: false}
		case strings.HasPrefix(body, "bad"):
			return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), Message: aws.String("injected sender fault"), SenderFault: true}
		}
		return nil
	}}
	s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{Backoff: noWait, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	delayed := map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("flaky")}}
	var in []sqsbatch.Entry
	for i := range 10 {
		in = append(in,
			sqsbatch.Entry{ID: fmt.Sprint("ok-", i), Body: fmt.Sprint("ok-", i)},
			sqsbatch.Entry{ID: fmt.Sprint("flaky-", i), Body: fmt.Sprint("flaky-", i), Attributes: delayed, DelaySeconds: 1},
			sqsbatch.Entry{ID: fmt.Sprint("bad-", i), Body: fmt.Sprint("bad-", i), Ref: sqsbatch.Ref{Offset: 1 << 40, Source: int32(i), Count: 3}},
		)
	}
	res, err := s.SendEntries(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 20 || res.Failed != 10 || res.Retries != 20 {
		t.Errorf("sent=%d failed=%d retries=%d, want 20, 10, 20", res.Sent, res.Failed, res.Retries)
	}
	for _, f := range res.Failures {
		if !strings.HasPrefix(f.Entry.ID, "bad-") || f.Code != "InvalidParameterValue" || !f.SenderFault || f.Attempts != 1 {
			t.Errorf("failure %+v: want only bad-* entries, InvalidParameterValue, sender fault, one attempt", f)
		}
		// The caller's Ref comes back with its entry, as given.
		if want := (sqsbatch.Ref{Offset: 1 << 40, Source: int32(f.Seq / 3), Count: 3}); f.Entry.Ref != want {
			t.Errorf("failure %s came back with Ref %+v, want %+v", f.Entry.ID, f.Entry.Ref, want)
		}
	}
	// Retried entries keep every field.
	for _, r := range fc.Requests() {
		for _, e := range r.Entries {
			if strings.HasPrefix(aws.ToString(e.MessageBody), "flaky") && (e.DelaySeconds != 1 || len(e.MessageAttributes) != 1) {
				t.Errorf("flaky entry sent with DelaySeconds=%d and %d attributes, want 1 and 1", e.DelaySeconds, len(e.MessageAttributes))
			}
		}
	}
	msgs := receiveAll(t, c, url, 20)
	var flaky int
	for _, m := range msgs {
		if strings.HasPrefix(aws.ToString(m.Body), "flaky") {
			flaky++
			if aws.ToString(m.MessageAttributes["kind"].StringValue) != "flaky" {
				t.Errorf("flaky message lost its attribute: %v", m.MessageAttributes)
			}
		}
	}
	if flaky != 10 {
		t.Errorf("received %d flaky messages, want all 10", flaky)
	}
}

func TestRetryGivesUp(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	fc := &sqsfault.Client{API: c, EntryErr: func(body string, _ int) *types.BatchResultErrorEntry {
		if body == "never" {
			return &types.BatchResultErrorEntry{Code: aws.String("ServiceUnavailable"), Message: aws.String("injected")}
		}
		return nil
	}}
	var waits []int
	s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{
		MaxAttempts: 3,
		Backoff:     func(attempt int) time.Duration { waits = append(waits, attempt); return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SendEntries(t.Context(), []sqsbatch.Entry{{ID: "a", Body: "fine"}, {ID: "b", Body: "never"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1 || len(res.Failures) != 1 {
		t.Fatalf("sent %d failed %d, want 1 and 1", res.Sent, len(res.Failures))
	}
	f := res.Failures[0]
	if f.Entry.ID != "b" || f.Code != "ServiceUnavailable" || f.SenderFault || f.Attempts != 3 {
		t.Errorf("failure %+v, want b, ServiceUnavailable, not sender fault, 3 attempts", f)
	}
	if !slices.Equal(waits, []int{1, 2}) {
		t.Errorf("backoff asked for attempts %v, want [1 2]", waits)
	}
	receiveAll(t, c, url, 1)
}

func TestThrottlingAndConnectionErrorsRetried(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	// A client for a port nobody listens on gives the SDK's real
	// connection error; its own retries are off so that ours are tested.
	dead := sqs.NewFromConfig(localaws.Config("http://127.0.0.1:1"), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	fc := &sqsfault.Client{API: c, RequestErr: func(n int) error {
		switch n {
		case 1:
			return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected", Fault: smithy.FaultServer}
		case 2:
			_, err := dead.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{
				QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("x")}},
			})
			if err == nil {
				panic("send to a closed port succeeded")
			}
			return err
		}
		return nil
	}}
	s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{Backoff: noWait, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SendEntries(t.Context(), entries("t", 10))
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 10 || res.Failed != 0 || res.Requests != 3 || res.Retries != 20 {
		t.Errorf("sent=%d failed=%d requests=%d retries=%d, want 10, 0, 3, 20", res.Sent, res.Failed, res.Requests, res.Retries)
	}
	calls := fc.Requests()
	if len(calls) != 3 || !strings.Contains(calls[1].Err.Error(), "connection refused") {
		t.Errorf("calls %v: want the second to fail with connection refused", calls)
	}
	receiveAll(t, c, url, 10)
}

func TestStopErrors(t *testing.T) {
	c := newClient(t)
	t.Run("missing queue", func(t *testing.T) {
		url := createQueue(t, c, false, nil)
		if _, err := c.DeleteQueue(t.Context(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Fatal(err)
		}
		fc := &sqsfault.Client{API: c}
		s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url, MaxMessageSize: 1 << 20}, sqsbatch.Options{MaxInFlight: 1, Backoff: noWait})
		if err != nil {
			t.Fatal(err)
		}
		in := entries("lost", 25)
		res, err := s.SendEntries(t.Context(), in)
		var stop *sqsbatch.StopError
		if !errors.As(err, &stop) || stop.Code != "AWS.SimpleQueueService.NonExistentQueue" && stop.Code != "QueueDoesNotExist" {
			t.Fatalf("err = %v, want a *StopError for the missing queue", err)
		}
		if res.Sent != 0 || len(res.Failures) != 25 || res.Requests != 1 || len(fc.Requests()) != 1 {
			t.Errorf("sent=%d failures=%d requests=%d calls=%d, want 0, 25, 1, 1", res.Sent, len(res.Failures), res.Requests, len(fc.Requests()))
		}
		seen := map[int]bool{}
		for _, f := range res.Failures {
			seen[f.Seq] = true
			if !errors.As(f, &stop) {
				t.Errorf("failure %v does not wrap the StopError", f)
			}
		}
		if len(seen) != 25 {
			t.Errorf("failures cover %d distinct entries, want 25", len(seen))
		}
		// Resolving the attributes of a missing queue fails in New.
		if _, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{URL: url}, sqsbatch.Options{}); !errors.As(err, &stop) {
			t.Errorf("New on a missing queue: %v, want *StopError", err)
		}
	})
	t.Run("access denied", func(t *testing.T) {
		url := createQueue(t, c, false, nil)
		fc := &sqsfault.Client{API: c, RequestErr: func(int) error {
			return &smithy.GenericAPIError{Code: "AccessDenied", Message: "injected", Fault: smithy.FaultClient}
		}}
		s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: 1, Backoff: noWait})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.SendEntries(t.Context(), entries("denied", 35))
		var stop *sqsbatch.StopError
		if !errors.As(err, &stop) || stop.Code != "AccessDenied" {
			t.Fatalf("err = %v, want *StopError AccessDenied", err)
		}
		if len(fc.Requests()) != 1 || len(res.Failures) != 35 || res.Failures[0].Code != "AccessDenied" {
			t.Errorf("calls=%d failures=%d, want 1 call and all 35 entries failed with AccessDenied", len(fc.Requests()), len(res.Failures))
		}
	})
}

func TestQueueByName(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, false, map[string]string{"MaximumMessageSize": "4096"})
	name := url[strings.LastIndex(url, "/")+1:]
	account := strings.Split(url, "/")[3]
	s, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{Name: name, OwnerAccountID: account}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.QueueURL(), "/"+name) || s.MaxMessageSize() != 4096 || s.FIFO() {
		t.Errorf("resolved %s size %d fifo %v, want the queue's URL, 4096, false", s.QueueURL(), s.MaxMessageSize(), s.FIFO())
	}
	if res, err := s.SendEntries(t.Context(), entries("named", 3)); err != nil || res.Sent != 3 {
		t.Fatalf("send by name: sent %d, %v", res.Sent, err)
	}
	receiveAll(t, c, url, 3)

	_, err = sqsbatch.New(t.Context(), c, sqsbatch.Queue{Name: "no-such-queue-" + fmt.Sprint(time.Now().UnixNano())}, sqsbatch.Options{})
	var stop *sqsbatch.StopError
	if !errors.As(err, &stop) {
		t.Errorf("New with a missing name: %v, want *StopError", err)
	}
}

func TestFIFOOrder(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, true, nil)
	const groups, perGroup = 4, 25
	// Whole requests are throttled now and then; g1's entries from 7 on
	// fail with a retryable error on their first two attempts; g2's entry
	// 11 is rejected for good.
	fc := &sqsfault.Client{
		API: c,
		RequestErr: func(n int) error {
			if n%4 == 2 {
				return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected"}
			}
			return nil
		},
		EntryErr: func(body string, attempt int) *types.BatchResultErrorEntry {
			switch {
			case groupEntry(body, 1) >= 7 && attempt <= 2:
				return &types.BatchResultErrorEntry{Code: aws.String("InternalError"), Message: aws.String("injected")}
			case body == "g2-11":
				return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), Message: aws.String("injected"), SenderFault: true}
			}
			return nil
		},
	}
	s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{Backoff: noWait, MaxInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !s.FIFO() {
		t.Fatal("FIFO() = false for a FIFO queue")
	}
	// Each group's entries come in runs of three, so that a request holds
	// several entries of one group, as real data does.
	var in []sqsbatch.Entry
	for run := 0; run*3 < perGroup; run++ {
		for g := range groups {
			for i := run * 3; i < min(run*3+3, perGroup); i++ {
				body := fmt.Sprintf("g%d-%d", g, i)
				in = append(in, sqsbatch.Entry{ID: body, Body: body, GroupID: fmt.Sprintf("g%d", g), DeduplicationID: body})
			}
		}
	}
	res, err := s.SendEntries(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	wantFailed := map[string]string{"g2-11": "InvalidParameterValue"}
	for i := 12; i < perGroup; i++ {
		wantFailed[fmt.Sprintf("g2-%d", i)] = sqsbatch.CodeGroupFailed
	}
	// Entries of g2 sent in the same request as g2-11, after it, were
	// already accepted by SQS; the rest of the group must fail.
	got := failureCodes(res)
	for id := range got {
		if _, ok := wantFailed[id]; !ok {
			t.Errorf("unexpected failure %s: %s", id, got[id])
		}
	}
	if got["g2-11"] != "InvalidParameterValue" {
		t.Errorf("g2-11 failed with %q, want InvalidParameterValue", got["g2-11"])
	}
	msgs := receiveAll(t, c, url, res.Sent)
	last := map[string]int{}
	for _, m := range msgs {
		var g, i int
		if _, err := fmt.Sscanf(aws.ToString(m.Body), "g%d-%d", &g, &i); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint("g", g)
		if prev, ok := last[key]; ok && i <= prev {
			t.Errorf("group %s: entry %d received after %d", key, i, prev)
		}
		last[key] = i
		if g == 2 && i > 11 && got[aws.ToString(m.Body)] != "" {
			t.Errorf("%s is both received and failed", aws.ToString(m.Body))
		}
	}
	if res.Sent+res.Failed != len(in) {
		t.Errorf("sent %d + failed %d != %d entries", res.Sent, res.Failed, len(in))
	}
	for g := range groups {
		if g != 2 && last[fmt.Sprint("g", g)] != perGroup-1 {
			t.Errorf("group g%d ends at %d, want %d", g, last[fmt.Sprint("g", g)], perGroup-1)
		}
	}
	// No request held a group that another request in flight also held:
	// with throttling on every fourth request this would show as a
	// reordering above, so it is checked there.
}

func TestFIFOValidation(t *testing.T) {
	c := newClient(t)
	url := createQueue(t, c, true, map[string]string{"ContentBasedDeduplication": "true"})
	s, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SendEntries(t.Context(), []sqsbatch.Entry{
		{ID: "a1", Body: "a1", GroupID: "a"},
		{ID: "nogroup", Body: "x"},
		{ID: "a2", Body: "a2\x00", GroupID: "a"},
		{ID: "a3", Body: "a3", GroupID: "a"},
		{ID: "b1", Body: "b1", GroupID: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"nogroup": string(sqsbatch.RuleMissingGroupID), "a2": string(sqsbatch.RuleInvalidCharacters), "a3": sqsbatch.CodeGroupFailed}
	if diff := cmp.Diff(want, failureCodes(res)); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a1", "b1"}, localaws.Bodies(receiveAll(t, c, url, 2))); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

func TestCancel(t *testing.T) {
	// Idle keep-alive connections of the HTTP client are not Send's.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	c := newClient(t)
	url := createQueue(t, c, false, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Requests after the fifth hang until the context ends, as a stalled
	// network would.
	fc := &sqsfault.Client{API: c}
	slow := &stallClient{Client: fc, after: 5}
	s, err := sqsbatch.New(ctx, slow, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	infinite := func(yield func(sqsbatch.Entry) bool) {
		for i := 0; ; i++ {
			read++
			if !yield(sqsbatch.Entry{ID: fmt.Sprint(i), Body: fmt.Sprint("e", i)}) {
				return
			}
		}
	}
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := s.Send(ctx, infinite)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Send returned %v after cancel, want promptly", elapsed-300*time.Millisecond)
	}
	if res.Sent+len(res.Failures) != read {
		t.Errorf("sent %d + failed %d != %d entries read", res.Sent, len(res.Failures), read)
	}
	if res.Sent != 50 {
		t.Errorf("sent %d, want the 50 of the first five requests", res.Sent)
	}
	for _, f := range res.Failures {
		if f.Code != "Canceled" {
			t.Errorf("failure %v, want code Canceled", f)
			break
		}
	}
	receiveAll(t, c, url, 50)
}

// stallClient sends the first `after` requests and blocks the rest until
// their context ends.
type stallClient struct {
	*sqsfault.Client
	after int
	n     atomicCounter
}

func (s *stallClient) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if s.n.add() > s.after {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Client.SendMessageBatch(ctx, in, opts...)
}

// groupEntry returns i for a body "g<group>-<i>", or -1.
func groupEntry(body string, group int) int {
	var g, i int
	if _, err := fmt.Sscanf(body, "g%d-%d", &g, &i); err != nil || g != group {
		return -1
	}
	return i
}
