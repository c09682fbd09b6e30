package ingesthandler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// TestIntegrationRecordIDsOfAVersion writes two versions of an object to a
// versioned bucket in moto_server, which notifies a queue of both, and
// sends the records of the latest version by every path that finds an
// object: fanout by prefix (a listing: ETag, no version id), by key
// (HeadObject: version id and ETag), by S3 Batch Operations (HeadObject of
// the version the task names), by Distributed Map (an item with its Etag),
// and from a notification (moto's: eTag only; AWS's: eTag and versionId);
// s3ingest from both notifications and from an EventBridge event of the
// version (etag and version-id). Each path
// gives each record the same record id: the one its ETag and offset make.
func TestIntegrationRecordIDsOfAVersion(t *testing.T) {
	moto := localaws.Moto(t)
	out := sqs.NewFromConfig(localaws.SQS(t))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s3c := s3.NewFromConfig(moto, func(o *s3.Options) { o.UsePathStyle = true })
	msqs := sqs.NewFromConfig(moto)

	bucket := fmt.Sprintf("versioned-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := s3c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket: aws.String(bucket), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	q, err := msqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(bucket + "-notes")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() { _, _ = msqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	qa, err := msqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	notesARN := qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if _, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{
			QueueConfigurations: []s3types.QueueConfiguration{{QueueArn: aws.String(notesARN), Events: []s3types.Event{"s3:ObjectCreated:*"}}},
		},
	}); err != nil {
		t.Fatalf("PutBucketNotificationConfiguration: %v", err)
	}
	const key = "v/date=2024-01-01/data.jsonl"
	var latest dataset.Object
	for _, content := range []string{`{"value":"old"}` + "\n", `{"value":"a"}` + "\n" + `{"value":"bb"}` + "\n" + `{"value":"ccc"}` + "\n"} {
		put, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(content)})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		latest = dataset.Object{Bucket: bucket, Key: key, Size: int64(len(content)), ETag: strings.Trim(aws.ToString(put.ETag), `"`), VersionID: aws.ToString(put.VersionId)}
	}
	if latest.VersionID == "" || latest.ETag == "" {
		t.Fatalf("moto gave the latest version %+v; want a version id and an ETag", latest)
	}
	// The records of the latest version, by value, and the ids their ETag
	// and offsets make.
	want := map[string]string{}
	for value, offset := range map[string]int64{"a": 0, "bb": 14, "ccc": 29} {
		want[value] = engine.RecordID(dataset.Object{Bucket: bucket, Key: key, ETag: latest.ETag}, offset)
	}
	// moto's notifications give the eTag but no versionId, which AWS
	// writes in a versioned bucket: the notification of the latest version
	// is sent as moto wrote it, and as AWS writes it.
	notes, objs := receiveEvent(ctx, t, msqs, aws.ToString(q.QueueUrl), notesARN, 2)
	var motoNote events.SQSEvent
	for _, m := range notes.Records {
		if strings.Contains(m.Body, latest.ETag) {
			motoNote.Records = append(motoNote.Records, m)
		}
	}
	if len(motoNote.Records) != 1 {
		t.Fatalf("moto's notifications name %+v; want one of ETag %s", objs, latest.ETag)
	}
	notified := object{Object: s3event.Object{Bucket: bucket, Key: key, Size: latest.Size, ETag: latest.ETag, VersionID: latest.VersionID,
		EventName: "ObjectCreated:Put", EventTime: time.Now().UTC().Truncate(time.Millisecond), Sequencer: "0065A1B2C3D4E5F601"}}
	awsNote := esm.Event([]sqstypes.Message{{MessageId: aws.String("aws-note"), Body: aws.String(s3Body(notified))}}, notesARN)

	log := slog.New(slog.DiscardHandler)
	failure := localaws.CreateQueue(t, out, "-failure", nil)
	runner := func(target string) *engine.Runner {
		t.Helper()
		r, err := engine.New(ctx, s3c, out, engine.Options{Target: sqsbatch.Queue{URL: target}, FailureQueueURL: failure, Logger: log})
		if err != nil {
			t.Fatalf("engine.New: %v", err)
		}
		return r
	}
	fanoutPath := func(payload any) func(target string) error {
		return func(target string) error {
			b, err := json.Marshal(payload)
			if err != nil {
				return err
			}
			_, err = fanouthandler.New(runner(target), s3c, fanouthandler.Options{Logger: log, Out: io.Discard}).Invoke(ctx, b)
			return err
		}
	}
	ingestPath := func(ev events.SQSEvent) func(target string) error {
		return func(target string) error {
			h := New(runner(target), Options{Partitions: recordjson.PartitionsString, FileMetadata: true, Logger: log, Out: io.Discard})
			resp, err := h.Handle(ctx, ev)
			if err == nil && len(resp.BatchItemFailures) > 0 {
				err = fmt.Errorf("batch item failures %v", failures(resp))
			}
			return err
		}
	}
	eb, _ := json.Marshal(map[string]any{
		"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created", "source": "aws.s3",
		"account": "000000000000", "time": notified.EventTime.Format(time.RFC3339), "region": localaws.Region, "resources": []string{"arn:aws:s3:::" + bucket},
		"detail": map[string]any{
			"version": "0", "bucket": map[string]any{"name": bucket}, "reason": "PutObject",
			"object": map[string]any{"key": encodeKey(key), "size": latest.Size, "etag": latest.ETag, "version-id": latest.VersionID, "sequencer": notified.Sequencer},
		},
	})
	ebNote := esm.Event([]sqstypes.Message{{MessageId: aws.String("eb-note"), Body: aws.String(string(eb))}}, notesARN)
	paths := []struct {
		name string
		run  func(target string) error
	}{
		{"fanout prefix", fanoutPath(map[string]any{"bucket": bucket, "prefix": "v/"})},
		{"fanout key", fanoutPath(map[string]any{"bucket": bucket, "key": key})},
		{"fanout Batch Operations", fanoutPath(events.S3BatchJobEventV2{InvocationSchemaVersion: "2.0", InvocationID: "inv", Job: events.S3BatchJobV2{ID: "job"},
			Tasks: []events.S3BatchJobTaskV2{{TaskID: "t", S3Bucket: bucket, S3Key: encodeKey(key), S3VersionID: latest.VersionID}}})},
		{"fanout Distributed Map", fanoutPath(map[string]any{"BatchInput": map[string]any{"bucket": bucket},
			"Items": []map[string]any{{"Key": key, "Size": latest.Size, "Etag": `"` + latest.ETag + `"`}}})},
		{"fanout notification by moto", fanoutPath(motoNote)},
		{"fanout notification as AWS writes it", fanoutPath(awsNote)},
		{"s3ingest notification by moto", ingestPath(motoNote)},
		{"s3ingest notification as AWS writes it", ingestPath(awsNote)},
		{"s3ingest EventBridge", ingestPath(ebNote)},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			target := localaws.CreateQueue(t, out, "", nil)
			if err := p.run(target); err != nil {
				t.Fatalf("run: %v", err)
			}
			got := map[string]string{}
			for _, m := range localaws.Drain(t, out, target, time.Second) {
				value := aws.ToString(m.Body)
				var rec struct{ Value *string }
				if json.Unmarshal([]byte(value), &rec) == nil && rec.Value != nil {
					value = *rec.Value // s3ingest's encoding
				}
				if value != "old" {
					got[value] = aws.ToString(m.MessageAttributes[engine.AttrRecordID].StringValue)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("record ids of the latest version by value (-want +got):\n%s", diff)
			}
		})
	}
}
