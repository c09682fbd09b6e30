package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// spark is the Spark SQS sink's column mapping, in which the tests' records
// are written: their value is the body (by default a record is sent whole).
var spark = []string{"-body-field", "value", "-attributes-field", "msg_attributes", "-group-id-field", "group_id"}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(stdin), &out, &errb, false)
	return code, out.String(), errb.String()
}

func TestParseShapes(t *testing.T) {
	files, err := filepath.Glob("../../pkg/s3event/testdata/*.json")
	if err != nil || len(files) < 20 {
		t.Fatalf("testdata: %v, %d files", err, len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			args := []string{"parse", f}
			if strings.HasPrefix(name, "moto-eventbridge") {
				args = []string{"parse", "-eventbridge-keys-raw", f}
			}
			code, out, _ := runCLI(t, "", args...)
			bad := strings.HasPrefix(name, "unrecognized-") || strings.HasPrefix(name, "malformed-") ||
				strings.Contains(name, "malformed") || strings.Contains(name, "not-json") || strings.Contains(name, "bad-escape")
			if bad != (code == 1) || (!bad && code != 0) {
				t.Errorf("exit %d for %s:\n%s", code, name, out)
			}
			if bad && !strings.Contains(out, "cannot") {
				t.Errorf("no reason given:\n%s", out)
			}
			if strings.Contains(name, "test-event") && !strings.Contains(out, "s3:TestEvent") {
				t.Errorf("test event not named:\n%s", out)
			}
		})
	}
}

