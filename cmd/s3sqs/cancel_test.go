package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// TestFanoutCancelledInProcess steers a run that s3sqs fanout sends in its
// own process, without a work queue, as an operator would: status finds it
// while it runs, cancel stops it (exit 3, saying how to go on), status then
// says cancelled with nothing in progress, and resume followed by the same
// command sends the rest, after which status says done.
func TestFanoutCancelledInProcess(t *testing.T) {
	_, table, _ := runsTable(t, nil)
	s3c, sqsc := standIns(t)
	const n = 3000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%d"}`+"\n", i)
	}
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/a.jsonl"), Body: strings.NewReader(b.String())}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	const id = "cancel-in-process"
	args := []string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, "-s3-path-style",
		"-chunk-size", "4KiB", "-concurrency", "1", "-max-rate", "300", "-claims-table", table, "-run-id", id}
	status := func(want ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, "", "status", "-run-id", id, "-claims-table", table)
		for _, w := range want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("status: exit %d, want %q in\n%s%s", code, w, out, errOut)
			}
		}
	}

	type result struct {
		code   int
		stderr string
	}
	ended := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(t.Context(), args, nil, &out, &errOut, false)
		ended <- result{code, errOut.String()}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := sqsc.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(target),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err == nil && out.Attributes["ApproximateNumberOfMessages"] != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing sent in 20 s")
		}
	}
	status(": in progress", "planned")
	if code, out, errOut := runCLI(t, "", "cancel", "-run-id", id, "-claims-table", table); code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, errOut)
	}
	var first result
	select {
	case first = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled run still runs after 30 s")
	}
	if first.code != exitCancelled || !strings.Contains(first.stderr, "was cancelled") ||
		!strings.Contains(first.stderr, "s3sqs resume -run-id "+id+" -claims-table "+table+", then the same command") {
		t.Errorf("the cancelled run: exit %d, want %d and how to go on\n%s", first.code, exitCancelled, first.stderr)
	}
	got := map[string]int{}
	drain := func() {
		// Quiet for longer than the 2 s a receive whose answer the
		// stand-in lost hides its messages.
		for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
			got[aws.ToString(m.Body)]++
		}
	}
	drain()
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("the cancelled run sent %d of %d records; want some, not all\n%s", len(got), n, first.stderr)
	}
	status(": cancelled", " in progress, 0 parked", "stopped by a cancel")

	if code, out, errOut := runCLI(t, "", "resume", "-run-id", id, "-claims-table", table); code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", args...); code != 0 {
		t.Fatalf("the same command again: exit %d\n%s%s", code, out, errOut)
	}
	drain()
	if len(got) != n {
		t.Errorf("%d distinct records arrived over both runs, want %d", len(got), n)
	}
	status(": done", " 0 in progress")
}
