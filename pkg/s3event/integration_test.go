package s3event_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// uploads are the keys the live test writes, with the partitions each must
// yield.
var uploads = []struct {
	key   string
	parts []s3event.Partition
}{
	{"events/date=2024-01-01/hour=07/part 0001.csv", []part{{Name: "date", Value: "2024-01-01"}, {Name: "hour", Value: "07"}}},
	{"events/date=2024-01-02/kind=a+b/x+y.json", []part{{Name: "date", Value: "2024-01-02"}, {Name: "kind", Value: "a+b"}}},
	{"events/date=2024-01-03/pct=100%25/100% done.txt", []part{{Name: "date", Value: "2024-01-03"}, {Name: "pct", Value: "100%"}}},
	{"events/q=a&b/amp&ersand.csv", []part{{Name: "q", Value: "a&b"}}},
	{"events/région=Zürich/ünïcödé 日本語.csv", []part{{Name: "région", Value: "Zürich"}}},
	{"events/date=__HIVE_DEFAULT_PARTITION__/n=1/null.csv", []part{{Name: "date", Null: true}, {Name: "n", Value: "1"}}},
	{"events/eq=a%3Db/x=y=z.txt", []part{{Name: "eq", Value: "a=b"}}},
	{"events/misc/!'()*~:;,@$.txt", nil},
	{"events/trailing/slash=yes/", []part{{Name: "slash", Value: "yes"}}},
	{"events/long=" + strings.Repeat("y", 900) + "/f.csv", []part{{Name: "long", Value: strings.Repeat("y", 900)}}},
}