func TestParseOutput(t *testing.T) {
	body := `{"Records":[{"eventSource":"aws:s3","eventTime":"2024-01-01T00:00:00.000Z","eventName":"ObjectCreated:Put","awsRegion":"eu-west-1",
		"s3":{"bucket":{"name":"lake"},"object":{"key":"t/date%3D2024-01-01/n%3Da+b%2Bc/__HIVE_DEFAULT_PARTITION__/f.json","size":5}}}]}`
	ev, _ := json.Marshal(map[string]any{"Records": []map[string]any{{"messageId": "m-1", "eventSource": "aws:sqs", "body": body}}})
	code, out, _ := runCLI(t, string(ev), "parse")
	for _, want := range []string{"message m-1:", "s3://lake/t/date=2024-01-01/n=a b+c/__HIVE_DEFAULT_PARTITION__/f.json",
		`partition date = "2024-01-01" (typed: 2024-01-01`, `partition n = "a b+c"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	code, out, _ = runCLI(t, "this is not json", "parse")
	if code != 1 || !strings.Contains(out, "cannot read") {
		t.Errorf("garbage: exit %d:\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	const q = "https://sqs.us-east-1.amazonaws.com/111122223333/target"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "usage: s3sqs COMMAND"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-mode", "fast"}, `-mode: "fast" is not record, chunk or notification`},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-format", "xml"}, "-format"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-chunk-size", "huge"}, "-chunk-size"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-chunk-size", "-1"}, "-chunk-size: -1 bytes is not a chunk size from 1KiB to 1GiB"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-max-in-flight", "1000000000000"}, "-max-in-flight: 1000000000000 is not a whole number from 1 to 1000"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-fixed-in-flight", "-work-queue-url", q}, "-fixed-in-flight applies to sends made here"},
		{[]string{"ingest", "-output-queue-url", q, "-read-concurrency", "65"}, "-read-concurrency: 65 is not a whole number from 1 to 64"},
		{[]string{"ingest", "-output-queue-url", q, "-max-in-flight", "0"}, "-max-in-flight: 0 is not a whole number from 1 to 1000"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-target-max-message-size", "256"}, "-target-max-message-size: 256 bytes is outside SQS's range"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", "orders"}, `-target-queue-url: "orders" is not a queue URL`},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-run-id", "a/b"}, "-run-id: runId: \"a/b\" may hold only"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/"}, "-target-queue-url"},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-offload-s3-uri", "s3://b/o/", "-offload", "sometimes"}, `-offload: "sometimes" is not large or always`},
		{[]string{"fanout", "-bucket", "b", "-prefix", "p/", "-target-queue-url", q, "-offload-s3-uri", "s3://b/date=1/"}, `-offload-s3-uri: key prefix "date=1/" has "="`},
		// No dataset named: never the whole bucket unless -all says so.
		{[]string{"fanout", "-bucket", "b", "-target-queue-url", q}, "the source names no dataset"},
		{[]string{"fanout", "-bucket", "b", "-keys", "", "-target-queue-url", q}, "the source names no dataset"},
		{[]string{"fanout", "-bucket", "b", "-all", "-prefix", "p/", "-target-queue-url", q}, "the source names prefix and all"},
		{[]string{"fanout", "-bucket", "s3://b/p/", "-prefix", "p/", "-target-queue-url", q}, "is not a bucket name"},
		{[]string{"fanout", "-no-such-flag"}, "no-such-flag"},
		{[]string{"ingest", "-output-queue-url", q, "-partitions", "yes"}, `-partitions: "yes" is not true, false or typed`},
		{[]string{"ingest", "-output-queue-url", q, "-event-types", "ObjectCreated:Put,ObjectCreate:*"}, `-event-types: "ObjectCreate:*" is not an S3 event type`},
		{[]string{"parse", "a", "b"}, "at most one FILE"},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, "", tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if code, out, _ := runCLI(t, "", "--help"); code != 0 || !strings.Contains(out, "fanout") || !strings.Contains(out, "parse") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "", "fanout", "-h"); code != 0 || !strings.Contains(errOut, "-target-queue-name") || !strings.Contains(errOut, "-failure-file") {
		t.Errorf("fanout -h: exit %d:\n%s", code, errOut)
	}
}

// standIns points the CLI's SDK configuration at an in-process S3 with a
// bucket "lake" and at the SQS stand-in, and returns their clients.
func standIns(t *testing.T) (*s3.Client, *sqs.Client) {
	t.Helper()
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	s3URL := localaws.FakeS3URL(t)
	s3c := localaws.S3Client(s3URL)
	t.Setenv("AWS_ENDPOINT_URL_S3", s3URL)
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	return s3c, sqsc
}

// motoS3 points the CLI's S3 client at moto_server, with the stand-ins'
// region and credentials, and returns a client of it for the test's own
// set-up.
func motoS3(t *testing.T) *s3.Client {
	t.Helper()
	moto := localaws.Endpoint(t, localaws.EnvMoto)
	t.Setenv("AWS_ENDPOINT_URL_S3", moto)
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	return localaws.S3Client(moto)
}

// motoRig is the stand-ins of a CLI test that needs S3's storage classes
// and DynamoDB: moto_server for both, with a claims table and a new bucket,
// and the SQS stand-in.
type motoRig struct {
	s3            *s3.Client
	sqs           *sqs.Client
	table, bucket string
}

// newMotoRig points the CLI at moto_server for S3 and DynamoDB and makes a
// claims table and a bucket whose name starts with prefix.
func newMotoRig(t *testing.T, prefix string) motoRig {
	t.Helper()
	r := motoRig{s3: motoS3(t), sqs: sqs.NewFromConfig(localaws.SQS(t)), bucket: fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", localaws.Endpoint(t, localaws.EnvMoto))
	_, r.table = localaws.ClaimsTable(t)
	if _, err := r.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(r.bucket)}); err != nil {
		t.Fatal(err)
	}
	return r
}

// put writes an object of the rig's bucket in storage class class.
func (r motoRig) put(t *testing.T, key string, class s3types.StorageClass, body string) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key), StorageClass: class, Body: strings.NewReader(body)}
	if _, err := r.s3.PutObject(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

func TestFanout(t *testing.T) {
	s3c, sqsc := standIns(t)
	var b strings.Builder
	for i := range 2000 {
		b.WriteString(`{"value":"v` + strings.Repeat("x", i%7) + `","n":` + strconv.Itoa(i) + `}` + "\n")
	}
	b.WriteString(`{"value":"bad` + "\\u0000" + `"}` + "\n")
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/date=2024-01-01/a b.jsonl"), Body: strings.NewReader(b.String())}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	failFile := filepath.Join(t.TempDir(), "failed.jsonl")
	code, out, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, spark[0], spark[1],
		"-s3-path-style", "-chunk-size", "4KiB", "-failure-file", failFile, "-progress-interval", "1ms", "-run-id", "cli-1")
	if code != 1 {
		t.Errorf("exit %d, want 1 (a record failed)\n%s", code, errOut)
	}
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	if rep.RunID != "cli-1" || rep.RecordsRead != 2001 || rep.RecordsSent != 2000 || rep.RecordsFailed != 1 {
		t.Errorf("report %+v", rep)
	}
	if rep.RecordsMapped != 2001 || !slices.Equal(rep.FieldsLeftOut, []string{"n"}) || !strings.Contains(errOut, `2001 records sent as their "value" field; fields left out of them: n`) {
		t.Errorf("report %+v: want the 2001 records mapped and n left out, and stderr saying so:\n%.2000s", rep.Stats, errOut)
	}
	if !strings.Contains(errOut, "progress records=") || !strings.Contains(errOut, "failed records are in "+failFile) {
		t.Errorf("stderr lacks progress lines or the failure file:\n%.2000s", errOut)
	}
	data, err := os.ReadFile(failFile)
	if err != nil || !strings.Contains(string(data), `"code":"InvalidCharacters"`) || !strings.Contains(string(data), `"runId":"cli-1"`) {
		t.Errorf("failure file: %v\n%s", err, data)
	}
	if n := len(localaws.Drain(t, sqsc, target, 3*time.Second)); n != 2000 {
		t.Errorf("%d messages on the target, want 2000", n)
	}
}

// TestFanoutWorkQueue plans a prefix with -work-queue-url: the CLI sends
// nothing itself, queues one task per chunk for the deployed function, shows
// the planning's progress, and the tasks, run as the function runs them,
// send every record.
func TestFanoutWorkQueue(t *testing.T) {
	s3c, sqsc := standIns(t)
	records := 0
	for o := range 12 {
		var b strings.Builder
		for i := range 100 * (o + 1) { // 1 to 3 chunks of 4 KiB each
			fmt.Fprintf(&b, `{"value":"o%d-r%d"}`+"\n", o, i)
			records++
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("wq/part %02d.jsonl", o)), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	code, out, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "wq/", "-target-queue-url", target, "-work-queue-url", work,
		"-s3-path-style", "-chunk-size", "4KiB", "-progress-interval", "1ms", "-run-id", "cli-queued")
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, stdout %s (%v)\n%s", code, out, err, errOut)
	}
	if !rep.Queued || rep.Objects != 12 || rep.Chunks < 13 || rep.TasksQueued != rep.Chunks || rep.RecordsSent != 0 {
		t.Errorf("report %+v: want 12 objects, every chunk a queued task, nothing sent here", rep)
	}
	if !strings.Contains(errOut, "progress objects=") || !strings.Contains(errOut, fmt.Sprintf("%d chunk tasks queued on %s", rep.TasksQueued, work)) {
		t.Errorf("stderr lacks planning progress or the summary:\n%.2000s", errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 500*time.Millisecond)); n != 0 {
		t.Errorf("%d messages on the target before any task ran, want 0", n)
	}
	msgs := localaws.Drain(t, sqsc, work, time.Second)
	if len(msgs) != rep.TasksQueued {
		t.Fatalf("%d tasks on the work queue, report says %d", len(msgs), rep.TasksQueued)
	}
	runner, err := engine.New(t.Context(), s3c, sqsc, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []worktask.Task
	for _, m := range msgs {
		task, err := worktask.Parse(aws.ToString(m.Body))
		if err != nil || task.RunID != "cli-queued" {
			t.Fatalf("task %s: %v", aws.ToString(m.Body), err)
		}
		// The function sends them where and as the CLI was told.
		if ov, _ := json.Marshal(task.Overrides); !strings.Contains(string(ov), `"targetQueueUrl":"`+target+`"`) || !strings.Contains(string(ov), `"chunkSize":"4KiB"`) || strings.Contains(string(ov), "maxInFlight") {
			t.Fatalf("task overrides %s: want the CLI's target and -chunk-size, and no flag that was not given", ov)
		}
		tasks = append(tasks, task)
	}
	for _, res := range runner.RunTasks(t.Context(), tasks, 0) {
		if res.Err != nil || res.Continuation != nil {
			t.Fatalf("task: %+v", res)
		}
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != records {
		t.Errorf("%d records on the target after the tasks ran, want %d", n, records)
	}
}

// TestFanoutOffload sends a record too large for a 256 KiB queue with
// -offload-s3-uri: it arrives as an SQS Extended Client pointer, counted in
// the report.
func TestFanoutOffload(t *testing.T) {
	s3c, sqsc := standIns(t)
	big := `{"value":"` + strings.Repeat("x", 300<<10) + `"}`
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("big/a.jsonl"), Body: strings.NewReader(`{"value":"small"}` + "\n" + big + "\n")}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "262144"})
	code, out, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-key", "big/a.jsonl", "-target-queue-url", target, spark[0], spark[1],
		"-s3-path-style", "-offload-s3-uri", "s3://lake/offload/", "-progress-interval", "1ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.RecordsSent != 2 || rep.RecordsOffloaded != 1 {
		t.Fatalf("report %s (%v); want 2 records sent, 1 offloaded", out, err)
	}
	resolver := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{})
	var pointers int
	for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
		body, ptr, err := resolver.Resolve(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if ptr != nil {
			pointers++
			// The body is the record's value field, as fanout maps it.
			if body != strings.Repeat("x", 300<<10) {
				t.Errorf("the pointer resolves to %d bytes, not the record's value", len(body))
			}
		}
	}
	if pointers != 1 {
		t.Errorf("%d pointers on the target, want 1", pointers)
	}
}

func TestProgressLine(t *testing.T) {
	var p engine.Progress
	p.BytesPlanned.Store(4_000_000)
	p.BytesRead.Store(1_000_000)
	p.RecordsRead.Store(5000)
	p.Messages.Store(400)
	p.RecordsFailed.Store(2)
	bar := progressLine(&p, 10*time.Second, true)
	for _, want := range []string{"[======", " 25%", "5000 records", "1.0/4.0 MB", "40 msg/s", "2 failed", "ETA 30s"} {
		if !strings.Contains(bar, want) {
			t.Errorf("bar %q lacks %q", bar, want)
		}
	}
	line := progressLine(&p, 10*time.Second, false)
	if want := "records=5000 mb=1.0 planned_mb=4.0 messages=400 msgs_per_s=40 failed=2 eta=30s"; line != want {
		t.Errorf("line %q, want %q", line, want)
	}
}

// TestIngest runs `s3sqs ingest` on an object named by -bucket and -key,
// and on a notification read from stdin that names two objects, one of
// which holds a line that is not JSON.
func TestIngest(t *testing.T) {
	s3c, sqsc := standIns(t)
	put := func(key, body string) {
		t.Helper()
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// Both of 18 bytes, as the notification below says.
	put("events/date=2024-01-01/a b.jsonl", `{"id":1}`+"\n"+`{"id":2}`+"\n")
	put("events/date=2024-01-02/bad.jsonl", `{"id":3}`+"\n"+`not json`+"\n")
	out := localaws.CreateQueue(t, sqsc, "-out", nil)

	code, stdout, stderr := runCLI(t, "", "ingest", "-bucket", "lake", "-key", "events/date=2024-01-01/a b.jsonl", "-output-queue-url", out, "-s3-path-style")
	if code != 0 || !strings.Contains(stdout, `"batchItemFailures": []`) {
		t.Fatalf("ingest -bucket -key: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, m := range localaws.Drain(t, sqsc, out, 2*time.Second) {
		var rec struct {
			ID   int    `json:"id"`
			Date string `json:"date"`
			File struct {
				Key string `json:"key"`
			} `json:"_file"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil || rec.Date != "2024-01-01" || rec.File.Key != "events/date=2024-01-01/a b.jsonl" {
			t.Errorf("record %s (%v): want the partition and _file added", aws.ToString(m.Body), err)
		}
	}

	failFile := filepath.Join(t.TempDir(), "failed.jsonl")
	note := `{"Records":[` + record("events/date%3D2024-01-01/a+b.jsonl") + `,` + record("events/date%3D2024-01-02/bad.jsonl") + `]}`
	code, stdout, stderr = runCLI(t, note, "ingest", "-output-queue-url", out, "-s3-path-style", "-failure-file", failFile)
	if code != 1 || !strings.Contains(stdout, `"batchItemFailures": []`) || !strings.Contains(stderr, "failed records are in "+failFile) ||
		!strings.Contains(stderr, "1 messages (0 failed), 2 objects, 4 records read, 3 sent, 1 failed") {
		t.Errorf("ingest of a notification: exit %d (want 1: a record failed, the notification did not)\n%s\n%s", code, stdout, stderr)
	}
	if n := len(localaws.Drain(t, sqsc, out, 2*time.Second)); n != 3 {
		t.Errorf("%d records on the output queue, want 3", n)
	}
	data, err := os.ReadFile(failFile)
	var f engine.Failure
	if err != nil || json.Unmarshal(data, &f) != nil || f.Source != "s3://lake/events/date=2024-01-02/bad.jsonl" || f.Offset != 9 || f.Code != "UnreadableRecord" {
		t.Errorf("failure file %s (%v): want the line that is not JSON at offset 9", data, err)
	}

	// A whole Lambda SQS event: the message that is not a notification
	// fails, by its id; the object that is gone is skipped, not failed.
	event := `{"Records":[{"messageId":"m-bad","eventSource":"aws:sqs","body":"not a notification"},` +
		`{"messageId":"m-gone","eventSource":"aws:sqs","body":` + strconv.Quote(`{"Records":[`+record("events/gone.jsonl")+`]}`) + `}]}`
	code, stdout, stderr = runCLI(t, event, "ingest", "-output-queue-url", out, "-s3-path-style")
	if code != 1 || !strings.Contains(stdout, `"itemIdentifier": "m-bad"`) || strings.Contains(stdout, "m-gone") ||
		!strings.Contains(stderr, "2 messages (1 failed), 1 objects, 0 records read") || !strings.Contains(stderr, "deleted before it was read") ||
		!strings.Contains(stderr, "message reported as failed") || !strings.Contains(stderr, "m-bad") {
		t.Errorf("ingest of an event: exit %d (want 1, m-bad failed, the object gone skipped)\n%s\n%s", code, stdout, stderr)
	}

	if code, _, stderr := runCLI(t, "", "ingest", "-bucket", "lake"); code != 2 || !strings.Contains(stderr, "-output-queue-url") {
		t.Errorf("ingest without a queue: exit %d, %s", code, stderr)
	}
}

