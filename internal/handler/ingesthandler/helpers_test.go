package ingesthandler

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/runtime/summary"
	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// testBucket is the bucket of the handler tests, in their own in-process
// S3.
const testBucket = "ingest-bucket"

// fixture is an in-process S3 (gofakes3) with a bucket, the SQS stand-in
// (fauxqs) with an output queue and a failure queue, and buffers for what
// a Handler logs and reports.
type fixture struct {
	t       *testing.T
	s3      *s3.Client
	sqs     *sqs.Client
	out     string // output queue URL
	failure string // failure queue URL
	logs    *lockedBuffer
	summary *lockedBuffer
}

func newFixture(t *testing.T, outSuffix string, outAttrs map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, s3: localaws.FakeS3(t), sqs: sqs.NewFromConfig(localaws.SQS(t)), logs: &lockedBuffer{}, summary: &lockedBuffer{}}
	if _, err := f.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	f.out = localaws.CreateQueue(t, f.sqs, outSuffix, outAttrs)
	f.failure = localaws.CreateQueue(t, f.sqs, "-failure", nil)
	return f
}

// options are what a test's Handler is built with, as the function's
// configuration splits them: the runner's (target, failure output, work
// queue, plan, send) and the handler's.
type options struct {
	runner engine.Options
	ingest Options
}

// defaults returns the options that s3ingest's configuration gives by
// default: the output queue as target, the fixture's failure queue,
// partition values as strings and _file.
func (f *fixture) defaults() options {
	return options{
		runner: engine.Options{Target: sqsbatch.Queue{URL: f.out}, FailureQueueURL: f.failure},
		ingest: Options{Partitions: recordjson.PartitionsString, FileMetadata: true},
	}
}

// handler returns a Handler built with o whose runner sends through client
// (the SQS stand-in when nil) and reads through s3c (the fixture's S3 when
// nil), without backoff waits. Both log to f.logs; the summary goes to
// f.summary.
func (f *fixture) handler(o options, client sqsbatch.API, s3c engine.S3API) *Handler {
	f.t.Helper()
	if client == nil {
		client = f.sqs
	}
	if s3c == nil {
		s3c = f.s3
	}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.runner.Send.Backoff = func(int) time.Duration { return time.Millisecond }
	o.runner.Logger = log
	runner, _, err := awssetup.NewRunner(f.t.Context(), fanoutstack.Wrapped{S3API: s3c, Client: f.s3}, client, awssetup.RunnerConfig{Options: o.runner, Name: awssetup.Variable})
	if err != nil {
		f.t.Fatalf("NewRunner: %v", err)
	}
	o.ingest.Logger, o.ingest.Out = log, f.summary
	return New(runner, o.ingest)
}

// failed drains the failure queue and returns the failures on it, by
// object key and offset.
func (f *fixture) failed(quiet time.Duration) map[failureAt]engine.Failure {
	f.t.Helper()
	got := map[failureAt]engine.Failure{}
	for _, m := range localaws.Drain(f.t, f.sqs, f.failure, quiet) {
		var fl engine.Failure
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &fl); err != nil {
			f.t.Fatalf("failure %s: %v", aws.ToString(m.Body), err)
		}
		at := failureAt{key: strings.TrimPrefix(fl.Source, "s3://"+testBucket+"/"), offset: fl.Offset}
		if _, dup := got[at]; dup {
			f.t.Errorf("failure of %s at %d is on the failure output twice", at.key, at.offset)
		}
		got[at] = fl
	}
	return got
}

// failureAt is where a failed record was: its key and offset.
type failureAt struct {
	key    string
	offset int64
}

// object is an uploaded object: what a notification says of it, and its
// content.
type object struct {
	s3event.Object
	content string
}

// put uploads content under key and returns the object as a notification
// would name it.
func (f *fixture) put(key, content string) object {
	f.t.Helper()
	out, err := f.s3.PutObject(f.t.Context(), &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), Body: strings.NewReader(content)})
	if err != nil {
		f.t.Fatalf("put %q: %v", key, err)
	}
	return object{
		Object: s3event.Object{
			Bucket: testBucket, Key: key, Size: int64(len(content)), ETag: strings.Trim(aws.ToString(out.ETag), `"`),
			VersionID: aws.ToString(out.VersionId), EventName: "ObjectCreated:Put",
			EventTime: time.Now().UTC().Truncate(time.Millisecond), Sequencer: fmt.Sprintf("%016X", time.Now().UnixNano()),
		},
		content: content,
	}
}

