package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestEndToEnd builds the function's bootstrap and runs it under
// aws-lambda-rie against fauxqs and an S3 stand-in: a direct request for a
// dataset large enough to go through the work queue, then the work queue's
// tasks fed back as SQS events one invocation at a time, until every record
// is on the target queue.
func TestEndToEnd(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)

	want := map[string]bool{}
	for o, key := range []string{
		"exports/date=2024-01-01/region=eu west/part 0+1.jsonl",
		"exports/date=2024-01-01/region=us=east/part-1.jsonl",
		"exports/date=2024-01-02/region=ñandú/part-2.jsonl",
		"exports/date=2024-01-02/region=x/100%.jsonl",
	} {
		var b strings.Builder
		for i := range 500 {
			v := fmt.Sprintf("o%d-r%d", o, i)
			fmt.Fprintf(&b, `{"value":%q,"msg_attributes":{"object":"%d"}}`+"\n", v, o)
			want[v] = true
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}

	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.FailureQueueURL.Env+"="+failure,
		settings.ChunkSize.Env+"=4KiB", settings.InlineMaxBytes.Env+"=8KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "exports/"})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Queued || rep.Objects != 4 || rep.TasksQueued != rep.Chunks {
		t.Fatalf("report %s: want 4 objects queued as tasks", out)
	}
	t.Logf("cold start (first invocation, including init): %v; %d tasks", fn.Init, rep.TasksQueued)

	tasks := 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			break
		}
		for i := 0; i < len(msgs); i += 10 {
			out, err := fn.Invoke(t.Context(), esm.Event(msgs[i:min(i+10, len(msgs))], workARN))
			if err != nil {
				t.Fatalf("tasks: %v", err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("tasks answered %s (%v)", out, err)
			}
		}
		tasks += len(msgs)
	}
	if tasks < rep.TasksQueued {
		t.Errorf("ran %d tasks, want at least %d", tasks, rep.TasksQueued)
	}
	got := map[string]bool{}
	for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
		got[aws.ToString(m.Body)] = true
		if aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue) == "" {
			t.Fatalf("message without a record id: %v", m.MessageAttributes)
		}
	}
	missing := 0
	for v := range want {
		if !got[v] {
			missing++
		}
	}
	if missing > 0 || len(got) != len(want) {
		t.Errorf("%d of %d records missing, %d received", missing, len(want), len(got))
	}
	if !fn.WaitLogs(`"fanout invocation"`, 5*time.Second) || !fn.WaitLogs(`"CloudWatchMetrics"`, 5*time.Second) {
		t.Errorf("no summary line or EMF metrics in the function's output:\n%.2000s", fn.Logs())
	}
}

