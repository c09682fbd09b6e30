package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// batchKey writes a key as S3 Batch Operations does in an invocation:
// URL-encoded, a space as '+', '/' kept.
func batchKey(key string) string { return strings.ReplaceAll(url.QueryEscape(key), "%2F", "/") }

// putRecords writes n JSON Lines records {"value":"<prefix>-<i>","other":"o-<prefix>-<i>"}
// and returns the values and the version id S3 gave the object.
func putRecords(t *testing.T, s3c *s3.Client, bucket, key, prefix string, n int) ([]string, string) {
	t.Helper()
	var b strings.Builder
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%03d", prefix, i)
		fmt.Fprintf(&b, `{"value":%q,"other":"o-%s"}`+"\n", v, v)
		values = append(values, v)
	}
	out, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(b.String())})
	if err != nil {
		t.Fatal(err)
	}
	return values, aws.ToString(out.VersionId)
}

// runWork feeds the work queue's tasks to fn, as the event source mapping
// does, until the queue stays empty; each batch must succeed whole.
func runWork(t *testing.T, fn *rie.Runtime, sqsc *sqs.Client, work string) int {
	t.Helper()
	n := 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		msgs := localaws.Drain(t, sqsc, work, time.Second)
		if len(msgs) == 0 {
			return n
		}
		for i := 0; i < len(msgs); i += 10 {
			out, err := fn.Invoke(t.Context(), esm.Event(msgs[i:min(i+10, len(msgs))], workARN))
			var resp events.SQSEventResponse
			if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("tasks answered %s (%v)", out, err)
			}
		}
		n += len(msgs)
	}
	t.Fatal("the work queue did not empty in 2 minutes")
	return n
}

// sortedBodies returns the bodies on the queue, sorted.
func sortedBodies(t *testing.T, sqsc *sqs.Client, queue string) []string {
	t.Helper()
	got := localaws.Bodies(localaws.Drain(t, sqsc, queue, 2*time.Second))
	slices.Sort(got)
	return got
}

