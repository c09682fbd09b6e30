package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestPlanningContinues plans, through aws-lambda-rie, a prefix of CSV
// objects whose headers S3 answers slowly (split at line ends, so that
// planning reads each header), with a 2-second timeout: the
// request plans what it can and queues a planning step, each step the
// next, until the listing ends. A step delivered twice queues nothing the
// second time (claims). Every object ends in exactly one chunk task, and
// the tasks send every record.
func TestPlanningContinues(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	_, claimsTable := localaws.ClaimsTable(t)
	const objects = 400
	for i := range objects {
		body := fmt.Sprintf("id,name\n%d-a,x\n%d-b,y\n", i, i)
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("many/part-%04d.csv", i)), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// Each CSV header read waits 150 ms: 16 at once, about 100 objects a
	// second, against a second of work per invocation.
	slow := faultproxy.Start(t, s3URL, faultproxy.Options{Ops: []string{"GetObject"}, Rates: faultproxy.Rates{Delay: 1, DelayFor: 150 * time.Millisecond}})
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+slow.URL(), settings.S3PathStyle.Env+"=true",
		"AWS_ENDPOINT_URL_DYNAMODB="+localaws.Endpoint(t, localaws.EnvMoto), settings.ClaimsTable.Env+"="+claimsTable,
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.InlineMaxBytes.Env+"=1KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=2",
		settings.CSVNoQuotedNewlines.Env+"=true")

	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "many/", "runId": "plan-steps"})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil || !rep.PlanContinued || rep.Objects == 0 || rep.Objects >= objects {
		t.Fatalf("request answered %s (%v): want part of the objects planned and planning continued", out, err)
	}
	invocations, redelivered := 1, false
	var tasks []types.Message
	chunks := map[string]int{} // object key -> chunk tasks
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		var steps []types.Message
		for _, m := range localaws.Drain(t, sqsc, work, time.Second) {
			if _, err := worktask.ParsePlan(aws.ToString(m.Body)); err == nil {
				steps = append(steps, m)
				continue
			}
			task, err := worktask.Parse(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("work queue message %s: %v", aws.ToString(m.Body), err)
			}
			chunks[task.Chunk.Key]++
			tasks = append(tasks, m)
		}
		if len(steps) == 0 {
			break
		}
		if len(steps) > 1 {
			t.Fatalf("%d planning steps queued at once, want one at a time", len(steps))
		}
		deliveries := 1
		if !redelivered {
			// Delivered twice, as SQS may: the second finds its claim done.
			deliveries, redelivered = 2, true
		}
		for range deliveries {
			out, err := fn.Invoke(t.Context(), esm.Event(steps, workARN))
			if err != nil {
				t.Fatalf("planning step: %v", err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("planning step answered %s (%v)\n%s", out, err, fn.Logs())
			}
			invocations++
		}
	}
	if invocations < 4 { // the request, a step twice, and at least one more
		t.Errorf("planning took %d invocations, want at least 4 (3 distinct)", invocations)
	}
	for i := range objects {
		if k := fmt.Sprintf("many/part-%04d.csv", i); chunks[k] != 1 {
			t.Errorf("%s is in %d chunk tasks, want exactly 1", k, chunks[k])
		}
	}
	if len(chunks) != objects || len(tasks) != objects {
		t.Fatalf("%d chunk tasks for %d objects, want one each", len(tasks), len(chunks))
	}

	// The tasks, run, send every record once.
	if err := slow.SetRates(faultproxy.Rates{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(tasks); i += 10 {
		out, err := fn.Invoke(t.Context(), esm.Event(tasks[i:min(i+10, len(tasks))], workARN))
		var resp events.SQSEventResponse
		if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("tasks answered %s (%v)\n%s", out, err, fn.Logs())
		}
	}
	got := map[string]int{}
	for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
		got[aws.ToString(m.Body)]++
	}
	if len(got) != 2*objects {
		t.Errorf("%d distinct records on the target, want %d", len(got), 2*objects)
	}
	for body, n := range got {
		if n != 1 {
			t.Errorf("record %s arrived %d times", body, n)
		}
	}
	t.Logf("%d objects planned in %d invocations", objects, invocations)
}

// TestFIFOChunksInOrder sends, through aws-lambda-rie, two objects of 10
// chunks each to a FIFO queue with a standard work queue, with reads slow
// enough that each invocation gets through a few chunks: each object's
// chunks run one after another, across invocations, and its records arrive
// in their order in the object, in the object's group.
func TestFIFOChunksInOrder(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-order.fifo", map[string]string{"ContentBasedDeduplication": "false"})
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	const perObject = 1000 // 40-byte lines: 40,000 bytes, 10 chunks of 4 KiB
	keys := []string{"ordered/a.jsonl", "ordered/b.jsonl"}
	for _, key := range keys {
		var b strings.Builder
		for i := range perObject {
			fmt.Fprintf(&b, `{"value":"%s|%06d","pad":"%010d"}`+"\n", key[8:9], i, i)
		}
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			t.Fatal(err)
		}
	}
	slow := faultproxy.Start(t, s3URL, faultproxy.Options{Ops: []string{"GetObject"}, Rates: faultproxy.Rates{Delay: 1, DelayFor: 300 * time.Millisecond}})
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+slow.URL(), settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.InlineMaxBytes.Env+"=1KiB", settings.ChunkSize.Env+"=4KiB",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=2")
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "prefix": "ordered/", "runId": "fifo-chain"})
	var rep engine.Report
	if err != nil || json.Unmarshal(out, &rep) != nil || rep.Chunks != 20 || rep.TasksQueued != 2 {
		t.Fatalf("request answered %s (%v): want 20 chunks planned as 2 chained tasks", out, err)
	}
	invocations := 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			break
		}
		out, err := fn.Invoke(t.Context(), esm.Event(msgs, workARN))
		var resp events.SQSEventResponse
		if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("tasks answered %s (%v)\n%s", out, err, fn.Logs())
		}
		invocations++
	}
	if invocations < 3 {
		t.Errorf("the chains ran in %d invocations, want at least 3 (the test's reads are slowed for that)", invocations)
	}
	next := map[string]int{}
	for _, m := range localaws.ReceiveAll(t.Context(), sqsc, target, time.Minute) {
		// The body is the record's "value" field.
		obj, n, _ := strings.Cut(aws.ToString(m.Body), "|")
		if want := fmt.Sprintf("%06d", next[obj]); n != want {
			t.Fatalf("object %s: record %s arrived where %s was due", obj, n, want)
		}
		next[obj]++
	}
	if next["a"] != perObject || next["b"] != perObject {
		t.Errorf("records received in order: %v, want %d of each object", next, perObject)
	}
	t.Logf("20 chunks in %d task invocations", invocations)
}
