package partialbatch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodeSQSEvent(t *testing.T) {
	tests := []struct {
		file      string
		wantIDs   []string
		wantGroup string
	}{
		{file: "sqs-event.json", wantIDs: []string{"059f36b4-87a3-44ab-83d2-661975830a7d", "2e1424d4-f796-459a-8184-9c92662be6da"}},
		{file: "sqs-fifo-event.json", wantIDs: []string{"11d6ee51-4cc7-4302-9e22-7cd8afdaadf5"}, wantGroup: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			ev, err := partialbatch.Decode(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(ev.Records) != len(tt.wantIDs) {
				t.Fatalf("%d records, want %d", len(ev.Records), len(tt.wantIDs))
			}
			for i, r := range ev.Records {
				if r.MessageId != tt.wantIDs[i] || r.Body != "Test message." || r.EventSource != "aws:sqs" {
					t.Errorf("record %d: id %q, body %q, eventSource %q", i, r.MessageId, r.Body, r.EventSource)
				}
				if g := r.Attributes["MessageGroupId"]; g != tt.wantGroup {
					t.Errorf("record %d: MessageGroupId %q, want %q", i, g, tt.wantGroup)
				}
			}
		})
	}
}

// notSQS lists payloads that are not SQS events; file names a file in
// testdata, else payload is the payload.
var notSQS = []struct {
	name, file, payload  string
	wantKind, wantDetail string
}{
	{name: "null", payload: `null`, wantKind: "null"},
	{name: "null with spaces", payload: " \n null \n", wantKind: "null"},
	{name: "empty object", payload: `{}`, wantKind: "empty object"},
	{name: "array", payload: `[]`, wantKind: "JSON array"},
	{name: "string", payload: `"str"`, wantKind: "JSON string"},
	{name: "number", payload: `-4.2`, wantKind: "JSON number"},
	{name: "boolean", payload: `true`, wantKind: "JSON boolean"},
	{name: "empty payload", payload: " ", wantKind: "empty payload"},
	{name: "truncated", payload: `{"Records":[`, wantKind: "invalid JSON", wantDetail: "unexpected end of JSON input"},
	{name: "no records", payload: `{"Records":[]}`, wantKind: "no records", wantDetail: "Records is empty"},
	{name: "null records", payload: `{"Records":null}`, wantKind: "no records"},
	{name: "records not an array", payload: `{"Records":{"a":1}}`, wantKind: "unexpected object", wantDetail: "Records is not an array"},
	{name: "other object", payload: `{"foo":1,"bar":{}}`, wantKind: "unexpected object", wantDetail: `keys ["bar" "foo"]`},
	{name: "S3 event", file: "s3-event.json", wantKind: "S3 event", wantDetail: `Records[0].eventSource "aws:s3"`},
	{name: "SNS event", file: "sns-event.json", wantKind: "SNS event", wantDetail: `Records[0].eventSource "aws:sns"`},
	{name: "EventBridge event", file: "eventbridge-event.json", wantKind: "EventBridge event",
		wantDetail: `source "aws.s3", detail-type "Object Created"`},
	{name: "S3 test event", file: "s3-test-event.json", wantKind: "S3 test event", wantDetail: `Event "s3:TestEvent"`},
	{name: "SNS envelope", payload: `{"Type":"Notification","TopicArn":"arn:aws:sns:us-east-2:123456789012:t","Message":"hi"}`,
		wantKind: "SNS message", wantDetail: `Type "Notification"`},
	{name: "an S3 record after an SQS record", payload: `{"Records":[{"eventSource":"aws:sqs","messageId":"a"},{"eventSource":"aws:s3"}]}`,
		wantKind: "S3 event", wantDetail: `Records[1].eventSource "aws:s3"`},
	{name: "DynamoDB stream", payload: `{"Records":[{"eventID":"1","eventSource":"aws:dynamodb","dynamodb":{}}]}`,
		wantKind: "DynamoDB stream event", wantDetail: `"aws:dynamodb"`},
	{name: "Kafka event", payload: `{"eventSource":"aws:kafka","records":{"t-0":[]}}`,
		wantKind: "Kafka event", wantDetail: `eventSource "aws:kafka"`},
	{name: "other source", payload: `{"Records":[{"eventSource":"aws:codecommit"}]}`,
		wantKind: "event from another source", wantDetail: `"aws:codecommit"`},
	{name: "record without eventSource", payload: `{"Records":[{"messageId":"a","body":"x"}]}`,
		wantKind: "record without eventSource", wantDetail: `Records[0].eventSource ""`},
	{name: "record not an object", payload: `{"Records":[1]}`, wantKind: "malformed record", wantDetail: "Records[0]"},
	{name: "SQS record of the wrong shape", payload: `{"Records":[{"eventSource":"aws:sqs","body":5}]}`,
		wantKind: "malformed SQS event", wantDetail: "body"},
}

func TestDecodeNotSQS(t *testing.T) {
	for _, tt := range notSQS {
		t.Run(tt.name, func(t *testing.T) {
			payload := []byte(tt.payload)
			if tt.file != "" {
				payload = readTestdata(t, tt.file)
			}
			ev, err := partialbatch.Decode(payload)
			var ue *partialbatch.UnexpectedEventError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v (%T), want an *UnexpectedEventError", err, err)
			}
			if ev.Records != nil {
				t.Errorf("records %v with the error", ev.Records)
			}
			if ue.Kind != tt.wantKind {
				t.Errorf("Kind %q, want %q", ue.Kind, tt.wantKind)
			}
			if !strings.Contains(ue.Detail, tt.wantDetail) {
				t.Errorf("Detail %q does not contain %q", ue.Detail, tt.wantDetail)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "partialbatch: the payload is not an SQS event, got: "+tt.wantKind) || !strings.Contains(msg, ue.Detail) {
				t.Errorf("message %q does not name %q and its detail", msg, tt.wantKind)
			}
		})
	}
}

func TestDecodeErrorMessage(t *testing.T) {
	_, err := partialbatch.Decode(readTestdata(t, "s3-event.json"))
	want := `partialbatch: the payload is not an SQS event, got: S3 event (Records[0].eventSource "aws:s3"); check the function's trigger`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// TestTestdataCovered checks that every file in testdata has a case.
func TestTestdataCovered(t *testing.T) {
	covered := map[string]bool{"sqs-event.json": true, "sqs-fifo-event.json": true}
	for _, tt := range notSQS {
		covered[tt.file] = true
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no case", f)
		}
	}
}
