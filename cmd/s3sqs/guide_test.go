package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestHelpUnknownCommand: an unknown command exits 2 with a word on
// stderr, asked as `s3sqs NAME` or `s3sqs help NAME`.
func TestHelpUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"help", "nope"}, {"help", "fanout", "extra"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "s3sqs") || !strings.Contains(errOut, `Run "s3sqs -h"`) && !strings.Contains(errOut, "usage: s3sqs COMMAND") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the reason on stderr", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "", "help", "redrive"); code != 0 || !strings.Contains(errOut, "-dlq") {
		t.Errorf("help redrive: exit %d:\n%s", code, errOut)
	}
}

// TestFanoutEmptyDataset: a prefix that holds no object is an error that
// names the bucket, the prefix and the filters, in-process and with
// -work-queue-url, unless -allow-empty; the report is printed all the same.
func TestFanoutEmptyDataset(t *testing.T) {
	s3c, sqsc := standIns(t)
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/a.jsonl"), Body: strings.NewReader(`{"value":"a"}` + "\n")}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	base := []string{"fanout", "-bucket", "lake", "-target-queue-url", target, "-s3-path-style"}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-prefix", "nothing-here/"}, 1, "no object under s3://lake/nothing-here/ (-bucket lake -prefix nothing-here/)"},
		{[]string{"-prefix", "in/", "-suffix", ".csv"}, 1, "no object under s3://lake/in/ (-bucket lake -prefix in/) that the filters keep: they left out 1 (-suffix 1)"},
		{[]string{"-prefix", "nothing-here/", "-work-queue-url", work}, 1, "no object under s3://lake/nothing-here/"},
		{[]string{"-prefix", "nothing-here/", "-allow-empty"}, 0, ""},
		{[]string{"-prefix", "in/"}, 0, ""},
	} {
		code, out, errOut := runCLI(t, "", append(base, tt.args...)...)
		var rep engine.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Errorf("%v: stdout is not the report: %v\n%s", tt.args, err, out)
		}
		if code != tt.code || tt.want != "" && (!strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "-allow-empty")) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
		if tt.want == "" && strings.Contains(errOut, "no object") {
			t.Errorf("%v: stderr:\n%s", tt.args, errOut)
		}
	}
}

// TestQueueErrorsNameFlags: a queue that does not exist is named by the
// flag that names it, never by a Go field or another command, and the run,
// started, still prints its JSON.
func TestQueueErrorsNameFlags(t *testing.T) {
	s3c, sqsc := standIns(t)
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/a.jsonl"), Body: strings.NewReader(`{"value":"a"}` + "\n")}); err != nil {
		t.Fatal(err)
	}
	gone := localaws.CreateQueue(t, sqsc, "-target", nil) + "-gone"
	for _, tt := range []struct {
		args []string
		want string
		json any
	}{
		{[]string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", gone, "-run-id", "r1"}, "s3sqs fanout: -target-queue-url: queue " + gone + " cannot be used: AWS.SimpleQueueService.NonExistentQueue", &engine.Report{}},
		{[]string{"ingest", "-bucket", "lake", "-key", "in/a.jsonl", "-output-queue-url", gone}, "s3sqs ingest: -output-queue-url: queue " + gone + " cannot be used: AWS.SimpleQueueService.NonExistentQueue", &map[string]any{}},
		{[]string{"redrive", "-dlq", gone}, "s3sqs redrive: -dlq: queue " + gone + " cannot be used: AWS.SimpleQueueService.NonExistentQueue", &redrive.Summary{}},
	} {
		code, out, errOut := runCLI(t, "", append(tt.args, "-s3-path-style")...)
		if code != 1 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "MaxMessageSize") || strings.Contains(errOut, "fanout: target queue") || strings.Contains(errOut, "fanout: dead-letter queue") {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant 1 and %q", tt.args[0], code, errOut, tt.want)
		}
		if err := json.Unmarshal([]byte(out), tt.json); err != nil || out == "" {
			t.Errorf("%v: stdout is not JSON: %v\n%s", tt.args[0], err, out)
		}
	}
}

// TestProgressRateLive: a progress line written before the run's end
// shows the messages sent so far and a non-zero rate.
func TestProgressRateLive(t *testing.T) {
	s3c, sqsc := standIns(t)
	var b strings.Builder
	const n = 3000
	for i := range n {
		b.WriteString(`{"value":"v` + strconv.Itoa(i) + `"}` + "\n")
	}
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("slow/a.jsonl"), Body: strings.NewReader(b.String())}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "slow/", "-target-queue-url", target,
		"-s3-path-style", "-max-in-flight", "1", "-progress-interval", "5ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	line := regexp.MustCompile(`progress records=(\d+) .* messages=(\d+) msgs_per_s=(\d+) `)
	live := false
	for _, m := range line.FindAllStringSubmatch(errOut, -1) {
		msgs, _ := strconv.Atoi(m[2])
		rate, _ := strconv.Atoi(m[3])
		if msgs > 0 && msgs < n && rate > 0 {
			live = true
		}
	}
	if !live {
		t.Errorf("no progress line before the end shows messages and a rate:\n%.3000s", errOut)
	}
}