// record is an S3 notification record of a created object of 18 bytes in
// bucket lake.
func record(key string) string {
	return `{"eventVersion":"2.1","eventSource":"aws:s3","eventName":"ObjectCreated:Put","eventTime":"2024-01-01T00:00:00.000Z",` +
		`"s3":{"bucket":{"name":"lake"},"object":{"key":"` + key + `","size":18}}}`
}

// TestFanoutOutputsCheckedFirst names a failure bucket that does not
// exist, then a mistyped claims table: each is refused, naming its flag,
// before a record is read or sent, where they were found only when a
// record first needed them and the records refused by then ended nowhere.
func TestFanoutOutputsCheckedFirst(t *testing.T) {
	_, table, _ := runsTable(t, nil)
	s3c, sqsc := standIns(t)
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("in/a.jsonl"), Body: strings.NewReader("{\"a\":1}\n")}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-failure-s3-uri", "s3://no-such-bucket/failures"}, "-failure-s3-uri: bucket no-such-bucket does not exist"},
		{[]string{"-report-s3-uri", "s3://no-such-reports/runs"}, "-report-s3-uri: bucket no-such-reports does not exist"},
		{[]string{"-claims-table", table + "-typo"}, "-claims-table: cannot read DynamoDB table " + table + "-typo"},
	} {
		args := append([]string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, "-s3-path-style"}, tc.args...)
		code, out, errOut := runCLI(t, "", args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 1 and %q\n%s\n%s", tc.args, code, tc.want, out, errOut)
		}
		if n := len(localaws.Drain(t, sqsc, target, 500*time.Millisecond)); n != 0 {
			t.Errorf("%v: %d messages sent, want none", tc.args, n)
		}
	}
}

