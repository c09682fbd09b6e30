package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestRedriveUsageErrors(t *testing.T) {
	const q = "https://sqs.us-east-1.amazonaws.com/111122223333/q"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"redrive"}, "name what to redrive"},
		{[]string{"redrive", "-dlq", q, "-from-queue", q, "-target-queue-url", q}, "name one source to redrive, not -from-queue and -dlq"},
		{[]string{"redrive", "-dlq", "orders-dlq"}, `-dlq: "orders-dlq" is not a queue URL`},
		{[]string{"redrive", "-dlq", q, "-to", "arn:aws:sqs:us-east-1:1:q"}, "-to: \"arn:aws:sqs:us-east-1:1:q\" is not a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/name; that is an ARN"},
		{[]string{"redrive", "-dlq", q, "-target-queue-url", q}, "-target-queue-url applies to a run report or the failure output; with -dlq name the queue with -to"},
		{[]string{"redrive", "-dlq", q, "-code", "InvalidCharacters"}, "-code applies to a run report or the failure output"},
		{[]string{"redrive", "-dlq", q, "-rate", "-1"}, "-rate: -1 is not a whole number from 0 (no limit) to 10000"},
		{[]string{"redrive", "-dlq", q, "-native", "-rate", "1000"}, "-rate: 1000 is above the 500 messages per second StartMessageMoveTask allows"},
		{[]string{"redrive", "-dlq", q, "-visibility-timeout", "1500ms"}, "-visibility-timeout: 1.5s is not a whole number of seconds"},
		{[]string{"redrive", "-from-queue", q}, "name the queue the failure output's records go to: -target-queue-url"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-delete"}, "-delete applies with -from-s3 and -from-file only"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-to", q}, "-to applies with -dlq only"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-code", "A,,B"}, `-code: "A,,B" is not a comma-separated list of error codes`},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-code", "A", "-skip-code", "B"}, "give -code or -skip-code, not both"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-format", "xml"}, "-format"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-max-attempts", "0"}, "-max-attempts: 0 is not a whole number from 1 to 100"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-partitions", "typed"}, "-partitions applies with -ingest only"},
		{[]string{"redrive", "-from-queue", q, "-target-queue-url", q, "-ingest", "-partitions", "yes"}, `-partitions: "yes" is not true, false or typed`},
		{[]string{"redrive", "-from-s3", "lake/failures", "-target-queue-url", q}, `-from-s3: dataset: "lake/failures" is not an s3://bucket/key URI`},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-target-queue-url", q, "-work-queue-url", q}, "send a run report's failures to -work-queue-url"},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/"}, "send a run report's failures to -work-queue-url"},
		{[]string{"redrive", "-report", "s3://lake/", "-work-queue-url", q}, "names no run"},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-work-queue-url", q, "-rate", "5"}, "-rate applies to the failure output and a DLQ only"},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-work-queue-url", q, "-reread"}, "-reread applies to the failure output"},
		{[]string{"redrive", "-report-s3-uri", "s3://lake/reports", "-work-queue-url", q}, "-report-s3-uri needs -run-id"},
		{[]string{"redrive", "-report-s3-uri", "s3://lake/reports", "-run-id", "a/b", "-work-queue-url", q}, `-run-id: runId: "a/b" may hold only`},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-run-id", "r1", "-work-queue-url", q}, "-run-id applies with -report-s3-uri only"},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-work-queue-url", q, "-redrive-run-id", "x y"}, "-redrive-run-id: runId"},
		{[]string{"redrive", "-report", "s3://lake/reports/r1/", "-work-queue-url", q, "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, "", tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if code, out, _ := runCLI(t, "", "--help"); code != 0 || !strings.Contains(out, "redrive") {
		t.Errorf("--help does not list redrive: exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "", "redrive", "-h"); code != 0 || !strings.Contains(errOut, "-from-queue") || !strings.Contains(errOut, "-dry-run") {
		t.Errorf("redrive -h: exit %d:\n%s", code, errOut)
	}
}

func TestRedriveLine(t *testing.T) {
	var p redrive.Progress
	p.Total.Store(100)
	p.Done.Store(25)
	p.Sent.Store(20)
	p.Skipped.Store(3)
	p.Failed.Store(2)
	bar := redriveLine(&p, 10*time.Second, true)
	for _, want := range []string{"[======", " 25%", "25/100", "sent 20", "skipped 3", "failed 2", "2 msg/s", "ETA 30s"} {
		if !strings.Contains(bar, want) {
			t.Errorf("bar %q lacks %q", bar, want)
		}
	}
	if got, want := redriveLine(&p, 10*time.Second, false), "total=100 done=25 sent=20 skipped=3 failed=2 msgs_per_s=2 eta=30s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}

// redriveCLI runs `s3sqs redrive` with args and returns its exit code,
// its summary and its stderr.
func redriveCLI(t *testing.T, args ...string) (int, redrive.Summary, string) {
	t.Helper()
	code, out, errOut := runCLI(t, "", append([]string{"redrive", "-progress-interval", "1ms"}, args...)...)
	var sum redrive.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("redrive %v: exit %d, stdout is not the summary: %v\n%s\n%s", args, code, err, out, errOut)
	}
	if sum.Total != sum.Sent+sum.WouldSend+sum.Skipped+sum.Failed {
		t.Errorf("the summary does not add up: %+v", sum)
	}
	return code, sum, errOut
}

// reasons returns the outcome and reason of each item of sum not sent,
// by its record's body-independent name: source offset.
func reasons(sum redrive.Summary) map[string]string {
	out := map[string]string{}
	for _, it := range sum.Items {
		k := it.ID
		if it.Offset != nil {
			k = strconv.FormatInt(*it.Offset, 10)
		}
		out[k] = string(it.Outcome) + ": " + it.Reason
	}
	return out
}

// lines is an object of JSON Lines records and their offsets.
type lines struct {
	b       strings.Builder
	offsets map[string]int64 // by name
}

func (l *lines) add(name, line string) {
	if l.offsets == nil {
		l.offsets = map[string]int64{}
	}
	l.offsets[name] = int64(l.b.Len())
	l.b.WriteString(line + "\n")
}

func (l *lines) value(name, value string) { l.add(name, `{"value":"`+value+`"}`) }

// put writes an object to bucket lake and returns it pinned as a listing
// pins it, by its ETag.
func put(t *testing.T, c *s3.Client, key, body string) dataset.Object {
	t.Helper()
	out, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	return dataset.Object{Bucket: "lake", Key: key, ETag: strings.Trim(aws.ToString(out.ETag), `"`)}
}

// head returns the object pinned as a run naming its key pins it, by
// HeadObject: by its version, where S3 gives one.
func head(t *testing.T, c *s3.Client, key string) dataset.Object {
	t.Helper()
	obj, err := dataset.Head(t.Context(), c, "lake", key, "")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func setMaxSize(t *testing.T, c *sqs.Client, url string, n int) {
	t.Helper()
	if _, err := c.SetQueueAttributes(t.Context(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(n)}}); err != nil {
		t.Fatal(err)
	}
}

// queued returns how many messages the queue holds, visible or not.
func queued(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	f, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return v + f
}

// records returns the messages as body → record id, failing on a record
// id that is not the one the engine gives the record of that body.
func records(t *testing.T, msgs []types.Message) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		if _, dup := out[body]; dup {
			t.Errorf("%.40s... arrived twice", body)
		}
		out[body] = aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)
	}
	return out
}

