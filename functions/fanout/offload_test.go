package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// TestOffload sends, through the Lambda runtime API, records around the
// limit of a 256 KiB queue and a 1 MiB FIFO queue: each arrives inline when
// its message (body and attributes, as SQS counts them) fits, and as an SQS
// Extended Client pointer when it does not, whose payload reads back
// byte for byte. The same run again writes no second object. With a bucket
// that does not exist, the large record goes to the failure output.
func TestOffload(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	for _, tc := range []struct {
		name  string
		limit int
		attrs map[string]string
	}{
		{"256 KiB standard", 256 << 10, map[string]string{"MaximumMessageSize": "262144"}},
		{"1 MiB FIFO", 1 << 20, map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suffix := "-offload"
			if tc.attrs["FifoQueue"] == "true" {
				suffix += ".fifo"
			}
			target := localaws.CreateQueue(t, sqsc, suffix, tc.attrs)
			failure := localaws.CreateQueue(t, sqsc, "-failure", nil)
			prefix := "offload/" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "/", "") + "/"
			fn := startFanout(t, rie.Build(t, "./functions/fanout"),
				"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
				settings.TargetQueueURL.Env+"="+target, settings.FailureQueueURL.Env+"="+failure, "OFFLOAD_S3_URI=s3://lake/"+prefix,
				"AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")

			// A small record first, to learn what the attributes fanout adds
			// weigh, so that the others land exactly around the limit.
			key := "sizes/" + strings.ReplaceAll(tc.name, " ", "-") + ".jsonl"
			put := func(lines []string) {
				if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key),
					Body: strings.NewReader(strings.Join(lines, "\n") + "\n")}); err != nil {
					t.Fatal(err)
				}
			}
			put([]string{`{"v":""}`})
			run(t, fn, key, "probe")
			probe := localaws.Drain(t, sqsc, target, 2*time.Second)
			if len(probe) != 1 {
				t.Fatalf("%d probe messages", len(probe))
			}
			// The attribute values name the object and its version, which
			// the real object shares (same key, same ETag length).
			overhead := attrSize(probe[0].MessageAttributes)
			record := func(bodySize int, fill string) string {
				// {"v":"..."} is 8 bytes around the fill.
				n := (bodySize - 8) / len(fill)
				s := `{"v":"` + strings.Repeat(fill, n) + `"}`
				return s + strings.Repeat(" ", bodySize-len(s))
			}
			lines := []string{
				record(tc.limit-overhead-1, "a"),  // inline
				record(tc.limit-overhead, "b"),    // inline, exactly the limit
				record(tc.limit-overhead+1, "c"),  // a pointer
				record(tc.limit-overhead+2, "é"),  // a pointer; 2-byte characters
				record(5<<20, "d"),                // 5 MiB, a pointer
				record(tc.limit-overhead-1, "日本"), // inline, multi-byte
			}
			wantPointer := []bool{false, false, true, true, true, false}
			put(lines)
			run(t, fn, key, "sizes")
			msgs := localaws.Drain(t, sqsc, target, 3*time.Second)
			if len(msgs) != len(lines) {
				t.Fatalf("%d messages, want %d", len(msgs), len(lines))
			}
			resolver := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{})
			got := map[string]bool{}
			for _, m := range msgs {
				body, ptr, err := resolver.Resolve(t.Context(), m)
				if err != nil {
					t.Fatalf("resolve: %v", err)
				}
				i := indexOf(lines, body)
				if i < 0 {
					t.Fatalf("a message resolves to %d bytes that are no record", len(body))
				}
				if (ptr != nil) != wantPointer[i] {
					t.Errorf("record %d (%d bytes): pointer %v, want %v", i, len(lines[i]), ptr != nil, wantPointer[i])
				}
				if ptr != nil && !strings.HasPrefix(ptr.Key, prefix) {
					t.Errorf("record %d offloaded to %s, not under %s", i, ptr, prefix)
				}
				got[body] = true
			}
			if len(got) != len(lines) {
				t.Errorf("%d distinct records arrived, want %d", len(got), len(lines))
			}
			if n := countObjects(t, s3c, prefix); n != 3 {
				t.Errorf("%d objects under %s, want 3", n, prefix)
			}

			// The same run again overwrites its objects.
			run(t, fn, key, "sizes")
			localaws.Drain(t, sqsc, target, 3*time.Second)
			if n := countObjects(t, s3c, prefix); n != 3 {
				t.Errorf("after the same run again, %d objects under %s, want 3", n, prefix)
			}
		})
	}

	// A bucket that does not exist stops the function at init, named by
	// its variable; one deleted after init fails its records as
	// OffloadFailed, on the failure output.
	t.Run("bucket missing", func(t *testing.T) {
		target := localaws.CreateQueue(t, sqsc, "-offload", map[string]string{"MaximumMessageSize": "262144"})
		failure := localaws.CreateQueue(t, sqsc, "-failure", nil)
		bootstrap := rie.Build(t, "./functions/fanout")
		env := []string{"AWS_ENDPOINT_URL_SQS=" + sqsEndpoint, "AWS_ENDPOINT_URL_S3=" + s3URL, settings.S3PathStyle.Env + "=true",
			settings.TargetQueueURL.Env + "=" + target, settings.FailureQueueURL.Env + "=" + failure,
			"AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON"}
		fn := startFanout(t, bootstrap, append(env, "OFFLOAD_S3_URI=s3://no-such-bucket/offload/")...)
		if _, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "key": "sizes/any.jsonl"}); err == nil ||
			!fn.WaitLogs("OFFLOAD_S3_URI: bucket no-such-bucket does not exist", 5*time.Second) {
			t.Errorf("a missing offload bucket: %v; want the function stopped at init, naming OFFLOAD_S3_URI\n%s", err, fn.Logs())
		}

		if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("offload-gone")}); err != nil {
			t.Fatal(err)
		}
		fn = startFanout(t, bootstrap, append(env, "OFFLOAD_S3_URI=s3://offload-gone/offload/")...)
		key := "sizes/missing.jsonl"
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(`{"v":"small"}` + "\n")}); err != nil {
			t.Fatal(err)
		}
		run(t, fn, key, "before") // init, with the bucket there
		localaws.Drain(t, sqsc, target, 2*time.Second)
		if _, err := s3c.DeleteBucket(t.Context(), &s3.DeleteBucketInput{Bucket: aws.String("offload-gone")}); err != nil {
			t.Fatal(err)
		}
		big := `{"v":"` + strings.Repeat("x", 300<<10) + `"}`
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key),
			Body: strings.NewReader(`{"v":"small"}` + "\n" + big + "\n")}); err != nil {
			t.Fatal(err)
		}
		run(t, fn, key, "missing")
		if msgs := localaws.Drain(t, sqsc, target, 2*time.Second); len(msgs) != 1 || aws.ToString(msgs[0].Body) != `{"v":"small"}` {
			t.Errorf("target holds %d messages; want only the small record", len(msgs))
		}
		fails := localaws.Drain(t, sqsc, failure, 2*time.Second)
		if len(fails) != 1 {
			t.Fatalf("%d failures, want 1", len(fails))
		}
		var f engine.Failure
		if err := json.Unmarshal([]byte(aws.ToString(fails[0].Body)), &f); err != nil {
			t.Fatal(err)
		}
		if f.Code != "OffloadFailed" || f.Offset != 14 || !strings.Contains(f.Message, "NoSuchBucket") {
			t.Errorf("failure %+v; want OffloadFailed at offset 14 naming NoSuchBucket", f)
		}
	})
}

// run sends one object through fn as a request with run id runID.
func run(t *testing.T, fn *rie.Runtime, key, runID string) {
	t.Helper()
	out, err := fn.Invoke(t.Context(), map[string]any{"bucket": "lake", "key": key, "runId": runID})
	if err != nil {
		t.Fatalf("request: %v\n%s", err, fn.Logs())
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
}

// attrSize is what a message's attributes weigh as SQS counts them: name,
// data type and value of each.
func attrSize(attrs map[string]types.MessageAttributeValue) int {
	n := 0
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

func indexOf(lines []string, body string) int {
	for i, l := range lines {
		if l == body {
			return i
		}
	}
	return -1
}

func countObjects(t *testing.T, c *s3.Client, prefix string) int {
	t.Helper()
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}