// s3Body is an S3 event notification naming objs, as S3 writes it to SQS
// (or SNS with raw delivery): keys form-URL-encoded.
func s3Body(objs ...object) string {
	type obj struct {
		Key       string `json:"key"`
		Size      int64  `json:"size,omitempty"`
		ETag      string `json:"eTag,omitempty"`
		VersionID string `json:"versionId,omitempty"`
		Sequencer string `json:"sequencer"`
	}
	var recs []any
	for _, o := range objs {
		recs = append(recs, map[string]any{
			"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": localaws.Region,
			"eventTime": o.EventTime.Format("2006-01-02T15:04:05.000Z"), "eventName": o.EventName,
			"s3": map[string]any{
				"s3SchemaVersion": "1.0", "configurationId": "ingest",
				"bucket": map[string]any{"name": o.Bucket, "arn": "arn:aws:s3:::" + o.Bucket},
				"object": obj{Key: encodeKey(o.Key), Size: o.Size, ETag: o.ETag, VersionID: o.VersionID, Sequencer: o.Sequencer},
			},
		})
	}
	b, _ := json.Marshal(map[string]any{"Records": recs})
	return string(b)
}

// encodeKey writes a key as S3 notifications do: form-URL-encoded, with
// "/" kept.
func encodeKey(k string) string { return strings.ReplaceAll(url.QueryEscape(k), "%2F", "/") }

// snsBody wraps an S3 event in the standard SNS envelope.
func snsBody(s3Event string) string {
	b, _ := json.Marshal(map[string]string{
		"Type": "Notification", "MessageId": "63a3f6b6-d533-4a47-aef9-fcf5cf758c76",
		"TopicArn": "arn:aws:sns:us-east-1:000000000000:ingest", "Subject": "Amazon S3 Notification",
		"Message": s3Event, "Timestamp": time.Now().UTC().Format(time.RFC3339), "SignatureVersion": "1",
	})
	return string(b)
}

// eventBridgeBody is an EventBridge "Object Created" event for o.
func eventBridgeBody(o object) string {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created",
		"source": "aws.s3", "account": "000000000000", "time": o.EventTime.Format(time.RFC3339), "region": localaws.Region,
		"resources": []string{"arn:aws:s3:::" + o.Bucket},
		"detail": map[string]any{
			"version": "0", "bucket": map[string]any{"name": o.Bucket},
			"object": map[string]any{"key": encodeKey(o.Key), "size": o.Size, "etag": o.ETag, "sequencer": o.Sequencer},
			"reason": "PutObject",
		},
	})
	return string(b)
}

const testEventBody = `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2024-01-01T00:00:00.000Z","Bucket":"ingest-bucket","RequestId":"5582815E1AEA5ADF","HostId":"8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE"}`

// msg is an SQS message of a Lambda event.
type msg struct {
	id, body, group string
}

// sqsEvent builds the Lambda event of msgs; a message with a group comes
// from a FIFO queue.
func sqsEvent(msgs ...msg) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		r := events.SQSMessage{
			MessageId: m.id, ReceiptHandle: "rh-" + m.id, Body: m.body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:ingest", AWSRegion: localaws.Region,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		}
		if m.group != "" {
			r.EventSourceARN += ".fifo"
			r.Attributes["MessageGroupId"] = m.group
		}
		ev.Records = append(ev.Records, r)
	}
	return ev
}

