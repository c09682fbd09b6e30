package s3event_test

import (
	"fmt"
	"time"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// An SQS message body from an SNS subscription without raw delivery: the S3
// event is a JSON string inside the SNS envelope, and its key is
// form-URL-encoded.
func ExampleParse() {
	body := []byte(`{
  "Type": "Notification",
  "MessageId": "63a3f6b6-d533-4a47-aef9-fcf5cf758c76",
  "TopicArn": "arn:aws:sns:us-east-1:123456789012:uploads",
  "Subject": "Amazon S3 Notification",
  "Message": "{\"Records\":[{\"eventVersion\":\"2.1\",\"eventSource\":\"aws:s3\",\"awsRegion\":\"us-east-1\",\"eventTime\":\"2024-01-01T12:00:00.000Z\",\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"lake\"},\"object\":{\"key\":\"events/date%3D2024-01-01/kind%3Dc%2B%2B/part+0.csv\",\"size\":42,\"eTag\":\"abc\",\"sequencer\":\"0055AED6DCD90281E5\"}}}]}",
  "Timestamp": "2024-01-01T12:00:01.000Z"
}`)
	n, err := s3event.Parse(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range n.Objects {
		fmt.Println(o.Route, o.EventName, o.Bucket, o.Key, o.Size)
		for _, p := range o.Partitions() {
			fmt.Printf("  %s = %v (%T)\n", p.Name, p.Value, p.Typed())
		}
	}
	// Output:
	// sns ObjectCreated:Put lake events/date=2024-01-01/kind=c++/part 0.csv 42
	//   date = 2024-01-01 (time.Time)
	//   kind = c++ (string)
}

// A Lambda handler for an SQS event source parses the whole batch, processes
// the accepted objects and reports the messages that failed to parse as
// batch item failures.
func ExampleFilter_Apply() {
	put := `{"Records":[{"eventSource":"aws:s3","eventTime":"2024-01-01T12:00:00.000Z","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"lake"},"object":{"key":"in/a+b.csv","size":1,"eTag":"x"}}}]}`
	msgs := []s3event.Message{
		{ID: "msg-1", Body: put},
		{ID: "msg-2", Body: put}, // delivered twice
		{ID: "msg-3", Body: `{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"lake"}`},
		{ID: "msg-4", Body: `not json`},
	}
	f := s3event.Filter{
		Suffix: ".csv",
		Now:    func() time.Time { return time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC) },
	}
	res := f.Apply(msgs)
	for _, it := range res.Accepted {
		fmt.Println("process", it.MessageID, it.Object.Key)
	}
	for _, s := range res.Skipped {
		fmt.Println("skip", s.MessageID, s.Reason)
	}
	fmt.Println("test events", res.TestEvents)
	fmt.Println("batch item failures", res.FailedMessageIDs())
	// Output:
	// process msg-1 in/a b.csv
	// skip msg-2 duplicate
	// test events [msg-3]
	// batch item failures [msg-4]
}

func ExampleCompareSequencers() {
	fmt.Println(s3event.CompareSequencers("0055AED6DCD90281E5", "0055AED6DCD90281E6"))
	fmt.Println(s3event.CompareSequencers("617f08299329d189", "617F08299329D18900"))
	// Output:
	// -1
	// 0
}