// TestBatchOperations runs S3 Batch Operations invocations of schema 1.0
// and 2.0 through the Lambda runtime API: keys URL-encoded as Batch
// Operations sends them (a space as '+', unicode), a task pinned to an
// object's earlier version, a missing key, an object too large for one
// invocation (its chunks queued, then run from the work queue), and
// userArguments that change the run's mapping or are refused. Every
// record of the tasks that succeeded arrives on the target queue. S3 is
// moto_server, whose versioning honours a version id on HEAD and GET (the
// in-process stand-in answers with the latest version).
func TestBatchOperations(t *testing.T) {
	sqsEndpoint := localaws.Endpoint(t, localaws.EnvSQS)
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	s3URL := localaws.Endpoint(t, localaws.EnvMoto)
	s3c := localaws.S3Client(s3URL)
	bucket := fmt.Sprintf("batchops-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	if v, err := s3c.GetBucketVersioning(t.Context(), &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)}); err != nil || v.Status != s3types.BucketVersioningStatusEnabled {
		t.Fatalf("bucket versioning %v (%v): want Enabled", v, err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)

	spaced, _ := putRecords(t, s3c, bucket, "batch/a bñ 日本.jsonl", "spaced", 3)
	old, oldVersion := putRecords(t, s3c, bucket, "batch/versioned.jsonl", "v1", 4)
	if oldVersion == "" {
		t.Fatal("PutObject gave no version id on a versioned bucket")
	}
	putRecords(t, s3c, bucket, "batch/versioned.jsonl", "v2", 5) // overwrites: the task names v1
	big, _ := putRecords(t, s3c, bucket, "batch/big+plus.jsonl", "big", 400)

	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, settings.FailureQueueURL.Env+"="+failure,
		settings.ChunkSize.Env+"=4KiB", settings.InlineMaxBytes.Env+"=8KiB", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")

	invoke := func(t *testing.T, payload string) events.S3BatchJobResponse {
		t.Helper()
		out, err := fn.Invoke(t.Context(), json.RawMessage(payload))
		if err != nil {
			t.Fatalf("invoke: %v\n%.3000s", err, fn.Logs())
		}
		var resp events.S3BatchJobResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("answer %s: %v", out, err)
		}
		return resp
	}
	type want struct {
		code   fanouthandler.ResultCode
		result string // in resultString
	}
	check := func(t *testing.T, resp events.S3BatchJobResponse, version string, wants map[string]want) {
		t.Helper()
		if resp.InvocationSchemaVersion != version || resp.InvocationID != "inv-"+version || resp.TreatMissingKeysAs != "PermanentFailure" || len(resp.Results) != len(wants) {
			t.Fatalf("answer %+v: want schema %s, invocation inv-%s, PermanentFailure for missing keys, %d results", resp, version, version, len(wants))
		}
		for _, r := range resp.Results {
			w, ok := wants[r.TaskID]
			if !ok || r.ResultCode != string(w.code) || !strings.Contains(r.ResultString, w.result) {
				t.Errorf("task %s: %s %q; want %s with %q", r.TaskID, r.ResultCode, r.ResultString, w.code, w.result)
			}
			if r.ResultCode == string(fanouthandler.Succeeded) {
				var s struct {
					RunID       string `json:"runId"`
					RecordsSent int64  `json:"recordsSent"`
				}
				if err := json.Unmarshal([]byte(r.ResultString), &s); err != nil || s.RunID == "" {
					t.Errorf("task %s: resultString %q is not the JSON summary (%v)", r.TaskID, r.ResultString, err)
				}
			}
		}
	}

	t.Run("1.0", func(t *testing.T) {
		task := func(id, key, version string) string {
			v := "null"
			if version != "" {
				v = fmt.Sprintf("%q", version)
			}
			return fmt.Sprintf(`{"taskId":%q,"s3Key":%q,"s3VersionId":%s,"s3BucketArn":"arn:aws:s3:::%s"}`, id, batchKey(key), v, bucket)
		}
		if k := batchKey("batch/a bñ 日本.jsonl"); k != "batch/a+b%C3%B1+%E6%97%A5%E6%9C%AC.jsonl" {
			t.Fatalf("test helper encodes %q", k)
		}
		resp := invoke(t, `{"invocationSchemaVersion":"1.0","invocationId":"inv-1.0","job":{"id":"job-1"},"tasks":[`+
			strings.Join([]string{
				task("spaced", "batch/a bñ 日本.jsonl", ""),
				task("old-version", "batch/versioned.jsonl", oldVersion),
				task("missing", "batch/missing.jsonl", ""),
				task("big", "batch/big+plus.jsonl", ""),
			}, ",")+`]}`)
		check(t, resp, "1.0", map[string]want{
			"spaced":      {fanouthandler.Succeeded, `"recordsSent":3`},
			"old-version": {fanouthandler.Succeeded, `"recordsSent":4`},
			"missing":     {fanouthandler.PermanentFailure, "object not found"},
			"big":         {fanouthandler.Succeeded, `"tasksQueued":`},
		})
		if strings.Contains(resp.Results[3].ResultString, `"tasksQueued":0`) {
			t.Errorf("big object: %s; want its chunks queued", resp.Results[3].ResultString)
		}
		tasks := runWork(t, fn, sqsc, work)
		got := sortedBodies(t, sqsc, target)
		wantBodies := slices.Concat(spaced, old, big)
		slices.Sort(wantBodies)
		if !slices.Equal(got, wantBodies) {
			t.Errorf("target holds %d records, want the %d of the tasks that succeeded (v1 of the versioned object, not v2); first got %.5q", len(got), len(wantBodies), got)
		}
		t.Logf("%d chunk tasks ran from the work queue", tasks)
		if !fn.WaitLogs(`"kind":"batch-operations"`, 5*time.Second) || !fn.WaitLogs(`"itemsFailed":1`, 5*time.Second) {
			t.Errorf("no batch-operations summary line with the failed task:\n%.3000s", fn.Logs())
		}
	})

	t.Run("2.0 userArguments", func(t *testing.T) {
		resp := invoke(t, `{"invocationSchemaVersion":"2.0","invocationId":"inv-2.0","job":{"id":"job-2","userArguments":{"bodyField":"other","maxInFlight":"2","runId":"run-2"}},"tasks":[`+
			`{"taskId":"spaced","s3Key":"`+batchKey("batch/a bñ 日本.jsonl")+`","s3VersionId":null,"s3Bucket":"`+bucket+`"},`+
			`{"taskId":"gone-version","s3Key":"batch/versioned.jsonl","s3VersionId":"no-such-version","s3Bucket":"`+bucket+`"}]}`)
		check(t, resp, "2.0", map[string]want{
			"spaced":       {fanouthandler.Succeeded, `"runId":"run-2"`},
			"gone-version": {fanouthandler.PermanentFailure, "versioned.jsonl"},
		})
		got := sortedBodies(t, sqsc, target)
		var wantBodies []string
		for _, v := range spaced {
			wantBodies = append(wantBodies, "o-"+v)
		}
		if !slices.Equal(got, wantBodies) {
			t.Errorf("target holds %q; want the other field of each record (bodyField from userArguments)", got)
		}
	})

	t.Run("2.0 bad userArguments", func(t *testing.T) {
		resp := invoke(t, `{"invocationSchemaVersion":"2.0","invocationId":"inv-2.0","job":{"id":"job-3","userArguments":{"chunkSize":"1"}},"tasks":[`+
			`{"taskId":"a","s3Key":"batch/versioned.jsonl","s3VersionId":null,"s3Bucket":"`+bucket+`"},`+
			`{"taskId":"b","s3Key":"batch/big%2Bplus.jsonl","s3VersionId":null,"s3Bucket":"`+bucket+`"}]}`)
		reason := "userArguments: chunkSize: 1 bytes is not a chunk size from 1KiB to 1GiB"
		check(t, resp, "2.0", map[string]want{"a": {fanouthandler.PermanentFailure, reason}, "b": {fanouthandler.PermanentFailure, reason}})
		if got := sortedBodies(t, sqsc, target); len(got) != 0 {
			t.Errorf("%d records sent for a job with bad userArguments", len(got))
		}
	})

	t.Run("unknown schema", func(t *testing.T) {
		out, err := fn.Invoke(t.Context(), json.RawMessage(`{"invocationSchemaVersion":"3.0","invocationId":"i","job":{"id":"j"},"tasks":[]}`))
		var fe *rie.Error
		if !errors.As(err, &fe) || !strings.Contains(fe.Message, `invocationSchemaVersion "3.0"`) {
			t.Errorf("invoke: %v (answer %s); want a function error naming the version", err, out)
		}
	})
}

