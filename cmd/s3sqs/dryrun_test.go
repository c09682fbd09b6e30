package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestFanoutDryRun runs `s3sqs fanout -dry-run` end to end: it prints the
// dry run's report on stdout and its summary on stderr, sends nothing to
// the target or the work queue and writes no failure file, and its counts
// are those of the same command without -dry-run, which then sends.
func TestFanoutDryRun(t *testing.T) {
	s3c, sqsc := standIns(t)
	for o := range 3 {
		var b strings.Builder
		for i := range 700 {
			fmt.Fprintf(&b, `{"value":"o%d-%d-%s"}`+"\n", o, i, strings.Repeat("x", i%50))
		}
		b.WriteString(`{"value":"bad` + "\\u0000" + `"}` + "\n")
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("in/%d.jsonl", o)), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	t.Chdir(t.TempDir())
	base := []string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, "-s3-path-style", "-chunk-size", "16KiB", "-run-id", "cli-dry", spark[0], spark[1]}

	code, out, errOut := runCLI(t, "", append(base, "-dry-run", "-sample-chunks", "100", "-sqs-price", "0.40", "-lambda-price", "0.0000133334")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut)
	}
	var dry engine.Report
	if err := json.Unmarshal([]byte(out), &dry); err != nil || dry.DryRun == nil {
		t.Fatalf("stdout is not a dry run's report (%v):\n%s", err, out)
	}
	d := dry.DryRun
	for _, want := range []string{"dry run of run cli-dry: nothing was sent; counts exact", fmt.Sprintf("%d records in %d messages, %d SendMessageBatch requests", d.Records, d.Messages, d.Requests),
		fmt.Sprintf("%d to the failure output", d.Failed), "sending from this process", "no Lambda time", "cost:     SQS $"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if e := d.Estimate; e.GBSeconds != 0 || e.LambdaCost != 0 || e.Invocations != 0 || e.Seconds <= 0 || strings.Contains(errOut, "GB-s") {
		t.Errorf("a run sent from this process estimated %+v:\n%s; want its time, and no Lambda time or cost", e, errOut)
	}
	if got := localaws.ReceiveAll(t.Context(), sqsc, target, time.Second); len(got) > 0 {
		t.Errorf("the target holds %d messages after a dry run", len(got))
	}
	if files, _ := filepath.Glob("s3sqs-failures-*"); len(files) > 0 {
		t.Errorf("the dry run wrote %v", files)
	}
	t.Logf("stderr:\n%s", errOut)

	code, out, errOut = runCLI(t, "", append(base, "-dry-run", "-work-queue-url", work, "-invocations", "5", "-memory-mb", "2048")...)
	var queued engine.Report
	if err := json.Unmarshal([]byte(out), &queued); code != 0 || err != nil || queued.DryRun == nil || !queued.DryRun.Queued ||
		queued.DryRun.Estimate.Invocations != 5 || queued.DryRun.Estimate.MemoryMB != 2048 || !strings.Contains(errOut, "queued on the work queue in") {
		t.Errorf("dry run with -work-queue-url: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := localaws.ReceiveAll(t.Context(), sqsc, work, time.Second); len(got) > 0 {
		t.Errorf("the work queue holds %d messages after a dry run", len(got))
	}

	code, out, errOut = runCLI(t, "", append(base, "-concurrency", "1")...)
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("real run: exit %d, %v\n%s", code, err, errOut)
	}
	if rep.RecordsRead != d.Records || rep.Messages != d.Messages || rep.Requests != d.Requests || rep.RecordsFailed != d.Failed || d.Failed != 3 {
		t.Errorf("real run read %d records, sent %d messages in %d requests, %d failed; the dry run counted %d, %d, %d, %d",
			rep.RecordsRead, rep.Messages, rep.Requests, rep.RecordsFailed, d.Records, d.Messages, d.Requests, d.Failed)
	}
	os.Remove("s3sqs-failures-cli-dry.jsonl")
}

// TestFanoutDryRunFlags: the dry run's flags are refused without -dry-run
// and out of their range, naming the flag.
func TestFanoutDryRunFlags(t *testing.T) {
	const q = "https://sqs.us-east-1.amazonaws.com/111122223333/target"
	base := []string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-invocations", "10"}, "-invocations applies with -dry-run"},
		{[]string{"-sqs-price", "0.4"}, "-sqs-price applies with -dry-run"},
		{[]string{"-dry-run", "-memory-mb", "64"}, "-memory-mb: want from 128 to 10240"},
		{[]string{"-dry-run", "-sample-chunks", "-1"}, "-sample-chunks: want from 1 to 100000"},
		{[]string{"-dry-run", "-lambda-price", "-2"}, "-lambda-price: want a price of at least 0"},
	} {
		code, out, errOut := runCLI(t, "", append(base, tt.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// TestDryRunSaysWhyRecordsFail previews a CSV object read as JSON Lines,
// the wrong format a backfill can start with: the dry run sends nothing
// and says that every record would fail, and why, before the run.
func TestDryRunSaysWhyRecordsFail(t *testing.T) {
	s3c, sqsc := standIns(t)
	put(t, s3c, "wrong/a.jsonl", "id,name\n1,ada\n2,bob\n")
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "wrong/", "-target-queue-url", target, "-s3-path-style", "-dry-run")
	if code != 0 || !strings.Contains(errOut, "3 to the failure output (100% of the records; in the chunks read: UnreadableRecord 3)") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 500*time.Millisecond)); n != 0 {
		t.Errorf("the dry run sent %d messages", n)
	}
}
