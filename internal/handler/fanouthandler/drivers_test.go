package fanouthandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Samples in testdata/: s3-batch-job-*.json follow the shape of the
// examples in the S3 and Lambda user guides (keys URL-encoded as Batch
// Operations sends them); sfn-map-batch-listobjectsv2.json follows an S3
// ItemReader's items as the Step Functions guide shows them.

func TestDecodeBatchJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload string
		want    BatchJob
		wantErr string
	}{
		{
			name:    "1.0 sample, null version, encoded key",
			payload: readFile(t, "testdata/s3-batch-job-1.0.json"),
			want: BatchJob{SchemaVersion: "1.0", InvocationID: "YXNkbGZqYWRmaiBhc2RmdW9hZHNmZGpmaGFzbGtkaGZza2RmaAo", JobID: "f3cc4f60-61f6-4a2b-8a21-d07600c373ce",
				Tasks: []BatchTask{{TaskID: "dGFza2lkZ29lc2hlcmUK", Object: dataset.Object{Bucket: "amzn-s3-demo-bucket", Key: "exports/date=2024-01-01/a bñ.jsonl"}}}},
		},
		{
			name:    "2.0 sample with userArguments",
			payload: readFile(t, "testdata/s3-batch-job-2.0.json"),
			want: BatchJob{SchemaVersion: "2.0", InvocationID: "YXNkbGZqYWRmaiBhc2RmdW9hZHNmZGpmaGFzbGtkaGZza2RmaAo", JobID: "f3cc4f60-61f6-4a2b-8a21-d07600c373ce",
				UserArguments: map[string]string{"chunkSize": "8MiB", "mode": "chunk"},
				Tasks: []BatchTask{{TaskID: "dGFza2lkZ29lc2hlcmUK",
					Object: dataset.Object{Bucket: "amzn-s3-demo-bucket", Key: "customerImage1.jpg", VersionID: "jbo9_jhdPEyB4RrmOxWS0kU0EoNrU_oI"}}}},
		},
		{
			name:    "1.0 ARN with region and account (aws-lambda-go's sample)",
			payload: `{"invocationSchemaVersion":"1.0","invocationId":"i","job":{"id":"j"},"tasks":[{"taskId":"t","s3Key":"k%2Fx","s3VersionId":"1","s3BucketArn":"arn:aws:s3:us-east-1:0123456788:awsexamplebucket"}]}`,
			want: BatchJob{SchemaVersion: "1.0", InvocationID: "i", JobID: "j",
				Tasks: []BatchTask{{TaskID: "t", Object: dataset.Object{Bucket: "awsexamplebucket", Key: "k/x", VersionID: "1"}}}},
		},
		{name: "unknown version", payload: `{"invocationSchemaVersion":"3.0","tasks":[]}`, wantErr: `invocationSchemaVersion "3.0" is not one fanout answers (1.0 or 2.0)`},
		{name: "version as a number", payload: `{"invocationSchemaVersion":1.0,"tasks":[]}`, wantErr: `invocationSchemaVersion 1.0 is not a string`},
		{name: "tasks not an array", payload: `{"invocationSchemaVersion":"2.0","tasks":{}}`, wantErr: "schema 2.0"},
		{name: "not JSON", payload: `{"invocationSchemaVersion":`, wantErr: "S3 Batch Operations invocation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeBatchJob([]byte(tc.payload))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v; want one that says %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("job (-want +got):\n%s", d)
			}
		})
	}
}