// listItems returns the objects under prefix as a Distributed Map's S3
// ItemReader (s3:listObjectsV2) hands them over: Key, Size, a quoted Etag,
// LastModified in seconds and StorageClass, without the bucket.
func listItems(t *testing.T, s3c *s3.Client, prefix string) []map[string]any {
	t.Helper()
	out, err := s3c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	for _, o := range out.Contents {
		etag := aws.ToString(o.ETag)
		if !strings.HasPrefix(etag, `"`) {
			etag = `"` + etag + `"`
		}
		items = append(items, map[string]any{"Key": aws.ToString(o.Key), "Size": aws.ToInt64(o.Size), "Etag": etag,
			"LastModified": aws.ToTime(o.LastModified).Unix(), "StorageClass": cmpOr(string(o.StorageClass), "STANDARD")})
	}
	return items
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestDistributedMap runs Step Functions Distributed Map item batches
// through the Lambda runtime API: items as an S3 ItemReader lists them
// (no bucket; BatchInput gives it, with the run id and an override), whose
// records all arrive; the answer is the MapResult a ResultWriter stores.
// A batch with a missing object and one with an object changed since it
// was listed fail for good, as a FailedItemsError, after the batch's other
// items were sent.
func TestDistributedMap(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	work := localaws.CreateQueue(t, sqsc, "-work", nil)
	var want []string
	for i, key := range []string{"map/part 0.jsonl", "map/ñandú/part-1.jsonl", "map/part-2.jsonl"} {
		v, _ := putRecords(t, s3c, "lake", key, fmt.Sprintf("m%d", i), 20)
		want = append(want, v...)
	}
	slices.Sort(want)
	items := listItems(t, s3c, "map/")
	if len(items) != 3 {
		t.Fatalf("listed %d items", len(items))
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.WorkQueueURL.Env+"="+work, "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")

	t.Run("batch", func(t *testing.T) {
		batch := map[string]any{"Items": items, "BatchInput": map[string]any{"bucket": "lake", "runId": "exec-1", "maxInFlight": 4}}
		out, err := fn.Invoke(t.Context(), batch)
		if err != nil {
			t.Fatalf("invoke: %v\n%.3000s", err, fn.Logs())
		}
		var res fanouthandler.MapResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("answer %s: %v", out, err)
		}
		if res.RunID != "exec-1" || res.Items != 3 || res.Succeeded != 3 || res.RecordsSent != 60 || len(res.Results) != 3 {
			t.Fatalf("answer %s: want run exec-1, 3 items succeeded, 60 records sent", out)
		}
		for i, r := range res.Results {
			if r.Bucket != "lake" || r.Key != items[i]["Key"] || r.Status != fanouthandler.Succeeded || r.RecordsSent != 20 || r.Reason != "" {
				t.Errorf("result %d: %+v; want %s in lake, Succeeded, 20 records", i, r, items[i]["Key"])
			}
		}
		if got := sortedBodies(t, sqsc, target); !slices.Equal(got, want) {
			t.Errorf("target holds %d records, want the %d of the 3 items", len(got), len(want))
		}
	})

	t.Run("failed items", func(t *testing.T) {
		changed := map[string]any{"Key": "map/part-2.jsonl", "Size": items[2]["Size"], "Etag": `"0123456789abcdef0123456789abcdef"`}
		missing := map[string]any{"Key": "map/gone.jsonl", "Size": 10, "Etag": `"fedcba9876543210fedcba9876543210"`}
		out, err := fn.Invoke(t.Context(), map[string]any{"Items": []any{items[0], missing, changed}, "BatchInput": map[string]any{"bucket": "lake"}})
		var fe *rie.Error
		if !errors.As(err, &fe) || fe.Type != "FailedItemsError" {
			t.Fatalf("invoke: %v (answer %s); want a FailedItemsError", err, out)
		}
		i := strings.Index(fe.Message, ": {")
		var res fanouthandler.MapResult
		if i < 0 || json.Unmarshal([]byte(fe.Message[i+2:]), &res) != nil {
			t.Fatalf("message %q does not end with the batch's result", fe.Message)
		}
		if !strings.HasPrefix(res.RunID, "map-") || res.Succeeded != 1 || res.PermanentFailures != 2 || len(res.Results) != 3 ||
			res.Results[1].Status != fanouthandler.PermanentFailure || !strings.Contains(res.Results[1].Reason, "not found") ||
			res.Results[2].Status != fanouthandler.PermanentFailure || !strings.Contains(res.Results[2].Reason, "changed") {
			t.Errorf("result %+v: want a derived run id, item 0 sent, the missing and the changed items PermanentFailure", res)
		}
		if got := sortedBodies(t, sqsc, target); len(got) != 20 || !strings.HasPrefix(got[0], "m0-") {
			t.Errorf("target holds %d records; want item 0's 20", len(got))
		}
	})

	t.Run("bad BatchInput", func(t *testing.T) {
		out, err := fn.Invoke(t.Context(), map[string]any{"Items": items, "BatchInput": map[string]any{"bucket": "lake", "chunksize": "1KiB", "target": "q"}})
		if !rie.IsFunctionError(err) || !strings.Contains(err.Error(), `BatchInput: unknown field \"target\"`) && !strings.Contains(err.Error(), `BatchInput: unknown field "target"`) {
			t.Errorf("invoke: %v (answer %s); want the unknown field named", err, out)
		}
	})
}
