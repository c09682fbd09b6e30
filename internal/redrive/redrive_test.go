package redrive

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

func TestParseReportURI(t *testing.T) {
	tests := []struct {
		uri, bucket, base, run, err string
	}{
		{uri: "s3://b/reports/r1/", bucket: "b", base: "reports/r1/", run: "r1"},
		{uri: "s3://b/reports/r1", bucket: "b", base: "reports/r1/", run: "r1"},
		{uri: "s3://b/reports/r1/manifest.json", bucket: "b", base: "reports/r1/", run: "r1"},
		{uri: "s3://b/r1/failed/", bucket: "b", base: "r1/", run: "r1"},
		{uri: "s3://b/", err: "names no run"},
		{uri: "s3://b/reports/a b/", err: "does not end with a run id"},
		{uri: "b/reports/r1/", err: "is not an s3://bucket/key URI"},
	}
	for _, tt := range tests {
		bucket, base, run, err := ParseReportURI(tt.uri)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.uri, err, tt.err)
			}
			continue
		}
		if err != nil || bucket != tt.bucket || base != tt.base || run != tt.run {
			t.Errorf("%s: %q %q %q %v", tt.uri, bucket, base, run, err)
		}
	}
	if got := ReportURI("s3://b/reports/", "r1"); got != "s3://b/reports/r1/" {
		t.Errorf("ReportURI: %s", got)
	}
}

func TestRedriveRunID(t *testing.T) {
	if got := RedriveRunID("r1"); got != "r1-redrive" {
		t.Errorf("%s", got)
	}
	long := RedriveRunID(strings.Repeat("a", 80))
	if len(long) != 80 || !strings.HasSuffix(long, "-redrive") || engine.CheckRunID(long) != nil {
		t.Errorf("%q (%d) is not a run id", long, len(long))
	}
}

func TestCodeFilter(t *testing.T) {
	codes, err := ParseCodes(" InvalidCharacters,UnreadableRecord ")
	if err != nil || !cmp.Equal(codes, []string{"InvalidCharacters", "UnreadableRecord"}) {
		t.Fatalf("%v %v", codes, err)
	}
	for _, bad := range []string{"", "A,,B", "A B", `"A"`} {
		if _, err := ParseCodes(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	only := CodeFilter{Only: codes}
	if ok, _ := only.allows("UnreadableRecord"); !ok {
		t.Error("-code refuses a code it lists")
	}
	if ok, why := only.allows("MessageTooLarge"); ok || why != "code MessageTooLarge is not selected (-code InvalidCharacters,UnreadableRecord)" {
		t.Errorf("-code: %v %q", ok, why)
	}
	skip := CodeFilter{Skip: codes}
	if ok, why := skip.allows("InvalidCharacters"); ok || why != "code InvalidCharacters is skipped (-skip-code)" {
		t.Errorf("-skip-code: %v %q", ok, why)
	}
	if ok, _ := (CodeFilter{}).allows("Anything"); !ok {
		t.Error("the zero filter refuses a code")
	}
}

func TestPace(t *testing.T) {
	p := newPace(100) // 10ms a message
	start := time.Now()
	for range 3 {
		if err := p.wait(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
	}
	// The first ten at once, the next after 100ms, the last after 200ms.
	if took := time.Since(start); took < 190*time.Millisecond || took > 2*time.Second {
		t.Errorf("30 messages at 100/s: %s", took)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.wait(ctx, 1); err == nil {
		t.Error("a wait outlived its context")
	}
	if err := newPace(0).wait(t.Context(), 1<<20); err != nil {
		t.Error(err)
	}
}

func TestCollector(t *testing.T) {
	var c collector
	line := `{"runId":"r","source":"s3://b/k","offset":7,"code":"MessageTooLarge","message":"m","senderFault":true,"attempts":1}` + "\n"
	// Written in two parts, as a writer may.
	c.Write([]byte(line[:20]))
	c.Write([]byte(line[20:] + strings.Replace(line, `"offset":7`, `"offset":9`, 1)))
	got := c.take()
	if len(got) != 2 || got[7].Code != "MessageTooLarge" || got[9].Source != "s3://b/k" {
		t.Errorf("%+v", got)
	}
	if len(c.take()) != 0 {
		t.Error("take does not forget")
	}
	if _, err := c.Write([]byte("not json\n")); err == nil {
		t.Error("a line that is not a failure was taken")
	}
}

func TestMoved(t *testing.T) {
	m := types.Message{MessageId: aws.String("id-1"), Body: aws.String("b"),
		MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("v")}},
		Attributes:        map[string]string{"MessageGroupId": "g", "MessageDeduplicationId": "d"}}
	e := moved(m, true)
	if e.Body != "b" || e.GroupID != "g" || e.DeduplicationID != "d" || aws.ToString(e.Attributes["a"].StringValue) != "v" {
		t.Errorf("FIFO: %+v", e)
	}
	delete(m.Attributes, "MessageDeduplicationId")
	if e := moved(m, true); e.DeduplicationID != "id-1" {
		t.Errorf("without a deduplication id: %q, want the message id", e.DeduplicationID)
	}
	if e := moved(m, false); e.GroupID != "" || e.DeduplicationID != "" {
		t.Errorf("standard: %+v", e)
	}
}