// TestDecodeBatchJobBadTasks: a task that names no object fails alone,
// with its reason; the others are read.
func TestDecodeBatchJobBadTasks(t *testing.T) {
	payload := `{"invocationSchemaVersion":"1.0","invocationId":"i","job":{"id":"j"},"tasks":[
		{"taskId":"bad-escape","s3Key":"100%.jsonl","s3BucketArn":"arn:aws:s3:::b"},
		{"taskId":"bad-arn","s3Key":"a.jsonl","s3BucketArn":"b"},
		{"taskId":"no-key","s3Key":"","s3BucketArn":"arn:aws:s3:::b"},
		{"taskId":"good","s3Key":"100%25.jsonl","s3BucketArn":"arn:aws:s3:::b"}]}`
	job, err := decodeBatchJob([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bad-escape": `s3Key "100%.jsonl" is not URL-encoded`,
		"bad-arn":    `s3BucketArn "b" is not a bucket ARN`,
		"no-key":     "no s3Key",
	}
	if len(job.Tasks) != 4 {
		t.Fatalf("%d tasks, want 4", len(job.Tasks))
	}
	for _, task := range job.Tasks {
		w, bad := want[task.TaskID]
		switch {
		case bad && (task.Err == nil || !strings.Contains(task.Err.Error(), w)):
			t.Errorf("task %s: err %v; want one that says %q", task.TaskID, task.Err, w)
		case !bad && (task.Err != nil || task.Object.Key != "100%.jsonl"):
			t.Errorf("task %s: %+v, %v; want key 100%%.jsonl", task.TaskID, task.Object, task.Err)
		}
	}
	v2 := `{"invocationSchemaVersion":"2.0","invocationId":"i","job":{"id":"j"},"tasks":[{"taskId":"t","s3Key":"a","s3Bucket":""}]}`
	job, err = decodeBatchJob([]byte(v2))
	if err != nil || len(job.Tasks) != 1 || job.Tasks[0].Err == nil || !strings.Contains(job.Tasks[0].Err.Error(), "no s3Bucket") {
		t.Errorf("2.0 task without a bucket: %+v, %v; want its error", job, err)
	}
}

// TestBatchResponseShape round-trips the response sample through
// aws-lambda-go's type: the fields fanout fills are the ones Batch
// Operations reads.
func TestBatchResponseShape(t *testing.T) {
	sample := readFile(t, "testdata/s3-batch-job-response.json")
	var resp events.S3BatchJobResponse
	if err := json.Unmarshal([]byte(sample), &resp); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var a, c any
	json.Unmarshal([]byte(sample), &a)
	json.Unmarshal(b, &c)
	if d := cmp.Diff(a, c); d != "" {
		t.Errorf("round trip (-sample +marshalled):\n%s", d)
	}
}

func TestBatchArguments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    map[string]string
		want    worktask.Overrides
		runID   string
		wantErr string
	}{
		{name: "none"},
		{
			name: "every override as a string",
			args: map[string]string{"format": "JSONL", "mode": "chunk", "targetQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
				"chunkSize": "4MiB", "maxInFlight": "8", "maxAttempts": "3", "bodyField": "b", "attributesField": "a", "groupIdField": "g", "dedupIdField": "d",
				"runId": "nightly-1"},
			want: worktask.Overrides{Format: dataset.FormatJSONL, Mode: worktask.ModeChunk, TargetQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
				ChunkSize: worktask.SettingOf("4MiB"), MaxInFlight: worktask.SettingOf("8"), MaxAttempts: worktask.SettingOf("3"), Mapping: worktask.Mapping{BodyField: "b", AttributesField: "a", GroupIDField: "g", DedupIDField: "d"}},
			runID: "nightly-1",
		},
		{name: "unknown key", args: map[string]string{"chunkSzie": "4MiB"}, wantErr: `userArguments: unknown field "chunkSzie" (did you mean "chunkSize"?)`},
		{name: "another unknown key", args: map[string]string{"maxInFlight": "4", "queue": "q"}, wantErr: `userArguments: unknown field "queue"`},
		{name: "chunk size out of range", args: map[string]string{"chunkSize": "2GiB"}, wantErr: "userArguments: chunkSize: 2GiB is not a chunk size from 1KiB to 1GiB"},
		{name: "in-flight not a number", args: map[string]string{"maxInFlight": "lots"}, wantErr: `userArguments: maxInFlight: "lots" is not a whole number from 1 to 1000`},
		{name: "unknown mode", args: map[string]string{"mode": "fast"}, wantErr: `userArguments: mode: "fast" is not record, chunk or notification`},
		{name: "queue name for URL", args: map[string]string{"targetQueueUrl": "orders"}, wantErr: `userArguments: targetQueueUrl: "orders" is not a queue URL`},
		{name: "bad run id", args: map[string]string{"runId": "a/b"}, wantErr: `userArguments: runId: "a/b" may hold only letters`},
		{name: "ingest", args: map[string]string{"ingest": "{}"}, wantErr: "userArguments: ingest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ov, runID, err := batchArguments(tc.args)
			if tc.wantErr != "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v; want an ArgumentError that says %q", err, tc.wantErr)
				}
				if classify(err) != PermanentFailure {
					t.Errorf("bad arguments classified %s, want PermanentFailure", classify(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, ov); d != "" || runID != tc.runID {
				t.Errorf("overrides (-want +got):\n%s\nrun id %q, want %q", d, runID, tc.runID)
			}
		})
	}
}

