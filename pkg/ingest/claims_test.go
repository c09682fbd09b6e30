package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/localaws"
	"github.com/s3sqs/s3sqs/internal/s3fault"
	"github.com/s3sqs/s3sqs/pkg/claims"
)

// TestClaimsNotificationOnce breaks an object's read half-way: its
// message fails, and its retry resumes where the first attempt stopped.
// The same notification delivered again (through SNS this time) does
// nothing. Every record arrives once.
func TestClaimsNotificationOnce(t *testing.T) {
	f := newFixture(t, "", nil)
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"id":%d,"pad":"%s"}`+"\n", i, strings.Repeat("x", i%13))
	}
	a := f.put("events/date=2024-01-01/big.jsonl", b.String())
	client, table := localaws.ClaimsTable(t)
	o := f.defaults()
	o.runner.Claims = claims.NewTable(client, table, claims.TableOptions{})
	broken := &s3fault.CutAt{S3API: f.s3, At: int64(b.Len() / 2)}
	h := f.handler(o, nil, broken)

	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(a)}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"m1"}, failures(resp)); diff != "" {
		t.Fatalf("batchItemFailures (-want +got):\n%s", diff)
	}
	if s := summaryOf(t, f.summary); s.RecordsSent == 0 || s.RecordsSent >= 200 {
		t.Fatalf("first attempt sent %d records, want those before the cut", s.RecordsSent)
	}
	broken.Heal()
	resp, err = h.Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(a)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %v, %v", resp.BatchItemFailures, err)
	}
	if !strings.Contains(f.logs.String(), "task resumes where an earlier attempt stopped") {
		t.Error("the retry did not resume from the claim")
	}
	summaryOf(t, f.summary)
	resp, err = h.Handle(t.Context(), sqsEvent(msg{id: "m2", body: snsBody(s3Body(a))}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("repeated notification: %v, %v", resp.BatchItemFailures, err)
	}
	if s := summaryOf(t, f.summary); s.Skipped[reasonDone] != 1 || s.RecordsSent != 0 {
		t.Errorf("repeated notification: summary %+v, want one object skipped as %s", s, reasonDone)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, a))
}
