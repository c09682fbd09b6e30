package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestRefusals invokes the built function through the Lambda runtime API
// with payloads that are not SQS events, and starts it with
// configurations that cannot work: each is refused in words that name the
// cause, instead of an empty success or a silent skip of every object.
func TestRefusals(t *testing.T) {
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	out := localaws.CreateQueue(t, sqsc, "-out", nil)
	s3URL := localaws.FakeS3URL(t)
	bootstrap := rie.Build(t, "./functions/s3ingest")
	env := []string{"AWS_ENDPOINT_URL_S3=" + s3URL, settings.S3PathStyle.Env + "=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30"}
	fn := rie.Start(t, bootstrap, append(env, settings.OutputQueueURL.Env+"="+out)...)

	s3Event, err := os.ReadFile("../../pkg/partialbatch/testdata/s3-event.json")
	if err != nil {
		t.Fatal(err)
	}
	snsEvent, err := os.ReadFile("../../pkg/partialbatch/testdata/sns-event.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"null", "null", "not an SQS event, got: null"},
		{"empty object", "{}", "not an SQS event, got: empty object"},
		{"no records", `{"Records":[]}`, "not an SQS event, got: no records"},
		{"S3 event sent directly", string(s3Event), `not an SQS event, got: S3 event (Records[0].eventSource \"aws:s3\")`},
		{"SNS event", string(snsEvent), "not an SQS event, got: SNS event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer, err := fn.Invoke(t.Context(), json.RawMessage(tc.payload))
			if !rie.IsFunctionError(err) || !strings.Contains(err.Error(), strings.ReplaceAll(tc.want, `\"`, `"`)) {
				t.Errorf("invoke: %v (answer %s); want a function error that says %q", err, answer, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"event type typo", []string{settings.OutputQueueURL.Env + "=" + out, settings.EventTypes.Env + "=ObjectCreate:*"},
			`EVENT_TYPES: \"ObjectCreate:*\" is not an S3 event type; want a type such as ObjectCreated:Put, or one of ObjectCreated:*`},
		{"output queue name", []string{settings.OutputQueueURL.Env + "=records"}, `OUTPUT_QUEUE_URL: \"records\" is not a queue URL`},
		{"missing output queue", []string{settings.OutputQueueURL.Env + "=" + out + "-gone"},
			"OUTPUT_QUEUE_URL: queue " + out + "-gone cannot be used: AWS.SimpleQueueService.NonExistentQueue"},
		{"missing hand-off queue", []string{settings.OutputQueueURL.Env + "=" + out, settings.HandoffBytes.Env + "=1MiB", settings.FanoutWorkQueueURL.Env + "=" + out + "-work-gone"},
			"FANOUT_WORK_QUEUE_URL: queue " + out + "-work-gone cannot be used"},
		{"missing failure bucket", []string{settings.OutputQueueURL.Env + "=" + out, settings.FailureS3URI.Env + "=s3://s3sqs-no-such-bucket/failures"},
			"FAILURE_S3_URI: bucket s3sqs-no-such-bucket does not exist"},
		{"missing offload bucket", []string{settings.OutputQueueURL.Env + "=" + out, settings.OffloadS3URI.Env + "=s3://s3sqs-no-such-bucket/big"},
			"OFFLOAD_S3_URI: bucket s3sqs-no-such-bucket does not exist"},
		{"chunk size in KiB", []string{settings.OutputQueueURL.Env + "=" + out, settings.ChunkSize.Env + "=16"}, "CHUNK_SIZE: 16 bytes is not a chunk size from 1KiB to 1GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := rie.Start(t, bootstrap, append(env, tc.env...)...)
			if _, err := fn.Invoke(t.Context(), json.RawMessage(`{"Records":[{"messageId":"m1","eventSource":"aws:sqs","body":"{}"}]}`)); err == nil {
				t.Fatal("the function answered; want it to stop at init")
			}
			fn.WaitLogs(tc.want, 5*time.Second)
			if logs := fn.Logs(); !strings.Contains(logs, tc.want) || strings.Contains(logs, "send stopped") {
				t.Errorf("init log does not say %q in a user's words:\n%s", tc.want, logs)
			}
		})
	}
}