// apiError is an AWS error as the SDK returns it: an API error code inside
// an HTTP response error with its status.
func apiError(code string, status int) error {
	return fmt.Errorf("dataset: head s3://b/k: %w", &smithy.OperationError{ServiceID: "S3", OperationName: "HeadObject",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err: &smithy.GenericAPIError{Code: code, Message: code}},
		}})
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want ResultCode
	}{
		{"nil", nil, Succeeded},
		{"missing key (HEAD, no body)", apiError("NotFound", 404), PermanentFailure},
		{"missing version", apiError("NoSuchVersion", 404), PermanentFailure},
		{"access denied", apiError("Forbidden", 403), PermanentFailure},
		{"bad version id", apiError("InvalidArgument", 400), PermanentFailure},
		{"some other 4xx", apiError("Whatever", 409), PermanentFailure},
		{"target queue gone", fmt.Errorf("send: %w", apiError("AWS.SimpleQueueService.NonExistentQueue", 400)), PermanentFailure},
		{"throttled", apiError("SlowDown", 503), TemporaryFailure},
		{"throttled, 400", apiError("ThrottlingException", 400), TemporaryFailure},
		{"too many requests", apiError("TooManyRequests", 429), TemporaryFailure},
		{"internal error", apiError("InternalError", 500), TemporaryFailure},
		{"request timeout", apiError("RequestTimeout", 408), TemporaryFailure},
		{"read of a gone object", fmt.Errorf("read: %w", dataset.ErrNotFound), PermanentFailure},
		{"changed object", &dataset.ReadError{Err: fmt.Errorf("%w: precondition", dataset.ErrChanged)}, PermanentFailure},
		{"unknown format", fmt.Errorf("plan: %w", dataset.ErrUnknownFormat), PermanentFailure},
		{"malformed task", &worktask.MalformedError{Err: errors.New("x")}, PermanentFailure},
		{"bad arguments", &ArgumentError{Field: "BatchInput", Err: errors.New("x")}, PermanentFailure},
		{"claim held", fmt.Errorf("task t: %w", claims.ErrHeld), TemporaryFailure},
		{"deadline", fmt.Errorf("send: %w", partialbatch.ErrDeadline), TemporaryFailure},
		{"canceled", context.Canceled, TemporaryFailure},
		{"work queue refused tasks", errors.New("fanout: 3 tasks did not reach the work queue: x"), TemporaryFailure},
		{"connection reset", fmt.Errorf("get: %w", &smithy.OperationError{Err: &net_error{}}), TemporaryFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// net_error is a connection error as net returns it.
type net_error struct{}

func (*net_error) Error() string   { return "read tcp: connection reset by peer" }
func (*net_error) Timeout() bool   { return false }
func (*net_error) Temporary() bool { return true }

func TestDecodeMapBatch(t *testing.T) {
	b, err := decodeMapBatch([]byte(readFile(t, "testdata/sfn-map-batch-listobjectsv2.json")))
	if err != nil {
		t.Fatal(err)
	}
	if b.Input.Bucket != "amzn-s3-demo-bucket" || b.Input.RunID != "nightly-2024-01-01" || b.Input.ChunkSize.String() != "4MiB" || len(b.Items) != 2 {
		t.Fatalf("batch %+v", b)
	}
	obj, head, err := b.Items[1].object(b.Input.Bucket)
	want := dataset.Object{Bucket: "amzn-s3-demo-bucket", Key: "exports/ñandú.jsonl", Size: 10485760, ETag: "2a0dc1b0a3d4c4e9a8e7f1c1d0b3e4f5-2"}
	if err != nil || head || obj != want {
		t.Errorf("item 1: %+v head=%v err=%v; want %+v pinned by its Etag without HeadObject", obj, head, err, want)
	}

	for _, tc := range []struct {
		name    string
		payload string
		wantErr string
	}{
		{"unknown BatchInput field", `{"Items":[],"BatchInput":{"bucket":"b","chunkSzie":"1MiB"}}`, `BatchInput: unknown field "chunkSzie" (did you mean "chunkSize"?)`},
		{"BatchInput value out of range", `{"Items":[],"BatchInput":{"bucket":"b","maxAttempts":0}}`, "BatchInput: maxAttempts: 0 is not a whole number from 1 to 100"},
		{"BatchInput bad bucket", `{"Items":[],"BatchInput":{"bucket":"s3://b"}}`, "BatchInput: bucket:"},
		{"BatchInput bad run id", `{"Items":[],"BatchInput":{"bucket":"b","runId":"exec name"}}`, "BatchInput: runId:"},
		{"unknown top-level field", `{"Items":[],"Batchinput2":{}}`, `unknown field "Batchinput2"`},
		{"items not an array", `{"Items":{}}`, "Items: an object is not allowed here; want an array"},
		{"BatchInput not an object", `{"Items":[],"BatchInput":"b"}`, "BatchInput: a string is not allowed here; want an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeMapBatch([]byte(tc.payload))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v; want one that says %q", err, tc.wantErr)
			}
		})
	}

	b, err = decodeMapBatch([]byte(`{"Items":[{"Key":"a","Bucket":"own","VersionId":"v1"},{"Size":3},"x",{"Key":"c","Etag":"\"e\""},{"key":"d","size":5,"etag":"f","checksumAlgorithm":["CRC32"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		obj  dataset.Object
		head bool
		err  string
	}{
		{dataset.Object{Bucket: "own", Key: "a", VersionID: "v1"}, true, ""},
		{dataset.Object{}, false, "bad Items[1]: it has no Key"},
		{dataset.Object{}, false, "Items[2]"},
		{dataset.Object{Key: "c", ETag: "e"}, false, "no bucket"},
		{dataset.Object{Bucket: "dflt", Key: "d", Size: 5, ETag: "f"}, false, ""},
	} {
		bucket := ""
		if i == 4 {
			bucket = "dflt"
		}
		obj, head, err := b.Items[i].object(bucket)
		switch {
		case w.err != "":
			if err == nil || !strings.Contains(err.Error(), w.err) {
				t.Errorf("item %d: err %v; want one that says %q", i, err, w.err)
			} else if classify(err) != PermanentFailure {
				t.Errorf("item %d: %v classified %s, want PermanentFailure", i, err, classify(err))
			}
		case err != nil || obj != w.obj || head != w.head:
			t.Errorf("item %d: %+v head=%v err=%v; want %+v head=%v", i, obj, head, err, w.obj, w.head)
		}
	}
}

// TestMapResultLimit: a batch's answer stays under Step Functions' payload
// limit however many items it has, leaving out succeeded items first.
func TestMapResultLimit(t *testing.T) {
	r := MapResult{RunID: "r", Items: 3000}
	for i := range 3000 {
		st := Succeeded
		if i%1000 == 0 {
			st = PermanentFailure
		}
		r.Results = append(r.Results, MapItemResult{Bucket: "b", Key: strings.Repeat("k", 100) + fmt.Sprint(i), Status: st})
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back MapResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(b) > 200<<10 || len(back.Results) != 3 || back.Omitted != 2997 {
		t.Errorf("%d bytes, %d results, %d omitted; want at most 200KiB, the 3 failures, 2997 omitted", len(b), len(back.Results), back.Omitted)
	}
	small := MapResult{RunID: "r", Items: 1, Results: []MapItemResult{{Key: "k", Status: Succeeded}}}
	b, _ = json.Marshal(small)
	if !strings.Contains(string(b), `"results":[{"bucket":"","key":"k","status":"Succeeded"`) || strings.Contains(string(b), "omitted") {
		t.Errorf("small result %s: want every item and no omitted", b)
	}
}

// FuzzDecodeBatchJob: whatever the payload, decoding does not panic; a
// job it accepts has a known version, and each of its tasks either names
// an object (bucket and key) or carries its reason.
func FuzzDecodeBatchJob(f *testing.F) {
	for _, name := range []string{"testdata/s3-batch-job-1.0.json", "testdata/s3-batch-job-2.0.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"invocationSchemaVersion":"1.0","tasks":[{"taskId":"t","s3Key":"%zz","s3BucketArn":"arn:aws:s3:::b"}]}`))
	f.Add([]byte(`{"invocationSchemaVersion":"2.0","job":{"userArguments":{"chunkSize":"x"}},"tasks":[{"s3Key":"a+b","s3Bucket":"b"}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		job, err := decodeBatchJob(payload)
		if err != nil {
			return
		}
		if job.SchemaVersion != batchSchema1 && job.SchemaVersion != batchSchema2 {
			t.Fatalf("accepted version %q", job.SchemaVersion)
		}
		for _, task := range job.Tasks {
			if task.Err == nil && (task.Object.Bucket == "" || task.Object.Key == "") {
				t.Fatalf("task %+v names no object and has no error", task)
			}
		}
		batchArguments(job.UserArguments)
	})
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReason checks that a failed object's reason fits a report's bound
// and ends on a character: a cut through "é" drops it whole, and a reason
// under the bound is kept as it is, bytes and all.
func TestReason(t *testing.T) {
	long := strings.Repeat("a", maxResultString-1) + "é and more"
	for _, tc := range []struct{ err, want string }{
		{"short: \xff kept", "short: \xff kept"},
		{long, strings.Repeat("a", maxResultString-1)},
		{strings.Repeat("b", maxResultString+5), strings.Repeat("b", maxResultString)},
	} {
		if got := (objectRun{Err: errors.New(tc.err)}).reason(); got != tc.want {
			t.Errorf("reason of a %d-byte error: %d bytes %q…, want %d", len(tc.err), len(got), got[:min(len(got), 20)], len(tc.want))
		}
	}
}
