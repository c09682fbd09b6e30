package ingesthandler

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// e2eUploads are partitioned objects with awkward key names: spaces, "+",
// "%", "&", "=", unicode, a null partition, a long partition value; in
// JSON Lines, CSV and text.
var e2eUploads = []struct{ key, content string }{
	{"events/date=2024-01-01/hour=07/part 0001.jsonl", `{"id":1,"msg":"hello"}` + "\n" + `{"id":2,"msg":"wörld","hour":"own"}` + "\n"},
	{"events/date=2024-01-02/kind=a+b/x+y.csv", "id,name\n1,alpha\n2,beta\n3,gamma\n"},
	{"events/date=2024-01-03/pct=100%25/100% done.txt", "first line\nsecond line\n"},
	{"events/q=a&b/amp&ersand.jsonl", `{"q":"amp"}` + "\n"},
	{"events/région=Zürich/ünïcödé 日本語.jsonl", `{"city":"Zürich"}` + "\n"},
	{"events/date=__HIVE_DEFAULT_PARTITION__/n=1/null.jsonl", `{"n":null}` + "\n"},
	{"events/eq=a%3Db/x=y=z.jsonl", `{"eq":true}` + "\n"},
	{"events/long=" + strings.Repeat("y", 300) + "/f.jsonl", `{"long":1}` + "\n"},
}

// TestIntegrationEndToEnd lets moto_server produce the notifications of
// uploads (bucket → SNS topic → a queue with wrapped delivery and one with
// raw delivery), turns the received messages into Lambda SQS events,
// invokes the built bootstrap under aws-lambda-rie with each, and checks
// every record on the output queue (fauxqs) with its partition values and
// _file.
func TestIntegrationEndToEnd(t *testing.T) {
	moto := localaws.Moto(t)
	out := sqs.NewFromConfig(localaws.SQS(t))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	s3c := s3.NewFromConfig(moto, func(o *s3.Options) { o.UsePathStyle = true })
	msqs := sqs.NewFromConfig(moto)
	snsc := sns.NewFromConfig(moto)
	run := fmt.Sprint(time.Now().UnixNano())
	name := func(what string) string { return "s3ingest-" + what + "-" + run }

	queue := func(what string) (url, arn string) {
		t.Helper()
		q, err := msqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name(what))})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", what, err)
		}
		t.Cleanup(func() { _, _ = msqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
		attrs, err := msqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			t.Fatalf("GetQueueAttributes %s: %v", what, err)
		}
		return *q.QueueUrl, attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	wrappedURL, wrappedARN := queue("wrapped")
	rawURL, rawARN := queue("raw")
	topic, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name("topic"))})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	t.Cleanup(func() { _, _ = snsc.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	for arn, raw := range map[string]bool{wrappedARN: false, rawARN: true} {
		in := &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn)}
		if raw {
			in.Attributes = map[string]string{"RawMessageDelivery": "true"}
		}
		if _, err := snsc.Subscribe(ctx, in); err != nil {
			t.Fatalf("Subscribe %s: %v", arn, err)
		}
	}
	bucket := name("bucket")
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{
			TopicConfigurations: []s3types.TopicConfiguration{{TopicArn: topic.TopicArn, Events: []s3types.Event{"s3:ObjectCreated:*"}}},
		},
	}); err != nil {
		t.Fatalf("PutBucketNotificationConfiguration: %v", err)
	}
	content := map[string]string{}
	for _, u := range e2eUploads {
		content[u.key] = u.content
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(u.key), Body: strings.NewReader(u.content)}); err != nil {
			t.Fatalf("PutObject %q: %v", u.key, err)
		}
	}

	outURL := localaws.CreateQueue(t, out, "", nil)
	bootstrap := rie.Build(t, "./functions/s3ingest")
	fn := rie.Start(t, bootstrap,
		"OUTPUT_QUEUE_URL="+outURL,
		"S3_FORCE_PATH_STYLE=true",
		"AWS_ENDPOINT_URL_S3="+aws.ToString(moto.BaseEndpoint),
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	)

	for _, route := range []struct {
		name, url, arn string
	}{{"sns-wrapped", wrappedURL, wrappedARN}, {"sns-raw", rawURL, rawARN}} {
		t.Run(route.name, func(t *testing.T) {
			ev, objs := receiveEvent(ctx, t, msqs, route.url, route.arn, len(e2eUploads))
			payload, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			answer, err := fn.Invoke(ctx, json.RawMessage(payload))
			if err != nil {
				t.Fatalf("invoke: %v\n%s", err, fn.Logs())
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(answer, &resp); err != nil {
				t.Fatalf("answer %s: %v", answer, err)
			}
			if len(resp.BatchItemFailures) != 0 {
				t.Errorf("batchItemFailures %v; logs:\n%s", failures(resp), fn.Logs())
			}
			var uploaded []object
			for _, o := range objs {
				uploaded = append(uploaded, object{Object: o, content: content[o.Key]})
			}
			checkOutput(t, out, outURL, wantRecords(t, uploaded...))
		})
	}
	if !strings.Contains(fn.Logs(), `"message":"s3ingest invocation"`) || !strings.Contains(fn.Logs(), `"CloudWatchMetrics"`) {
		t.Errorf("no summary or EMF line in the function's output:\n%s", fn.Logs())
	}
	t.Logf("cold start: init %s (aws-lambda-rie's INIT REPORT); first invocation %v", initReport(fn.Logs()), fn.Init)
}

// initReport returns the init duration that aws-lambda-rie reports, or
// "unknown".
func initReport(logs string) string {
	m := regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`).FindStringSubmatch(logs)
	if m == nil {
		return "unknown"
	}
	return m[1] + " ms"
}

// receiveEvent receives the notifications of want objects (and the test
// event) from a moto queue, and returns them as the Lambda SQS event that
// the event source mapping would deliver, with the objects they name.
func receiveEvent(ctx context.Context, t *testing.T, c *sqs.Client, url, arn string, want int) (events.SQSEvent, []s3event.Object) {
	t.Helper()
	var ev events.SQSEvent
	var msgs []s3event.Message
	var objs []s3event.Object
	testEvent := false
	deadline := time.Now().Add(60 * time.Second)
	for (len(objs) < want || !testEvent) && time.Now().Before(deadline) {
		got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 120,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		ev.Records = append(ev.Records, esm.Event(got.Messages, arn).Records...)
		for _, m := range got.Messages {
			msgs = append(msgs, s3event.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)})
		}
		res := s3event.Filter{}.Apply(msgs)
		objs = objs[:0]
		for _, it := range res.Accepted {
			objs = append(objs, it.Object)
		}
		testEvent = len(res.TestEvents) > 0
		if len(res.Failed) > 0 {
			t.Fatalf("moto sent a message s3event cannot read: %v", res.Failed[0].Err)
		}
	}
	if len(objs) != want || !testEvent {
		t.Fatalf("received %d objects (test event: %v) in %d messages; want %d and a test event", len(objs), testEvent, len(msgs), want)
	}
	return ev, objs
}