// TestRedriveReport redrives a fanout run whose target refused its large
// records (MaximumMessageSize 1 KiB), after the limit was raised: from the
// run report, only the failed records are sent again from here, with the
// record ids the run gave them; a second redrive sends nothing; a dry run
// sends nothing; and from a second run's report, the failed tasks go to the
// work queue from their first failed record, where fanout's consumer runs
// them.
func TestRedriveReport(t *testing.T) {
	s3c, sqsc := standIns(t)
	var l lines
	for i := range 60 {
		switch i {
		case 5, 31, 52:
			l.value(fmt.Sprintf("big-%d", i), fmt.Sprintf("big-%02d-", i)+strings.Repeat("x", 1100))
		case 40:
			l.add("bad", "not json")
		default:
			l.value(fmt.Sprintf("s%02d", i), fmt.Sprintf("s%02d", i))
		}
	}
	put(t, s3c, "in/part-0.jsonl", l.b.String())
	obj := head(t, s3c, "in/part-0.jsonl")
	target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "1024"})
	fanoutRun := func(runID string) {
		t.Helper()
		code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-key", obj.Key, "-target-queue-url", target, "-s3-path-style", spark[0], spark[1],
			"-chunk-size", "1KiB", "-run-id", runID, "-report-s3-uri", "s3://lake/reports", "-failure-file", t.TempDir()+"/f.jsonl", "-progress-interval", "1h")
		if code != 1 {
			t.Fatalf("fanout %s: exit %d, want 1 (records failed)\n%s", runID, code, errOut)
		}
		if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 56 {
			t.Fatalf("fanout %s sent %d records, want 56", runID, n)
		}
	}
	fanoutRun("r1")
	setMaxSize(t, sqsc, target, 262144)
	bigs := map[string]string{}
	for _, i := range []int{5, 31, 52} {
		bigs[fmt.Sprintf("big-%02d-", i)+strings.Repeat("x", 1100)] = engine.RecordID(obj, l.offsets[fmt.Sprintf("big-%d", i)])
	}
	badAt := strconv.FormatInt(l.offsets["bad"], 10)

	code, sum, errOut := redriveCLI(t, "-report", "s3://lake/reports/r1/", "-target-queue-url", target, "-dry-run")
	if code != 0 || sum.WouldSend != 4 || sum.Sent != 0 || !strings.Contains(errOut, "dry run: 4 records") {
		t.Errorf("dry run: exit %d, %+v\n%s", code, sum, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 0 {
		t.Errorf("the dry run sent %d messages", n)
	}

	code, sum, errOut = redriveCLI(t, "-report", "s3://lake/reports/r1/", "-target-queue-url", target)
	if code != 0 || sum.Total != 4 || sum.Sent != 3 || sum.Skipped != 1 {
		t.Errorf("redrive: exit %d, want 0 with 3 records sent and 1 skipped: %+v\n%s", code, sum, errOut)
	}
	if r := reasons(sum)[badAt]; !strings.HasPrefix(r, "skipped: it still cannot be read") {
		t.Errorf("the line that is not JSON: %q", r)
	}
	if !strings.Contains(errOut, "progress total=4") {
		t.Errorf("no progress line:\n%s", errOut)
	}
	if diff := cmp.Diff(bigs, records(t, localaws.Drain(t, sqsc, target, 2*time.Second))); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}

	code, sum, errOut = redriveCLI(t, "-report-s3-uri", "s3://lake/reports", "-run-id", "r1", "-target-queue-url", target)
	if code != 0 || sum.Sent != 0 || sum.Skipped != 4 {
		t.Errorf("second redrive: exit %d, want nothing sent: %+v\n%s", code, sum, errOut)
	}
	for k, r := range reasons(sum) {
		if k != badAt && !strings.Contains(r, "sent by an earlier redrive (marker s3://lake/reports/r1/redriven/") {
			t.Errorf("record at %s: %q", k, r)
		}
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 0 {
		t.Errorf("the second redrive sent %d messages", n)
	}

	// The work queue: the failed tasks, from their first failed record.
	setMaxSize(t, sqsc, target, 1024)
	fanoutRun("r2")
	setMaxSize(t, sqsc, target, 262144)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	// A task per chunk (of 1 KiB) with failures, resuming at its first.
	first := map[int64]int64{}
	for _, name := range []string{"big-5", "big-31", "bad", "big-52"} {
		off := l.offsets[name]
		if f, ok := first[off/1024]; !ok || off < f {
			first[off/1024] = off
		}
	}
	var failedAt []int64
	for _, off := range first {
		failedAt = append(failedAt, off)
	}
	slices.Sort(failedAt)
	code, sum, errOut = redriveCLI(t, "-report", "s3://lake/reports/r2", "-work-queue-url", work)
	if code != 0 || sum.Sent != 4 || sum.TasksQueued != len(first) || !strings.Contains(errOut, fmt.Sprintf("%d tasks queued", len(first))) {
		t.Fatalf("redrive to the work queue: exit %d, %+v; want 4 records in %d tasks\n%s", code, sum, len(first), errOut)
	}
	code, sum, _ = redriveCLI(t, "-report", "s3://lake/reports/r2/", "-work-queue-url", work)
	if code != 0 || sum.Sent != 0 || sum.TasksQueued != 0 || sum.Skipped != 4 {
		t.Errorf("second redrive to the work queue: exit %d, want nothing queued: %+v", code, sum)
	}
	tasks := localaws.Drain(t, sqsc, work, 2*time.Second)
	if len(tasks) != len(first) {
		t.Fatalf("%d tasks on the work queue, want %d", len(tasks), len(first))
	}
	var resumes []int64
	for _, m := range tasks {
		task, err := worktask.Parse(aws.ToString(m.Body))
		if err != nil || task.RunID != "r2-redrive" || task.Chunk.Object != obj {
			t.Fatalf("task %s (%v): want one of run r2-redrive on %v", aws.ToString(m.Body), err, obj)
		}
		resumes = append(resumes, task.ResumeAt)
	}
	slices.Sort(resumes)
	if !cmp.Equal(resumes, failedAt) {
		t.Errorf("tasks resume at %v, want the failed records' offsets %v", resumes, failedAt)
	}
	// fanout's work queue consumer runs them: the large records arrive,
	// with the records after them in their chunks, which consumers drop
	// by record id.
	r, err := engine.New(t.Context(), s3c, sqsc, engine.Options{Target: sqsbatch.Queue{URL: target}})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(esm.Event(tasks, "arn:aws:sqs:us-east-1:000000000000:work"))
	out, err := fanouthandler.New(r, s3c, fanouthandler.Options{}).Invoke(t.Context(), payload)
	if resp, ok := out.(events.SQSEventResponse); err != nil || !ok || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("fanout's consumer: %v, %+v", err, out)
	}
	got := records(t, localaws.Drain(t, sqsc, target, 2*time.Second))
	for body, id := range bigs {
		if got[body] != id {
			t.Errorf("the work queue's task did not deliver %.10s... with record id %s (got %q)", body, id, got[body])
		}
	}
}