// failures returns the itemIdentifiers of a response.
func failures(r events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// wantRecords returns the bodies that the records of objs must have on the
// output queue, decoded, by record id: JSON Lines and CSV objects (header
// first, no quoted newlines), with partitions as strings and _file.
func wantRecords(t *testing.T, objs ...object) map[string]map[string]any {
	t.Helper()
	want := map[string]map[string]any{}
	for _, o := range objs {
		format, _ := dataset.Detect(o.Key)
		var header []string
		off := int64(0)
		for i, line := range strings.SplitAfter(o.content, "\n") {
			start := off
			off += int64(len(line))
			line = strings.TrimRight(line, "\r\n")
			if strings.TrimSpace(line) == "" {
				continue
			}
			rec := map[string]any{}
			switch format {
			case dataset.FormatCSV:
				fields := strings.Split(line, ",")
				if header == nil {
					header = fields
					continue
				}
				for j, h := range header {
					rec[h] = fields[j]
				}
			case dataset.FormatText:
				rec["line"] = line
			default:
				// A line that is not JSON has no record; one that is not
				// an object is wrapped.
				var v any
				if json.Unmarshal([]byte(line), &v) != nil {
					continue
				}
				if m, ok := v.(map[string]any); ok {
					rec = m
				} else {
					rec["value"] = v
				}
			}
			for _, p := range o.Partitions() {
				if _, ok := rec[p.Name]; ok {
					continue
				}
				if p.Null {
					rec[p.Name] = nil
				} else {
					rec[p.Name] = p.Value
				}
			}
			var version any
			if o.VersionID != "" {
				version = o.VersionID
			}
			rec["_file"] = map[string]any{
				"bucket": o.Bucket, "key": o.Key, "versionId": version, "eTag": o.ETag,
				"eventTime": o.EventTime.Format(time.RFC3339Nano), "offset": float64(start), "line": float64(i + 1),
			}
			pin := dataset.Object{Bucket: o.Bucket, Key: o.Key, ETag: o.ETag, VersionID: o.VersionID}
			want[engine.RecordID(pin, start)] = rec
		}
	}
	return want
}

// checkOutput drains the output queue and compares the records on it, by
// their record id attribute, with want. A record must arrive once.
func checkOutput(t *testing.T, c *sqs.Client, queueURL string, want map[string]map[string]any) []types.Message {
	t.Helper()
	quiet := 1500 * time.Millisecond
	if len(want) == 0 {
		quiet = 2500 * time.Millisecond
	}
	msgs := localaws.Drain(t, c, queueURL, quiet)
	got := map[string]map[string]any{}
	for _, m := range msgs {
		a, ok := m.MessageAttributes[engine.AttrRecordID]
		if !ok {
			t.Errorf("message without %s: %s", engine.AttrRecordID, aws.ToString(m.Body))
			continue
		}
		id := aws.ToString(a.StringValue)
		var body map[string]any
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &body); err != nil {
			t.Errorf("body is not a JSON object: %v: %s", err, aws.ToString(m.Body))
			continue
		}
		if _, dup := got[id]; dup {
			t.Errorf("record %s arrived twice", id)
		}
		got[id] = body
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records on the output queue (-want +got):\n%s", diff)
	}
	return msgs
}

// summaryOf returns the summary of the "s3ingest invocation" line, checks
// that an EMF line that agrees with it follows, and empties out.
func summaryOf(t *testing.T, out *lockedBuffer) Summary {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 {
		t.Fatalf("want a summary line and an EMF line, got %d lines:\n%s", len(lines), out.String())
	}
	var line struct {
		Message  string  `json:"message"`
		Function string  `json:"function"`
		Summary  Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil || line.Message != "s3ingest invocation" || line.Function != "s3ingest" {
		t.Fatalf("summary line %q: %v", lines[0], err)
	}
	var doc struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string     `json:"Namespace"`
				Dimensions [][]string `json:"Dimensions"`
			} `json:"CloudWatchMetrics"`
		} `json:"_aws"`
		Function  string  `json:"Function"`
		Messages  float64 `json:"Messages"`
		Duration  float64 `json:"Duration"`
		NotFound  float64 `json:"SkippedNotFound"`
		TooOld    float64 `json:"SkippedTooOld"`
		RecSent   float64 `json:"RecordsSent"`
		RecFailed float64 `json:"RecordsFailed"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &doc); err != nil || len(doc.AWS.CloudWatchMetrics) != 1 ||
		doc.AWS.CloudWatchMetrics[0].Namespace != summary.Namespace || doc.Function != "s3ingest" ||
		int(doc.Messages) != line.Summary.Messages || int(doc.NotFound) != line.Summary.Skipped[engine.SkipNotFound] ||
		int(doc.TooOld) != line.Summary.Skipped[s3event.SkipTooOld.String()] ||
		int64(doc.RecSent) != line.Summary.RecordsSent || int64(doc.RecFailed) != line.Summary.RecordsFailed {
		t.Errorf("EMF line does not match the summary (%v):\n%s\n%s", err, lines[0], lines[1])
	}
	out.Reset()
	return line.Summary
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// deletionID is the record id of a deletion event, as the engine's
// TestDeletionID pins it.
func deletionID(obj s3event.Object) string {
	sum := sha256.Sum256([]byte(obj.Bucket + "\x00" + obj.Key + "\x00" + obj.VersionID + "\x00" + obj.ETag + "\x00deleted\x00" + obj.Sequencer))
	return hex.EncodeToString(sum[:16])
}
