package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestEndToEndReplay runs the function under aws-lambda-rie with
// MODE=notification and NOTIFICATION_FORMAT=sns, to a FIFO target: a
// request for a prefix sends one SNS-wrapped S3 notification per object,
// in the object's group with its record id as deduplication id, which
// aws-lambda-go's SNSEntity and S3Event read back to the object; the
// objects are not read, whatever their format. A request that asks for
// eventbridge gets EventBridge events.
func TestEndToEndReplay(t *testing.T) {
	sqsEndpoint, s3URL, s3c, sqsc := e2eStack(t)
	target := localaws.CreateQueue(t, sqsc, "-target.fifo", map[string]string{"ContentBasedDeduplication": "false"})
	failure := localaws.CreateQueue(t, sqsc, "-failure", nil)
	want := map[string]int64{}
	for key, body := range map[string]string{"replay/a b+c.jsonl": "{}\n", "replay/ünï €.parquet": "not parquet at all", "replay/empty": ""} {
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		want[key] = int64(len(body))
	}
	fn := startFanout(t, rie.Build(t, "./functions/fanout"),
		"AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_ENDPOINT_URL_S3="+s3URL, settings.S3PathStyle.Env+"=true",
		settings.TargetQueueURL.Env+"="+target, settings.FailureQueueURL.Env+"="+failure,
		settings.Mode.Env+"=notification", settings.NotificationFormat.Env+"=sns", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "AWS_LAMBDA_LOG_FORMAT=JSON")

	for _, format := range []string{"", "eventbridge"} {
		req := map[string]any{"bucket": "lake", "prefix": "replay/", "runId": "replay-" + format}
		if format != "" {
			// A queue of its own: the record ids, the deduplication ids,
			// are those of the first run's messages.
			target = localaws.CreateQueue(t, sqsc, "-target2.fifo", map[string]string{"ContentBasedDeduplication": "false"})
			req["notificationFormat"], req["targetQueueUrl"] = format, target
		}
		out, err := fn.Invoke(t.Context(), req)
		if err != nil {
			t.Fatalf("request: %v\n%s", err, fn.Logs())
		}
		var rep engine.Report
		if err := json.Unmarshal(out, &rep); err != nil || rep.Objects != len(want) || rep.RecordsSent != int64(len(want)) {
			t.Fatalf("report %s, %v: want %d objects, a message each", out, err, len(want))
		}
		got := map[string]int64{}
		for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
			body := aws.ToString(m.Body)
			n, err := s3event.Parse([]byte(body))
			if err != nil || len(n.Objects) != 1 {
				t.Fatalf("Parse(%s) = %+v, %v", body, n, err)
			}
			o := n.Objects[0]
			wantRoute := s3event.RouteSNS
			if format == "eventbridge" {
				wantRoute = s3event.RouteEventBridge
			} else {
				var sns events.SNSEntity
				var ev events.S3Event
				if json.Unmarshal([]byte(body), &sns) != nil || json.Unmarshal([]byte(sns.Message), &ev) != nil || len(ev.Records) != 1 ||
					ev.Records[0].S3.Object.URLDecodedKey != o.Key || ev.Records[0].AWSRegion != localaws.Region {
					t.Errorf("aws-lambda-go reads %s as %+v", body, ev)
				}
			}
			obj := dataset.Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
			if o.Route != wantRoute || m.Attributes["MessageGroupId"] != engine.GroupID(obj) ||
				m.Attributes["MessageDeduplicationId"] != engine.RecordID(obj, 0) {
				t.Errorf("message %s: route %v, attributes %v", body, o.Route, m.Attributes)
			}
			got[o.Key] = o.Size
		}
		if !maps.Equal(got, want) {
			t.Errorf("replayed %v, want %v", got, want)
		}
	}
	if msgs := localaws.Drain(t, sqsc, failure, time.Second); len(msgs) != 0 {
		t.Errorf("%d failures", len(msgs))
	}
}