// TestRedriveFromFile redrives the local failure file fanout wrote: its
// record is sent, the marker beside it keeps a second run from sending it
// again.
func TestRedriveFromFile(t *testing.T) {
	s3c, sqsc := standIns(t)
	body := `{"value":"ok"}` + "\n" + `{"value":"bad` + "\\u0000" + `"}` + "\n"
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("ff/a.jsonl"), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	t.Chdir(t.TempDir())
	if code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "ff/", "-target-queue-url", target, "-s3-path-style", "-run-id", "ff-1", spark[0], spark[1]); code != 1 || !strings.Contains(errOut, "failed records are in s3sqs-failures-ff-1.jsonl") {
		t.Fatalf("fanout: exit %d\n%s", code, errOut)
	}
	localaws.Drain(t, sqsc, target, time.Second)
	args := []string{"redrive", "-from-file", "s3sqs-failures-ff-1.jsonl", "-target-queue-url", target, "-replace-invalid-characters", "-s3-path-style"}
	code, out, errOut := runCLI(t, "", args...)
	var sum redrive.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Sent != 1 || sum.From != "s3sqs-failures-ff-1.jsonl" {
		t.Fatalf("redrive: exit %d, %+v (%v)\n%s", code, sum, err, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, time.Second)); n != 1 {
		t.Errorf("%d messages on the target, want the 1 redriven", n)
	}
	code, out, _ = runCLI(t, "", args...)
	sum = redrive.Summary{}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Sent != 0 || sum.Skipped != 1 {
		t.Errorf("second redrive: exit %d, %+v (%v); want the record skipped by the marker", code, sum, err)
	}
}

// TestTypos: a mistyped command or flag gets one line that says what was
// meant, not the whole usage; one that is nothing like any gets none.
// `s3sqs version` says what was built.
func TestTypos(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, hint string
	}{
		{[]string{"fanuot"}, `unknown command "fanuot"; did you mean fanout?`, `Run "s3sqs -h" for the commands.`},
		{[]string{"stauts", "-run-id", "r"}, "did you mean status?", ""},
		{[]string{"help", "redirve"}, "did you mean redrive?", ""},
		{[]string{"xyzzy"}, `unknown command "xyzzy"` + "\n", ""},
		{[]string{"fanout", "-tagret-queue-url", "q"}, "s3sqs fanout: flag provided but not defined: -tagret-queue-url; did you mean -target-queue-url?", `Run "s3sqs fanout -h" for its flags.`},
		{[]string{"status", "--runid", "r"}, "did you mean -run-id?", ""},
		{[]string{"fanout", "-zzzzzzzz"}, "flag provided but not defined: -zzzzzzzz\n", ""},
	} {
		code, out, errOut := runCLI(t, "", tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, tc.hint) || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and two lines with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCLI(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "s3sqs ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: exit %d, %q; want 0 and the version with the Go it was built with", args, code, out)
		}
	}
	if code, _, errOut := runCLI(t, "", "fanout", "-h"); code != 0 || !strings.Contains(errOut, "-max-rate messages") {
		t.Errorf("fanout -h: exit %d; want -max-rate's placeholder to name its kind:\n%.3000s", code, errOut)
	}
}

// TestLogFormat: -log-format json logs the run's warnings as JSON lines, as
// the functions do; another format is refused.
func TestLogFormat(t *testing.T) {
	if code, _, errOut := runCLI(t, "", "fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", "https://sqs.us-east-1.amazonaws.com/1/q", "-log-format", "xml"); code != 2 || !strings.Contains(errOut, `-log-format: "xml" is not text or json`) {
		t.Errorf("-log-format xml: exit %d\n%s", code, errOut)
	}
	for _, format := range []string{"text", "json"} {
		c := newFanoutCmd(io.Discard)
		if err := c.flags.Parse([]string{"-log-format", format}); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		c.flags.logger(&b).Warn("object listed but not found: skipped", "object", "s3://b/k")
		c.flags.logger(&b).Info("not shown")
		var line map[string]any
		isJSON := json.Unmarshal([]byte(b.String()), &line) == nil && line["msg"] == "object listed but not found: skipped"
		if isJSON != (format == "json") || strings.Contains(b.String(), "not shown") || !strings.Contains(b.String(), "s3://b/k") {
			t.Errorf("-log-format %s wrote %q", format, b.String())
		}
	}
}

// TestLogFormatJSONLines runs fanout with -log-format json against the
// stand-ins, with a line that is not JSON: every line of stderr is a JSON object (the logger's
// warnings and the command's own progress and summary lines alike).
func TestLogFormatJSONLines(t *testing.T) {
	s3c, sqsc := standIns(t)
	put(t, s3c, "json/a.jsonl", "{\"n\":1}\nnot json\n")
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "json/", "-target-queue-url", target, "-s3-path-style",
		"-log-format", "json", "-progress-interval", "1ms", "-failure-file", filepath.Join(t.TempDir(), "f.jsonl"))
	if code != 1 {
		t.Errorf("exit %d, want 1 (a record failed)", code)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	msgs := ""
	for _, l := range lines {
		var v struct{ Time, Level, Msg string }
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Time == "" || v.Level == "" || v.Msg == "" {
			t.Errorf("stderr line is not a JSON log line (%v): %q", err, l)
		}
		msgs += v.Msg + "\n"
	}
	for _, want := range []string{"2 records read, 1 sent, 1 failed", "failed records are in"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestJSONLines(t *testing.T) {
	var b strings.Builder
	j := &jsonLines{w: &b, now: func() time.Time { return time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC) }}
	io.WriteString(j, "s3sqs fanout: half")
	io.WriteString(j, " a line\n{\"level\":\"WARN\",\"msg\":\"as is\"}\n\nlast")
	j.Close()
	want := `{"time":"2026-12-04T00:00:00Z","level":"INFO","msg":"s3sqs fanout: half a line"}` + "\n" +
		`{"level":"WARN","msg":"as is"}` + "\n" +
		`{"time":"2026-12-04T00:00:00Z","level":"INFO","msg":"last"}` + "\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
