package awssetup

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestNewRunner builds runners against the stand-ins: a missing failure
// bucket and a missing claims table are refused, each named as the caller
// names its setting; a missing queue is the engine's QueueError; with a
// table and RunState the runner gets the claims store it returns.
func TestNewRunner(t *testing.T) {
	s3c := localaws.FakeS3(t)
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("out")}); err != nil {
		t.Fatal(err)
	}
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	ddb, table := localaws.ClaimsTable(t)
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	ok := engine.Options{Target: sqsbatch.Queue{URL: target}, FailureS3URI: "s3://out/failed"}
	for _, tc := range []struct {
		name string
		rc   RunnerConfig
		want string
	}{
		{"missing bucket", RunnerConfig{Options: engine.Options{Target: ok.Target, FailureS3URI: "s3://no-such-bucket/f"}, Name: Variable}, "FAILURE_S3_URI: "},
		{"missing table", RunnerConfig{Options: ok, ClaimsTable: table + "-gone", DynamoDB: ddb, Name: Flag}, "-claims-table: "},
	} {
		if _, _, err := NewRunner(t.Context(), s3c, sqsc, tc.rc); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error starting %q", tc.name, err, tc.want)
		}
	}
	var qe *engine.QueueError
	if _, _, err := NewRunner(t.Context(), s3c, sqsc, RunnerConfig{Options: engine.Options{Target: sqsbatch.Queue{URL: target + "-gone"}}, Name: Flag}); !errors.As(err, &qe) || qe.Role != engine.RoleTarget {
		t.Errorf("missing queue: %v; want the target's *engine.QueueError", err)
	}
	r, store, err := NewRunner(t.Context(), s3c, sqsc, RunnerConfig{Options: ok, ClaimsTable: table, RunState: true, DynamoDB: ddb, Name: Variable})
	if err != nil || r == nil || store == nil {
		t.Fatalf("NewRunner with a table: %v, %v, %v", r, store, err)
	}
	if err := store.MarkDone(t.Context(), "k"); err != nil {
		t.Errorf("the store returned does not write the table: %v", err)
	}

	// Notification mode names the S3 client's region, read by
	// aws-lambda-go's own event type.
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("out"), Key: aws.String("a.jsonl"), Body: strings.NewReader("{}\n")}); err != nil {
		t.Fatal(err)
	}
	notify := engine.Options{Target: ok.Target, Mode: worktask.ModeNotification}
	if r, _, err = NewRunner(t.Context(), s3c, sqsc, RunnerConfig{Options: notify, Name: Variable}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: "out", Key: "a.jsonl"}}); err != nil {
		t.Fatal(err)
	}
	msgs := localaws.Drain(t, sqsc, target, time.Second)
	var ev events.S3Event
	if len(msgs) != 1 || json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &ev) != nil || len(ev.Records) != 1 || ev.Records[0].AWSRegion != s3c.Options().Region {
		t.Errorf("notification mode: %d messages, %+v; want one naming region %q", len(msgs), ev, s3c.Options().Region)
	}
}