// TestRedriveChainedTask redrives a run report's failed task that is a
// link of a FIFO object's chain: the task queued runs its own chunk from
// the failed record, not the rest of the object, which the run sent.
func TestRedriveChainedTask(t *testing.T) {
	s3c, sqsc := standIns(t)
	var l lines
	for i := range 40 {
		l.value(fmt.Sprintf("r%02d", i), fmt.Sprintf("r%02d", i))
	}
	put(t, s3c, "fifo/part-0.jsonl", l.b.String())
	obj := head(t, s3c, "fifo/part-0.jsonl")
	failedAt := l.offsets["r12"]
	link := worktask.Task{RunID: "r3", Chain: &worktask.Chain{Step: 256, Total: obj.Size},
		Chunk: dataset.Chunk{Object: obj, Index: 1, Count: int((obj.Size + 255) / 256), Start: 256, End: 512, Format: dataset.FormatJSONL}}
	ft, _ := json.Marshal(engine.FailedTask{Task: link, Failures: []engine.FailedRecord{{Offset: failedAt, Code: "InternalError", Message: "retries used up"}}})
	put(t, s3c, "reports/r3/failed/"+link.ID()+".json", string(ft))
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	if code, sum, errOut := redriveCLI(t, "-report", "s3://lake/reports/r3/", "-work-queue-url", work); code != 0 || sum.TasksQueued != 1 {
		t.Fatalf("redrive: exit %d, %+v\n%s", code, sum, errOut)
	}
	msgs := localaws.Drain(t, sqsc, work, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d tasks queued, want 1", len(msgs))
	}
	task, err := worktask.Parse(aws.ToString(msgs[0].Body))
	if err != nil || task.Chain != nil || task.ResumeAt != failedAt || task.Chunk.Start != 256 || task.Chunk.End != 512 {
		t.Errorf("queued %s (%v): want the link's chunk from offset %d, unchained", aws.ToString(msgs[0].Body), err, failedAt)
	}
}

