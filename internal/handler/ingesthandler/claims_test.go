package ingesthandler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/engine"
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
	if s := summaryOf(t, f.summary); s.Skipped[engine.SkipDone] != 1 || s.RecordsSent != 0 {
		t.Errorf("repeated notification: summary %+v, want one object skipped as %s", s, engine.SkipDone)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, a))
}

// gateS3 holds every GetObject until open is closed.
type gateS3 struct {
	engine.S3API
	open chan struct{}
}

func (g gateS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.S3API.GetObject(ctx, in, opts...)
}

// TestClaimsInProgress delivers a notification while another delivery of
// it is reading the object: the second sends nothing and fails (reason
// in-progress), and its retry, after the first finished, succeeds without
// sending.
func TestClaimsInProgress(t *testing.T) {
	f := newFixture(t, "", nil)
	a := f.put("events/date=2024-01-02/held.jsonl", `{"id":1}`+"\n"+`{"id":2}`+"\n")
	client, table := localaws.ClaimsTable(t)
	o := f.defaults()
	o.runner.Claims = claims.NewTable(client, table, claims.TableOptions{})
	gate := gateS3{S3API: f.s3, open: make(chan struct{})}
	first := f.handler(o, nil, gate)
	second := f.handler(o, nil, nil)

	done := make(chan error, 1)
	go func() {
		resp, err := first.Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(a)}))
		if err == nil && len(resp.BatchItemFailures) != 0 {
			err = fmt.Errorf("first delivery failed: %v", resp.BatchItemFailures)
		}
		done <- err
	}()
	// The first delivery holds the claim once its item is in the table.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table)})
		if err == nil && len(out.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first delivery took no claim")
		}
	}
	resp, err := second.Handle(t.Context(), sqsEvent(msg{id: "m2", body: s3Body(a)}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"m2"}, failures(resp)); diff != "" {
		t.Errorf("batchItemFailures while the object is held (-want +got):\n%s", diff)
	}
	if s := summaryOf(t, f.summary); s.FailedBy[engine.FailInProgress] != 1 || s.RecordsSent != 0 {
		t.Errorf("summary %+v, want one message failed as %s and nothing sent", s, engine.FailInProgress)
	}
	close(gate.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	summaryOf(t, f.summary)
	resp, err = second.Handle(t.Context(), sqsEvent(msg{id: "m2", body: s3Body(a)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %v, %v", resp.BatchItemFailures, err)
	}
	if s := summaryOf(t, f.summary); s.Skipped[engine.SkipDone] != 1 {
		t.Errorf("retry: summary %+v, want the object skipped as %s", s, engine.SkipDone)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, a))
}
