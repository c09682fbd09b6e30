package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// TestOffload notifies the function, through the Lambda runtime API, of an
// object with a small record and one too large for its 256 KiB output
// queue: the small one arrives inline, the large one as an SQS Extended
// Client pointer whose payload is the record as s3ingest encodes it.
func TestOffload(t *testing.T) {
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	out := localaws.CreateQueue(t, sqsc, "-out", map[string]string{"MaximumMessageSize": "262144"})
	s3URL := localaws.FakeS3URL(t)
	s3c := localaws.S3Client(s3URL)
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("ü", 150<<10) // 300 KiB of 2-byte characters
	body := `{"n":1}` + "\n" + `{"n":2,"doc":"` + big + `"}` + "\n"
	key := "in/date=2026-11-30/big.jsonl"
	put, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	fn := rie.Start(t, rie.Build(t, "./functions/s3ingest"),
		"AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		settings.OutputQueueURL.Env+"="+out, "OFFLOAD_S3_URI=s3://lake/offload/")
	note, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": localaws.Region, "eventName": "ObjectCreated:Put",
		"eventTime": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"s3": map[string]any{"bucket": map[string]any{"name": "lake"}, "object": map[string]any{
			"key": key, "size": len(body), "eTag": strings.Trim(aws.ToString(put.ETag), `"`), "sequencer": "0A1"}},
	}}})
	answer, err := fn.Invoke(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", EventSource: "aws:sqs", Body: string(note)}}})
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, fn.Logs())
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(answer, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("answer %s (%v)", answer, err)
	}
	msgs := localaws.Drain(t, sqsc, out, 2*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	resolver := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{})
	pointers := 0
	for _, m := range msgs {
		payload, ptr, err := resolver.Resolve(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			N    int    `json:"n"`
			Doc  string `json:"doc"`
			Date string `json:"date"`
		}
		if err := json.Unmarshal([]byte(payload), &rec); err != nil {
			t.Fatalf("payload is not s3ingest's JSON: %v", err)
		}
		if rec.Date != "2026-11-30" {
			t.Errorf("record %d lacks its partition value: %.200s", rec.N, payload)
		}
		switch {
		case rec.N == 2 && ptr != nil && rec.Doc == big:
			pointers++
		case rec.N == 1 && ptr == nil:
		default:
			t.Errorf("record %d arrived with pointer %v", rec.N, ptr)
		}
	}
	if pointers != 1 {
		t.Errorf("%d pointers, want 1", pointers)
	}
	if !fn.WaitLogs(`"recordsOffloaded":1`, 5*time.Second) {
		t.Errorf("the summary does not count the offloaded record:\n%s", fn.Logs())
	}
}