// failingOutput runs fanout over the dataset of bucket lake that flags
// name into target, whose MaximumMessageSize is 1 KiB, with the failure
// output flags names, and expects records to fail.
func failingOutput(t *testing.T, sqsc *sqs.Client, target string, wantSent int, flags ...string) {
	t.Helper()
	args := append([]string{"fanout", "-bucket", "lake", "-target-queue-url", target, "-s3-path-style", "-progress-interval", "1h", spark[0], spark[1]}, flags...)
	code, _, errOut := runCLI(t, "", args...)
	if code != 1 {
		t.Fatalf("fanout: exit %d, want 1 (records failed)\n%s", code, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != wantSent {
		t.Fatalf("fanout sent %d records, want %d", n, wantSent)
	}
}

// TestRedriveFailureQueue redrives a failure queue whose records the
// target refused as too large, one of them cut to fit the failure queue,
// with a line that is not JSON, one with a character SQS rejects, and one
// without a body that can be read again: a dry run sends nothing; while
// the target still refuses them they fail and stay; once it takes them,
// the cut and the absent bodies are read again from their object, the
// rest sent as they are, and only the sent ones leave the failure queue; a
// second run sends nothing.
func TestRedriveFailureQueue(t *testing.T) {
	s3c, sqsc := standIns(t)
	var l lines
	for i := range 5 {
		l.value(fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i))
	}
	bigA, bigB := "big-a-"+strings.Repeat("x", 1100), "big-b-"+strings.Repeat("y", 5000)
	l.value("big-a", bigA)
	l.value("big-b", bigB)
	l.add("bad", "not json")
	l.add("nul", `{"value":"nul\u0000"}`)
	obj := put(t, s3c, "in/mixed.jsonl", l.b.String())
	target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "1024"})
	failures := localaws.CreateQueue(t, sqsc, "-failure", map[string]string{"MaximumMessageSize": "4096"})
	failingOutput(t, sqsc, target, 5, "-prefix", "in/", "-failure-queue-url", failures)
	// A record written without its body, as for OffloadFailed: it is read
	// again from the object.
	noBody, _ := json.Marshal(engine.Failure{RunID: "x", Source: "s3://lake/" + obj.Key, Version: obj.Pin(), Offset: l.offsets["s2"], Code: "OffloadFailed", Message: "injected"})
	if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(failures), MessageBody: aws.String(string(noBody))}); err != nil {
		t.Fatal(err)
	}
	at := func(name string) string { return strconv.FormatInt(l.offsets[name], 10) }
	base := []string{"-from-queue", failures, "-target-queue-url", target, "-visibility-timeout", "5s", spark[0], spark[1]}

	// The dry run says what the real run below does: the target refuses
	// big-a (over its 1 KiB) and nul (a character SQS refuses).
	code, sum, errOut := redriveCLI(t, append(base, "-dry-run")...)
	if code != 1 || sum.WouldSend != 3 || sum.Failed != 2 || len(sum.Items) != 5 {
		t.Fatalf("dry run: exit %d, %+v\n%s", code, sum, errOut)
	}
	why := reasons(sum)
	if !strings.Contains(why[at("big-b")], "its body was cut to fit the failure queue, so it is read again from s3://lake/in/mixed.jsonl") ||
		!strings.Contains(why[at("s2")], "it has no body") ||
		!strings.HasPrefix(why[at("big-a")], "failed: a real run would not send it: MessageTooLarge") ||
		!strings.HasPrefix(why[at("nul")], "failed: a real run would not send it: InvalidCharacters") {
		t.Errorf("dry run reasons: %v", why)
	}
	// With an offload bucket, big-a would go as a pointer.
	code, sum, errOut = redriveCLI(t, append(base, "-dry-run", "-code", "MessageTooLarge", "-offload-s3-uri", "s3://lake/offload/")...)
	if why := reasons(sum)[at("big-a")]; code != 0 || sum.WouldSend != 2 || !strings.Contains(why, "as an SQS Extended Client pointer") {
		t.Errorf("dry run with offload: exit %d, %+v, big-a %q\n%s", code, sum, why, errOut)
	}
	if n := queued(t, sqsc, failures); n != 5 {
		t.Errorf("the failure queue holds %d after a dry run, want 5", n)
	}

	// The target still refuses them: they fail and stay.
	code, sum, errOut = redriveCLI(t, append(base, "-code", "MessageTooLarge")...)
	if code != 1 || sum.Failed != 2 || sum.Skipped != 3 || !strings.Contains(errOut, "failed "+failures) {
		t.Errorf("refused again: exit %d, %+v; want 1 and 2 failed\n%s", code, sum, errOut)
	}
	if r := reasons(sum)[at("big-b")]; !strings.HasPrefix(r, "failed: MessageTooLarge") {
		t.Errorf("big-b: %q", r)
	}
	if n := queued(t, sqsc, failures); n != 5 {
		t.Errorf("the failure queue holds %d after a failed redrive, want 5", n)
	}

	// With an offload bucket they go as SQS Extended Client pointers: the
	// body read from the cut one (big-b) too.
	code, sum, errOut = redriveCLI(t, append(base, "-code", "MessageTooLarge", "-offload-s3-uri", "s3://lake/offload/")...)
	if code != 0 || sum.Sent != 2 || sum.Skipped != 3 {
		t.Errorf("offloaded: exit %d, %+v; want 2 sent\n%s", code, sum, errOut)
	}
	resolver := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{})
	offloaded := map[string]bool{}
	for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
		body, _, err := resolver.Resolve(t.Context(), m)
		if err != nil {
			t.Fatalf("resolve %.60s: %v", aws.ToString(m.Body), err)
		}
		offloaded[body] = true
	}
	if !offloaded[bigA] || !offloaded[bigB] || len(offloaded) != 2 {
		t.Errorf("offloaded bodies: %d, big-a %v, big-b %v; want both", len(offloaded), offloaded[bigA], offloaded[bigB])
	}

	setMaxSize(t, sqsc, target, 262144)
	code, sum, errOut = redriveCLI(t, append(base, "-skip-code", "InvalidCharacters")...)
	if code != 0 || sum.Sent != 1 || sum.Skipped != 2 {
		t.Errorf("redrive: exit %d, %+v; want 1 sent, 2 skipped\n%s", code, sum, errOut)
	}
	why = reasons(sum)
	if !strings.HasPrefix(why[at("bad")], "skipped: it still cannot be read or mapped: UnreadableRecord") ||
		!strings.HasPrefix(why[at("nul")], "skipped: code InvalidCharacters is skipped (-skip-code)") {
		t.Errorf("reasons: %v", why)
	}
	want := map[string]string{"s2": engine.RecordID(obj, l.offsets["s2"])}
	msgs := localaws.Drain(t, sqsc, target, 2*time.Second)
	if diff := cmp.Diff(want, records(t, msgs)); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	for _, m := range msgs {
		if src := aws.ToString(m.MessageAttributes[engine.AttrSource].StringValue); src != "s3://lake/"+obj.Key {
			t.Errorf("%s attribute %q", engine.AttrSource, src)
		}
	}
	if n := queued(t, sqsc, failures); n != 2 {
		t.Errorf("the failure queue holds %d, want the 2 records not sent", n)
	}

	code, sum, errOut = redriveCLI(t, append(base, "-skip-code", "InvalidCharacters")...)
	if code != 0 || sum.Sent != 0 || sum.Total != 2 {
		t.Errorf("second redrive: exit %d, %+v; want nothing sent\n%s", code, sum, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 0 {
		t.Errorf("the second redrive sent %d messages", n)
	}
}

// TestRedriveFailureS3 redrives FAILURE_S3_URI's files of a run whose
// object was overwritten since, in a versioned bucket: the records read
// again come from the version that failed; a marker keeps a second run from
// sending them again; -delete removes the file whose records were all sent.
func TestRedriveFailureS3(t *testing.T) {
	s3c, sqsc := standIns(t)
	if _, err := s3c.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: aws.String("lake"),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	var a, b lines
	for i := range 3 {
		a.value(fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i))
	}
	bigA, bigC := "big-a-"+strings.Repeat("x", 1100), "big-c-"+strings.Repeat("z", 1100)
	a.value("big-a", bigA)
	a.add("bad", "not json")
	a.add("nul", `{"value":"nul\u0000"}`)
	b.value("big-c", bigC)
	put(t, s3c, "in/a.jsonl", a.b.String())
	put(t, s3c, "in/b.jsonl", b.b.String())
	// Named by key, the objects are pinned to their versions.
	objA, objB := head(t, s3c, "in/a.jsonl"), head(t, s3c, "in/b.jsonl")
	if objA.VersionID == "" {
		t.Fatal("the bucket keeps no versions")
	}
	target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "1024"})
	failingOutput(t, sqsc, target, 3, "-keys", "in/a.jsonl,in/b.jsonl", "-failure-s3-uri", "s3://lake/failures", "-run-id", "f1")
	put(t, s3c, "in/a.jsonl", `{"value":"overwritten"}`+"\n")
	setMaxSize(t, sqsc, target, 262144)
	base := []string{"-from-s3", "s3://lake/failures/", "-target-queue-url", target, "-s3-path-style", spark[0], spark[1]}

	code, sum, errOut := redriveCLI(t, append(base, "-code", "MessageTooLarge", "-reread", "-rate", "1000")...)
	if code != 0 || sum.Sent != 2 || sum.Skipped != 2 {
		t.Fatalf("redrive: exit %d, %+v; want 2 sent\n%s", code, sum, errOut)
	}
	want := map[string]string{bigA: engine.RecordID(objA, a.offsets["big-a"]), bigC: engine.RecordID(objB, 0)}
	if diff := cmp.Diff(want, records(t, localaws.Drain(t, sqsc, target, 2*time.Second))); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}

	code, sum, errOut = redriveCLI(t, append(base, "-code", "MessageTooLarge", "-reread")...)
	if code != 0 || sum.Sent != 0 || sum.Skipped != 4 || !strings.Contains(errOut, "sent by an earlier redrive (marker s3://lake/failures/f1/") {
		t.Errorf("second redrive: exit %d, %+v; want nothing sent\n%s", code, sum, errOut)
	}
	if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 0 {
		t.Errorf("the second redrive sent %d messages", n)
	}

	code, sum, errOut = redriveCLI(t, append(base, "-skip-code", "InvalidCharacters", "-delete")...)
	if code != 0 || sum.Sent != 0 || sum.Skipped != 4 {
		t.Errorf("redrive -delete: exit %d, %+v\n%s", code, sum, errOut)
	}
	if r := reasons(sum)[strconv.FormatInt(a.offsets["bad"], 10)]; !strings.HasPrefix(r, "skipped: it still cannot be read or mapped: UnreadableRecord") {
		t.Errorf("the line that is not JSON, read again from its version: %q", r)
	}
	// a.jsonl's task file stays (two of its records were not sent), with
	// its marker; b.jsonl's went.
	files := map[string]bool{}
	for _, it := range sum.Items {
		file, _, _ := strings.Cut(strings.TrimPrefix(it.From, "s3://lake/"), " line ")
		files[file] = it.Source == "s3://lake/in/a.jsonl"
	}
	if len(files) != 2 {
		t.Fatalf("records from %v, want two files", files)
	}
	for file, stays := range files {
		for _, key := range []string{file, file + ".redriven"} {
			_, err := s3c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
			if (err == nil) != stays {
				t.Errorf("%s: %v; want it kept: %v", key, err, stays)
			}
		}
	}
	// A listing may still name the file deleted (gofakes3 lists keys
	// whose latest version is a delete marker): it is passed over.
	code, sum, errOut = redriveCLI(t, append(base, "-skip-code", "InvalidCharacters", "-delete")...)
	if code != 0 || sum.Total != 3 {
		t.Errorf("redrive after -delete: exit %d, %+v; want a.jsonl's 3 records\n%s", code, sum, errOut)
	}
}