// TestFanoutInterruptedWithClaims interrupts `s3sqs fanout -claims-table`
// once its first messages arrive, as Ctrl-C does, then runs the same
// command again: the interrupted run released its claims where it
// stopped, so the second run is not refused as "held by another runner"
// for the claims' lease, and between them every record arrives.
func TestFanoutInterruptedWithClaims(t *testing.T) {
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
	args := []string{"fanout", "-bucket", "lake", "-prefix", "in/", "-target-queue-url", target, "-s3-path-style",
		"-chunk-size", "4KiB", "-concurrency", "1", "-max-in-flight", "1", "-fixed-in-flight", "-claims-table", table, "-run-id", "ctrl-c"}

	ctx, interrupt := context.WithCancel(t.Context())
	go func() {
		for ctx.Err() == nil {
			out, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(target),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
			if err == nil && out.Attributes["ApproximateNumberOfMessages"] != "0" {
				interrupt()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var out1, err1 bytes.Buffer
	code := run(ctx, args, nil, &out1, &err1, false)
	interrupt()
	got := map[string]int{}
	drain := func() {
		for _, m := range localaws.Drain(t, sqsc, target, time.Second) {
			got[aws.ToString(m.Body)]++
		}
	}
	drain()
	first := len(got)
	if first == 0 || first >= n {
		t.Fatalf("the interrupted run sent %d of %d records (exit %d); want some, not all\n%s", first, n, code, err1.String())
	}
	if code != 130 || !strings.Contains(err1.String(), "run the same command (-run-id ctrl-c) to continue") {
		t.Errorf("the interrupted run: exit %d, want 130 and how to continue\n%s", code, err1.String())
	}
	t.Logf("interrupted: exit %d, %d of %d records sent\n%s", code, first, n, err1.String())
	// What was cut off mid-send is on no failure output: it is not
	// counted failed, and the report adds up.
	var rep engine.Report
	if err := json.Unmarshal(out1.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out1.String())
	}
	if rep.RecordsFailed != 0 || rep.RecordsRead != rep.RecordsSent+rep.RecordsCutOff {
		t.Errorf("interrupted report: %d read, %d sent, %d failed, %d cut off (%d arrived); want none failed, read = sent + cut off",
			rep.RecordsRead, rep.RecordsSent, rep.RecordsFailed, rep.RecordsCutOff, first)
	}

	code, out, errOut := runCLI(t, "", args...)
	if code != 0 {
		t.Fatalf("the same command again: exit %d\n%s\n%s", code, out, errOut)
	}
	drain()
	if len(got) != n {
		t.Errorf("%d distinct records arrived over both runs, want %d", len(got), n)
	}
}