// TestEndToEndDeadline gives the function under aws-lambda-rie a task too
// large for its timeout: each invocation stops before its deadline and
// queues a continuation from the first record it did not read, and the
// continuations finish the task with nothing missing.
func TestEndToEndDeadline(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	const n = 30_000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"value":"r%06d"}`+"\n", i)
	}
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("big.jsonl"), Body: strings.NewReader(b.String())}); err != nil {
		t.Fatal(err)
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.InlineMaxBytes.Env+"=1KiB", settings.MaxInFlight.Env+"=2",
		settings.DeadlineMargin.Env+"=2500ms", "AWS_LAMBDA_FUNCTION_TIMEOUT=3")
	if _, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "key": "big.jsonl"}); err != nil {
		t.Fatal(err)
	}
	invocations := 0
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			out, err := fn.Invoke(t.Context(), esm.Event([]types.Message{m}, workARN))
			if err != nil {
				t.Fatalf("task: %v", err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("task answered %s (%v)", out, err)
			}
			invocations++
		}
	}
	got := map[string]int{}
	for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
		got[aws.ToString(m.Body)]++
	}
	missing := 0
	for i := range n {
		if got[fmt.Sprintf("r%06d", i)] == 0 {
			missing++
		}
	}
	if missing > 0 || invocations < 2 {
		t.Errorf("%d of %d records missing after %d task invocations (want none missing, and at least one continuation)", missing, n, invocations)
	}
	t.Logf("%d task invocations, %d distinct records", invocations, len(got))
}

// TestEndToEndFIFO sends, through the Lambda runtime API, objects whose
// keys are not valid FIFO group ids (a space, unicode, 300 characters) to a
// FIFO queue, in record and in chunk mode: every record arrives, each
// object's in order in its own group.
func TestEndToEndFIFO(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	keys := []string{"fifo/dir/part 0001.jsonl", "fifo/région=Zürich/ünïcödé 日本語.jsonl", "fifo/" + strings.Repeat("k", 300) + ".jsonl"}
	for _, key := range keys {
		var b strings.Builder
		for i := range 25 {
			fmt.Fprintf(&b, `{"value":"%s|%02d"}`+"\n", key, i)
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := rie.Build(t, "./functions/fanout")
	for _, mode := range []string{"record", "chunk"} {
		t.Run(mode, func(t *testing.T) {
			// A queue per mode: a chunk-mode message's deduplication id is
			// the record id of its first record.
			target := localaws.CreateQueue(t, sqsc, "-target.fifo", map[string]string{"ContentBasedDeduplication": "false"})
			fn := startFanout(t, bootstrap, "AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
				settings.TargetQueueURL.Env+"="+target, "AWS_LAMBDA_FUNCTION_TIMEOUT=60")
			out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "fifo/", "mode": mode, "runId": "fifo-" + mode})
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			var rep engine.Report
			if err := json.Unmarshal(out, &rep); err != nil || rep.RecordsSent != 75 || rep.RecordsFailed != 0 {
				t.Fatalf("report %s (%v): want 75 records sent", out, err)
			}
			byGroup := map[string][]string{}
			for _, m := range localaws.Drain(t, sqsc, target, 3*time.Second) {
				g := m.Attributes["MessageGroupId"]
				for line := range strings.SplitSeq(aws.ToString(m.Body), "\n") {
					if mode == "chunk" {
						var rec struct{ Value string }
						if err := json.Unmarshal([]byte(line), &rec); err != nil {
							t.Fatalf("chunk line %q: %v", line, err)
						}
						line = rec.Value
					}
					byGroup[g] = append(byGroup[g], line)
				}
			}
			for _, key := range keys {
				g := engine.GroupID(dataset.Object{Bucket: "lake", Key: key})
				got := byGroup[g]
				if len(got) != 25 || !slices.IsSorted(got) || !strings.HasPrefix(got[0], key+"|") {
					t.Errorf("group %s of %q holds %d records (sorted %v); want its 25, in order", g, key, len(got), slices.IsSorted(got))
				}
			}
		})
	}
}

// workARN is the ARN of the work queue that tasks arrive from.
const workARN = "arn:aws:sqs:us-east-1:000000000000:work"

// e2eStack starts an S3 stand-in with a bucket "lake" and returns the
// endpoints and clients for fauxqs and it.
func e2eStack(t *testing.T) (sqsEndpoint, s3URL string, s3c *s3.Client, sqsc *sqs.Client) {
	t.Helper()
	sqsEndpoint = localaws.Endpoint(t, localaws.EnvSQS)
	s3URL = localaws.FakeS3URL(t)
	s3c = localaws.S3Client(s3URL)
	sqsc = sqs.NewFromConfig(localaws.SQS(t))
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	return sqsEndpoint, s3URL, s3c, sqsc
}

// TestRefusals sends, through the Lambda runtime API, the inputs that a
// user gets wrong and that once were taken silently. Each is refused with
// an error that names its cause, and nothing reaches the target queue.
func TestRefusals(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)
	for key, body := range map[string]string{
		"good/a.jsonl":  `{"value":"a1"}` + "\n" + `{"value":"a2"}` + "\n",
		"other/b.jsonl": `{"value":"b1"}` + "\n",
		// The second line is not JSON: a bad record, not a message.
		"mixed/c.jsonl": `{"value":"c1"}` + "\n" + `value: c2, not json` + "\n" + `[3]` + "\n",
	} {
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := rie.Build(t, "./functions/fanout")
	env := []string{"AWS_ENDPOINT_URL_SQS=" + sqsEndpoint, "AWS_ENDPOINT_URL_S3=" + s3URL, settings.S3PathStyle.Env + "=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30"}
	fn := startFanout(t, bootstrap, append(env, settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.FailureQueueURL.Env+"="+failure)...)

	refused := []struct {
		name    string
		payload string
		want    string
	}{
		{"typo in a field", `{"bucket":"lake","prefx":"good/"}`, `unknown field "prefx" (did you mean "prefix"?)`},
		{"empty key list", `{"bucket":"lake","keys":[]}`, "the source names no dataset"},
		{"bucket alone", `{"bucket":"lake"}`, "or all: true for every object in the bucket"},
		{"negative chunk size", `{"bucket":"lake","prefix":"good/","chunkSize":-1}`, "chunkSize: -1 bytes is not a chunk size from 1KiB to 1GiB"},
		{"huge in-flight", `{"bucket":"lake","prefix":"good/","maxInFlight":1e12}`, `maxInFlight: "1e12" is not a whole number from 1 to 1000`},
		{"unknown mode", `{"bucket":"lake","prefix":"good/","mode":"bogus"}`, `mode: "bogus" is not record, chunk or notification`},
		{"wrong type", `{"bucket":"lake","prefix":["good/"]}`, "prefix: an array is not allowed here; want a string"},
		{"target queue name as URL", `{"bucket":"lake","prefix":"good/","targetQueueUrl":"orders"}`, `targetQueueUrl: "orders" is not a queue URL`},
		{"two datasets", `{"bucket":"lake","prefix":"good/","all":true}`, "the source names prefix and all"},
		{"not an object", `[1,2]`, "an array is not an object"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			out, err := fn.Invoke(t.Context(), json.RawMessage(tc.payload))
			if !rie.IsFunctionError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("invoke %s: %v (answer %s); want a function error that says %q", tc.payload, err, out, tc.want)
			}
		})
	}
	if msgs := localaws.Drain(t, sqsc, target, 2*time.Second); len(msgs) != 0 {
		t.Fatalf("%d messages reached the target from refused requests", len(msgs))
	}

	t.Run("explicit all", func(t *testing.T) {
		out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "all": true, "suffix": ".jsonl", "runId": "all-1"})
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		var rep engine.Report
		if err := json.Unmarshal(out, &rep); err != nil || rep.Objects != 3 || rep.RecordsSent != 5 || rep.RecordsFailed != 1 {
			t.Fatalf("report %s (%v): want 3 objects, 5 records sent and the line that is not JSON failed", out, err)
		}
		if n := len(localaws.Drain(t, sqsc, target, 2*time.Second)); n != 5 {
			t.Errorf("%d messages on the target, want 5", n)
		}
		fails := localaws.Drain(t, sqsc, failure, 2*time.Second)
		if len(fails) != 1 {
			t.Fatalf("%d failures, want 1", len(fails))
		}
		var f engine.Failure
		if err := json.Unmarshal([]byte(aws.ToString(fails[0].Body)), &f); err != nil {
			t.Fatal(err)
		}
		if f.Source != "s3://lake/mixed/c.jsonl" || f.Offset != 15 || f.Code != "UnreadableRecord" || !strings.Contains(f.Message, "record is not valid JSON") {
			t.Errorf("failure %+v: want mixed/c.jsonl at offset 15, UnreadableRecord, not valid JSON", f)
		}
	})

	t.Run("message without id", func(t *testing.T) {
		ev := events.SQSEvent{Records: []events.SQSMessage{{EventSource: "aws:sqs", Body: "neither a task nor a notification"}}}
		out, err := fn.Invoke(t.Context(), ev)
		if !rie.IsFunctionError(err) || !strings.Contains(err.Error(), "1 of 1 failed messages have no messageId, so they cannot be reported in batchItemFailures") {
			t.Errorf("invoke: %v (answer %s); want the error that no message id can be reported", err, out)
		}
	})

	t.Run("malformed chunk task", func(t *testing.T) {
		task := func(start, end int64, extra string) string {
			return `{"runId":"r1","chunk":{"bucket":"lake","key":"good/a.jsonl","size":30,"index":0,"count":1,` +
				`"start":` + jsonInt(start) + `,"end":` + jsonInt(end) + `,"format":"jsonl"}` + extra + `}`
		}
		ev := events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: "reversed", EventSource: "aws:sqs", Body: task(20, 5, "")},
			{MessageId: "negative", EventSource: "aws:sqs", Body: task(-5, 10, "")},
			{MessageId: "unknown", EventSource: "aws:sqs", Body: task(0, 30, `,"resume":3`)},
			{MessageId: "overrides", EventSource: "aws:sqs", Body: task(0, 30, `,"overrides":{"mode":"fast"}`)},
		}}
		out, err := fn.Invoke(t.Context(), ev)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		var failed []string
		for _, f := range resp.BatchItemFailures {
			failed = append(failed, f.ItemIdentifier)
		}
		slices.Sort(failed)
		if strings.Join(failed, ",") != "negative,overrides,reversed,unknown" {
			t.Errorf("batchItemFailures %v; want every malformed task", failed)
		}
		for _, want := range []string{"chunk range [20,5) is not a range", "chunk range [-5,10) is not a range", `unknown field \"resume\"`, `overrides: mode: \"fast\" is not record, chunk or notification`} {
			if !fn.WaitLogs(want, 5*time.Second) {
				t.Errorf("the function's log does not say %q", want)
			}
		}
		if msgs := localaws.Drain(t, sqsc, target, 2*time.Second); len(msgs) != 0 {
			t.Errorf("%d messages reached the target from malformed tasks", len(msgs))
		}
	})

	// A configuration that cannot work stops the function at init, with
	// the variable's name and the cause in the log.
	inits := []struct {
		name string
		env  []string
		want string
	}{
		{"message size in KiB", []string{settings.TargetQueueURL.Env + "=" + target, settings.TargetMaxMessageSize.Env + "=256"},
			"TARGET_MAX_MESSAGE_SIZE: 256 bytes is outside SQS's range of 1,024 to 1,048,576 bytes"},
		{"queue name as URL", []string{settings.TargetQueueURL.Env + "=orders"}, `TARGET_QUEUE_URL: \"orders\" is not a queue URL`},
		{"missing target queue", []string{settings.TargetQueueURL.Env + "=" + target + "-gone"},
			"TARGET_QUEUE_URL: queue " + target + "-gone cannot be used: AWS.SimpleQueueService.NonExistentQueue"},
		{"missing work queue", []string{settings.TargetQueueURL.Env + "=" + target, settings.WorkQueueURL.Env + "=" + work + "-gone"},
			"WORK_QUEUE_URL: queue " + work + "-gone cannot be used: AWS.SimpleQueueService.NonExistentQueue"},
		{"missing failure queue", []string{settings.TargetQueueURL.Env + "=" + target, settings.FailureQueueURL.Env + "=" + failure + "-gone"},
			"FAILURE_QUEUE_URL: queue " + failure + "-gone cannot be used"},
		{"missing claims table", []string{settings.TargetQueueURL.Env + "=" + target, "AWS_ENDPOINT_URL_DYNAMODB=" + localaws.Endpoint(t, localaws.EnvMoto), settings.ClaimsTable.Env + "=no-such-table"},
			"CLAIMS_TABLE: cannot read DynamoDB table no-such-table"},
		{"offload prefix S3 keys allow but the Extended Client does not", []string{settings.TargetQueueURL.Env + "=" + target, "OFFLOAD_S3_URI=s3://lake/date=1/"},
			`OFFLOAD_S3_URI: key prefix \"date=1/\" has \"=\"`},
		{"tracing typo", []string{settings.TargetQueueURL.Env + "=" + target, settings.Tracing.Env + "=xray"}, `TRACING: \"xray\" is not off, otlp or stdout`},
	}
	for _, tc := range inits {
		t.Run(tc.name, func(t *testing.T) {
			fn := startFanout(t, bootstrap, append(env, tc.env...)...)
			_, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "good/"})
			if err == nil {
				t.Fatal("the function answered; want it to stop at init")
			}
			fn.WaitLogs(tc.want, 5*time.Second)
			logs := fn.Logs()
			if !strings.Contains(logs, tc.want) || strings.Contains(logs, "send stopped") || strings.Contains(logs, "Queue.MaxMessageSize") {
				t.Errorf("init log does not say %q in a user's words:\n%s", tc.want, logs)
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// sparkEnv is the Spark SQS sink's column mapping, in which these tests'
// records are written (by default a record is sent whole).
var sparkEnv = []string{settings.BodyField.Env + "=value", settings.AttributesField.Env + "=msg_attributes", settings.GroupIDField.Env + "=group_id"}

// startFanout starts the built fanout bootstrap under aws-lambda-rie with
// env and the Spark sink's mapping.
func startFanout(t *testing.T, bootstrap string, env ...string) *rie.Runtime {
	t.Helper()
	return rie.Start(t, bootstrap, append(slices.Clone(env), sparkEnv...)...)
}

// TestWholeRecordByDefault sends metrics rows, whose value column is one
// field among others, through the function at its defaults: each arrives
// whole, every field kept. With BODY_FIELD=value the same rows arrive as
// their value, and the answer counts them mapped and names the fields left
// out, so that none goes missing unnoticed.
func TestWholeRecordByDefault(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	rows := []string{`{"sensor":"t1","value":42.5,"unit":"C"}`, `{"sensor":"t2","value":17,"unit":"C","site":"north"}`}
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("metrics/a.jsonl"),
		Body: strings.NewReader(strings.Join(rows, "\n") + "\n")}); err != nil {
		t.Fatal(err)
	}
	bootstrap := rie.Build(t, "./functions/fanout")
	for _, tc := range []struct {
		env    []string
		bodies []string
		mapped int64
		left   []string
	}{
		{nil, rows, 0, nil},
		{[]string{settings.BodyField.Env + "=value"}, []string{"42.5", "17"}, 2, []string{"sensor", "site", "unit"}},
	} {
		target := localaws.CreateQueue(t, sqsc, "-target", nil)
		fn := rie.Start(t, bootstrap, append([]string{"AWS_ENDPOINT_URL_SQS=" + sqsEndpoint, "AWS_ENDPOINT_URL_S3=" + s3URL, settings.S3PathStyle.Env + "=true",
			settings.TargetQueueURL.Env + "=" + target, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"}, tc.env...)...)
		out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "key": "metrics/a.jsonl"})
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.env, err, fn.Logs())
		}
		var rep engine.Report
		if err := json.Unmarshal(out, &rep); err != nil || rep.RecordsSent != 2 || rep.RecordsMapped != tc.mapped || !slices.Equal(rep.FieldsLeftOut, tc.left) {
			t.Errorf("%v: answer %s (%v); want 2 sent, %d mapped, %v left out", tc.env, out, err, tc.mapped, tc.left)
		}
		var got []string
		for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
			got = append(got, aws.ToString(m.Body))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.bodies))
		if !slices.Equal(got, want) {
			t.Errorf("%v: bodies %q; want %q", tc.env, got, want)
		}
	}
}