// TestRedriveDLQ moves a DLQ's messages, one dead-lettered by SQS and the
// rest sent there, back to the one queue whose RedrivePolicy names it
// (fauxqs has no ListDeadLetterSourceQueues: it is found by the queues'
// policies), with their attributes, at the rate asked for; a second run
// moves nothing; a target that refuses every message leaves them on the
// DLQ, reported failed; -native says the stand-in has no move task.
func TestRedriveDLQ(t *testing.T) {
	_, sqsc := standIns(t)
	dlq := localaws.CreateQueue(t, sqsc, "-dlq", nil)
	arn := queueARN(t, sqsc, dlq)
	src := localaws.CreateQueue(t, sqsc, "-src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"1"}`})
	attrs := func(i int) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{
			"n":   {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))},
			"bin": {DataType: aws.String("Binary"), BinaryValue: []byte{0, byte(i)}},
		}
	}
	if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String("poison"), MessageAttributes: attrs(99)}); err != nil {
		t.Fatal(err)
	}
	deadLetter(t, sqsc, src, dlq)
	for i := range 24 {
		if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(fmt.Sprintf("m%02d", i)), MessageAttributes: attrs(i)}); err != nil {
			t.Fatal(err)
		}
	}

	code, sum, errOut := redriveCLI(t, "-dlq", dlq, "-dry-run")
	if code != 0 || sum.WouldSend != 25 || sum.To != src {
		t.Fatalf("dry run: exit %d, %+v; want 25 to %s\n%s", code, sum, src, errOut)
	}
	if n := queued(t, sqsc, dlq); n != 25 {
		t.Errorf("the DLQ holds %d after a dry run, want 25", n)
	}

	code, sum, errOut = redriveCLI(t, "-dlq", dlq, "-rate", "20")
	if code != 0 || sum.Sent != 25 || sum.Total != 25 || !strings.Contains(errOut, "25 messages from "+dlq+" to "+src+": 25 sent") {
		t.Fatalf("redrive: exit %d, %+v\n%s", code, sum, errOut)
	}
	// fauxqs loses the answer to a receive now and then, hiding its
	// messages; at maxReceiveCount 1 the next receive would dead-letter
	// them again. The source is found; its policy may now be lenient.
	if _, err := sqsc.SetQueueAttributes(t.Context(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(src),
		Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"10"}`}}); err != nil {
		t.Fatal(err)
	}
	moved := localaws.Drain(t, sqsc, src, 2*time.Second)
	// 25 messages at 20 a second, ten at a time: the last ten 1s after
	// the first.
	var sentAt []int64
	for _, m := range moved {
		ms, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		sentAt = append(sentAt, ms)
	}
	if len(sentAt) > 0 {
		if spread := time.Duration(slices.Max(sentAt)-slices.Min(sentAt)) * time.Millisecond; spread < 900*time.Millisecond || spread > 3*time.Second {
			t.Errorf("25 messages at -rate 20 were sent over %s, want about 1s", spread)
		}
	}
	var bodies []string
	for _, m := range moved {
		body := aws.ToString(m.Body)
		bodies = append(bodies, body)
		n, _ := strconv.Atoi(strings.TrimPrefix(body, "m"))
		if body == "poison" {
			n = 99
		}
		if got := m.MessageAttributes["n"]; aws.ToString(got.StringValue) != strconv.Itoa(n) || aws.ToString(got.DataType) != "Number" ||
			!cmp.Equal(m.MessageAttributes["bin"].BinaryValue, []byte{0, byte(n)}) {
			t.Errorf("%s arrived with attributes %v", body, m.MessageAttributes)
		}
	}
	if len(bodies) != 25 || !slices.Contains(bodies, "poison") {
		t.Errorf("the source queue got %d messages (%v), want the 25", len(bodies), bodies)
	}
	if n := queued(t, sqsc, dlq); n != 0 {
		t.Errorf("the DLQ holds %d after the move", n)
	}
	code, sum, _ = redriveCLI(t, "-dlq", dlq, "-to", src)
	if code != 0 || sum.Total != 0 {
		t.Errorf("second redrive: exit %d, %+v; want nothing", code, sum)
	}

	// A target that refuses every message: they stay on the DLQ.
	for i := range 3 {
		if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(fmt.Sprintf("f%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := faultproxy.Start(t, localaws.Endpoint(t, localaws.EnvSQS), faultproxy.Options{Rates: faultproxy.Rates{EntryFailed: 1}, Ops: []string{"SendMessageBatch"}})
	t.Setenv(localaws.EnvSQS, proxy.URL())
	code, sum, errOut = redriveCLI(t, "-dlq", dlq, "-to", src, "-max-attempts", "2")
	if code != 1 || sum.Failed != 3 || !strings.Contains(errOut, "failed "+dlq+": InternalError") {
		t.Errorf("refused: exit %d, %+v; want 1 and 3 failed\n%s", code, sum, errOut)
	}
	if n := queued(t, sqsc, dlq); n != 3 {
		t.Errorf("the DLQ holds %d after a failed move, want 3", n)
	}
	code, _, errOut = runCLI(t, "", "redrive", "-dlq", dlq, "-to", dlq+"-gone")
	if code != 1 || !strings.Contains(errOut, "NonExistentQueue") {
		t.Errorf("a queue that does not exist: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "redrive", "-dlq", dlq, "-native")
	if code != 1 || !strings.Contains(errOut, "no StartMessageMoveTask") {
		t.Errorf("-native: exit %d\n%s", code, errOut)
	}
	if n := queued(t, sqsc, dlq); n != 3 {
		t.Errorf("the DLQ holds %d, want 3", n)
	}
}

// TestRedriveDLQFIFO moves a FIFO DLQ's messages with their groups and
// deduplication ids, in order within each group.
func TestRedriveDLQFIFO(t *testing.T) {
	_, sqsc := standIns(t)
	dlq := localaws.CreateQueue(t, sqsc, "-dlq.fifo", nil)
	src := localaws.CreateQueue(t, sqsc, "-src.fifo", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + queueARN(t, sqsc, dlq) + `","maxReceiveCount":"3"}`})
	for i := range 12 {
		g := fmt.Sprintf("g%d", i%2)
		if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(fmt.Sprintf("%s-%02d", g, i)),
			MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(fmt.Sprintf("d%02d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	code, sum, errOut := redriveCLI(t, "-dlq", dlq, "-rate", "0")
	if code != 0 || sum.Sent != 12 {
		t.Fatalf("redrive: exit %d, %+v\n%s", code, sum, errOut)
	}
	order := map[string][]string{}
	for _, m := range localaws.Drain(t, sqsc, src, 2*time.Second) {
		g, body := m.Attributes["MessageGroupId"], aws.ToString(m.Body)
		if !strings.HasPrefix(body, g+"-") || m.Attributes["MessageDeduplicationId"] != "d"+body[len(body)-2:] {
			t.Errorf("%s arrived in group %q with deduplication id %q", body, g, m.Attributes["MessageDeduplicationId"])
		}
		order[g] = append(order[g], body)
	}
	for g, bodies := range order {
		if !slices.IsSorted(bodies) || len(bodies) != 6 {
			t.Errorf("group %s: %v, want its 6 messages in order", g, bodies)
		}
	}
}

func queueARN(t *testing.T, c *sqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// deadLetter receives src's message until SQS moves it to dlq
// (maxReceiveCount 1).
func deadLetter(t *testing.T, c *sqs.Client, src, dlq string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if queued(t, c, dlq) > 0 {
			return
		}
		if _, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(src), VisibilityTimeout: 1, WaitTimeSeconds: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	t.Fatal("the message never reached the DLQ")
}

// TestRedriveRereadCSVDialect rereads a record of a semicolon-separated
// CSV object that was too large for its queue, with the dialect flags the
// run had: its fields come back as the run read them, not as one column
// of a comma-separated reading.
func TestRedriveRereadCSVDialect(t *testing.T) {
	s3c, sqsc := standIns(t)
	big := strings.Repeat("x", 1100)
	obj := put(t, s3c, "in/semi.csv", "id;note\n1;short\n2;"+big+"\n")
	target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "1024"})
	failingOutput(t, sqsc, target, 1, "-key", "in/semi.csv", "-csv-delimiter", ";", "-failure-s3-uri", "s3://lake/failures", "-run-id", "semi")
	setMaxSize(t, sqsc, target, 262144)

	code, sum, errOut := redriveCLI(t, "-from-s3", "s3://lake/failures/", "-target-queue-url", target, "-s3-path-style",
		"-code", "MessageTooLarge", "-reread", "-csv-delimiter", ";")
	if code != 0 || sum.Sent != 1 {
		t.Fatalf("redrive: exit %d, %+v; want the large record sent\n%s", code, sum, errOut)
	}
	want := map[string]string{`{"id":"2","note":"` + big + `"}`: engine.RecordID(obj, int64(len("id;note\n1;short\n")))}
	if diff := cmp.Diff(want, records(t, localaws.Drain(t, sqsc, target, 2*time.Second))); diff != "" {
		t.Errorf("target (-want +got):\n%.600s", diff)
	}
}

// TestRedriveReportKeepsTheRunsMode redrives, from the run report, runs
// whose mode and notification format were the runner's (a function's MODE
// and NOTIFICATION_FORMAT, the CLI's -mode) rather than the request's:
// their records go again as the run sent them, chunks as chunks and
// notifications as notifications of the run's format and region (read by
// aws-lambda-go's own event types), not as the object's lines.
func TestRedriveReportKeepsTheRunsMode(t *testing.T) {
	s3c, sqsc := standIns(t)
	// Records, and the notification of a key this long, are over 1 KiB.
	var l lines
	for i := range 8 {
		l.value(fmt.Sprintf("r%d", i), fmt.Sprintf("r%d-", i)+strings.Repeat("x", 1100))
	}
	key := "in/" + strings.Repeat("k", 1000) + ".jsonl"
	obj := put(t, s3c, key, l.b.String())
	for _, tc := range []struct {
		mode  []string
		check func(t *testing.T, m types.Message)
	}{
		{[]string{"-mode", "chunk"}, func(t *testing.T, m types.Message) {
			if _, ok := m.MessageAttributes["s3sqs-first"]; !ok || strings.Count(aws.ToString(m.Body), "\n") < 1 {
				t.Errorf("not a chunk-mode message: %.60q, attributes %v", aws.ToString(m.Body), slices.Collect(maps.Keys(m.MessageAttributes)))
			}
		}},
		{[]string{"-mode", "notification", "-notification-format", "eventbridge"}, func(t *testing.T, m types.Message) {
			var ev events.EventBridgeEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || ev.DetailType != "Object Created" || ev.Region != localaws.Region ||
				!strings.Contains(string(ev.Detail), `"`+key+`"`) {
				t.Errorf("not the run's EventBridge notification of its object: %v, %.200s", err, aws.ToString(m.Body))
			}
		}},
	} {
		t.Run(tc.mode[1], func(t *testing.T) {
			// The first run's target refuses every message; the
			// redrive's takes them.
			target := localaws.CreateQueue(t, sqsc, "-target", map[string]string{"MaximumMessageSize": "1024"})
			run := "modes-" + tc.mode[1]
			args := append([]string{"fanout", "-bucket", "lake", "-key", obj.Key, "-target-queue-url", target, "-s3-path-style", "-run-id", run,
				"-report-s3-uri", "s3://lake/reports", "-failure-file", t.TempDir() + "/f.jsonl", "-progress-interval", "1h"}, tc.mode...)
			code, _, errOut := runCLI(t, "", args...)
			if code != 1 {
				t.Fatalf("fanout: exit %d, want 1 (records failed)\n%s", code, errOut)
			}
			if n := len(localaws.Drain(t, sqsc, target, time.Second)); n != 0 {
				t.Fatalf("the first run delivered %d messages, want none", n)
			}
			setMaxSize(t, sqsc, target, 262144)
			code, sum, errOut := redriveCLI(t, "-report", "s3://lake/reports/"+run+"/", "-target-queue-url", target)
			if code != 0 || sum.Sent == 0 || sum.Failed != 0 {
				t.Fatalf("redrive: exit %d, %+v\n%s", code, sum, errOut)
			}
			msgs := localaws.Drain(t, sqsc, target, 2*time.Second)
			if len(msgs) == 0 {
				t.Fatal("the redrive delivered nothing")
			}
			for _, m := range msgs {
				tc.check(t, m)
			}
		})
	}
}