// TestIntegrationMotoNotifications lets moto_server produce notifications
// for uploads on every route it can: S3 → SNS → SQS wrapped and raw,
// S3 → SQS directly, and S3 → EventBridge → SQS. It checks that every
// decoded key equals the uploaded key exactly, with its partitions.
func TestIntegrationMotoNotifications(t *testing.T) {
	cfg := localaws.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	sqsc := sqs.NewFromConfig(cfg)
	snsc := sns.NewFromConfig(cfg)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	name := func(what string) string { return "s3event-" + what + "-" + run }

	// Queues: one per route.
	queue := func(what string) (url, arn string) {
		t.Helper()
		out, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name(what))})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", what, err)
		}
		t.Cleanup(func() {
			_, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
		})
		attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			t.Fatalf("GetQueueAttributes %s: %v", what, err)
		}
		return *out.QueueUrl, attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	wrappedURL, wrappedARN := queue("wrapped")
	rawURL, rawARN := queue("raw")
	directURL, directARN := queue("direct")
	ebURL, ebARN := queue("eventbridge")

	// SNS topic with a wrapped and a raw subscription. moto delivers
	// without a topic or queue policy, so none is set.
	topic, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name("topic"))})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	t.Cleanup(func() { _, _ = snsc.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(wrappedARN)}); err != nil {
		t.Fatalf("Subscribe wrapped: %v", err)
	}
	if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(rawARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		t.Fatalf("Subscribe raw: %v", err)
	}

	// Two buckets: AWS rejects overlapping notification configurations on
	// one bucket, so the SNS + EventBridge bucket and the direct-to-SQS
	// bucket are separate and get the same uploads.
	viaSNS, direct := name("sns"), name("sqs")
	for _, b := range []string{viaSNS, direct} {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatalf("CreateBucket %s: %v", b, err)
		}
	}

	// EventBridge rule on the default bus for the SNS bucket's events.
	rule := name("rule")
	pattern, _ := json.Marshal(map[string]any{"source": []string{"aws.s3"}, "detail": map[string]any{"bucket": map[string]any{"name": []string{viaSNS}}}})
	callEvents(ctx, t, cfg, "PutRule", map[string]any{"Name": rule, "EventPattern": string(pattern), "State": "ENABLED"})
	callEvents(ctx, t, cfg, "PutTargets", map[string]any{"Rule": rule, "Targets": []any{map[string]any{"Id": "queue", "Arn": ebARN}}})
	t.Cleanup(func() {
		ctx := context.Background()
		callEvents(ctx, t, cfg, "RemoveTargets", map[string]any{"Rule": rule, "Ids": []string{"queue"}})
		callEvents(ctx, t, cfg, "DeleteRule", map[string]any{"Name": rule})
	})

	created := []s3types.Event{s3types.Event("s3:ObjectCreated:*")}
	if _, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(viaSNS),
		NotificationConfiguration: &s3types.NotificationConfiguration{
			TopicConfigurations:      []s3types.TopicConfiguration{{TopicArn: topic.TopicArn, Events: created}},
			EventBridgeConfiguration: &s3types.EventBridgeConfiguration{},
		},
	}); err != nil {
		t.Fatalf("PutBucketNotificationConfiguration %s: %v", viaSNS, err)
	}
	if _, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(direct),
		NotificationConfiguration: &s3types.NotificationConfiguration{
			QueueConfigurations: []s3types.QueueConfiguration{{QueueArn: aws.String(directARN), Events: created}},
		},
	}); err != nil {
		t.Fatalf("PutBucketNotificationConfiguration %s: %v", direct, err)
	}

	for _, b := range []string{viaSNS, direct} {
		for _, u := range uploads {
			if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(u.key), Body: strings.NewReader("a,b\n")}); err != nil {
				t.Fatalf("PutObject %s %q: %v", b, u.key, err)
			}
		}
	}

	wantParts := map[string][]s3event.Partition{}
	var wantKeys []string
	for _, u := range uploads {
		wantParts[u.key] = u.parts
		wantKeys = append(wantKeys, u.key)
	}
	slices.Sort(wantKeys)

	routes := []struct {
		name      string
		url       string
		bucket    string
		route     s3event.Route
		testEvent bool
		opts      s3event.Options
	}{
		{name: "sns-wrapped", url: wrappedURL, bucket: viaSNS, route: s3event.RouteSNS, testEvent: true},
		{name: "sns-raw", url: rawURL, bucket: viaSNS, route: s3event.RouteS3, testEvent: true},
		{name: "s3-direct", url: directURL, bucket: direct, route: s3event.RouteS3, testEvent: true},
		// moto writes EventBridge keys unencoded (see Options.EventBridgeKeysRaw).
		{name: "eventbridge", url: ebURL, bucket: viaSNS, route: s3event.RouteEventBridge, opts: s3event.Options{EventBridgeKeysRaw: true}},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			filter := s3event.Filter{Options: r.opts}
			msgs := receiveUntil(ctx, t, sqsc, r.url, 30*time.Second, func(msgs []s3event.Message) bool {
				res := filter.Apply(msgs)
				return len(res.Accepted) >= len(uploads) && (!r.testEvent || len(res.TestEvents) > 0)
			})
			res := filter.Apply(msgs)
			for _, f := range res.Failed {
				t.Errorf("message %s failed: %v", f.MessageID, f.Err)
			}
			if r.testEvent && len(res.TestEvents) == 0 {
				t.Errorf("no s3:TestEvent received")
			}
			for _, s := range res.Skipped {
				// moto adds an "Object Tags Added" EventBridge event to
				// every PutObject; nothing else may be skipped.
				if s.Reason != s3event.SkipEventType || s.Object.EventName != "ObjectTagging:Put" {
					t.Errorf("skipped %q: %s (%s)", s.Object.Key, s.Reason, s.Detail)
				}
			}
			var gotKeys []string
			for _, it := range res.Accepted {
				o := it.Object
				gotKeys = append(gotKeys, o.Key)
				if o.Route != r.route || o.Bucket != r.bucket || o.Size != 4 || o.ETag == "" || o.EventTime.IsZero() || o.Region != localaws.Region {
					t.Errorf("object %q: route %v bucket %q size %d eTag %q time %v region %q; want route %v bucket %q size 4",
						o.Key, o.Route, o.Bucket, o.Size, o.ETag, o.EventTime, o.Region, r.route, r.bucket)
				}
				if age := time.Since(o.EventTime); age < -time.Minute || age > 5*time.Minute {
					t.Errorf("object %q: event time %v is %v from now; moto's zone-less time should read as UTC", o.Key, o.EventTime, age)
				}
				if diff := cmp.Diff(wantParts[o.Key], o.Partitions(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("partitions of %q (-want +got):\n%s", o.Key, diff)
				}
			}
			slices.Sort(gotKeys)
			if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
				t.Errorf("decoded keys (-uploaded +got):\n%s", diff)
			}
		})
	}
}

// receiveUntil receives messages from a queue, deleting them, until done
// says the collected messages are enough or the wait is over.
func receiveUntil(ctx context.Context, t *testing.T, c *sqs.Client, url string, wait time.Duration, done func([]s3event.Message) bool) []s3event.Message {
	t.Helper()
	deadline := time.Now().Add(wait)
	var msgs []s3event.Message
	seen := map[string]bool{}
	for time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			if seen[*m.MessageId] {
				continue
			}
			seen[*m.MessageId] = true
			msgs = append(msgs, s3event.Message{ID: *m.MessageId, Body: *m.Body})
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("DeleteMessage: %v", err)
			}
		}
		if done(msgs) {
			return msgs
		}
	}
	t.Logf("gave up waiting after %v with %d messages", wait, len(msgs))
	return msgs
}

// callEvents calls an EventBridge API action on moto. The module has no
// EventBridge client, and this test needs only four calls, so it signs a
// JSON 1.1 request itself.
func callEvents(ctx context.Context, t *testing.T, cfg aws.Config, action string, payload any) {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, aws.ToString(cfg.BaseEndpoint)+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AWSEvents."+action)
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "events", cfg.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("EventBridge %s: %v", action, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("EventBridge %s: HTTP %d: %s", action, resp.StatusCode, out)
	}
}
