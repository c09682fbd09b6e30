package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// TestReplayVersions replays every version of a versioned prefix on moto
// to a FIFO queue with -mode notification -versions: each key's versions,
// a deleted key's too, arrive oldest first, once each. Its output is the
// one docs/replay-and-reconcile.md shows (go test -v).
func TestReplayVersions(t *testing.T) {
	s3c := motoS3(t)
	ctx := t.Context()
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	bucket := localaws.VersionedBucket(t, s3c, "history")
	want := map[string][]string{}
	for i, key := range []string{"h/orders.json", "h/prices.json", "h/orders.json", "h/old.json", "h/orders.json", "h/prices.json"} {
		out, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf(`{"v":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		want[key] = append(want[key], aws.ToString(out.VersionId))
	}
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("h/old.json")}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-history.fifo", nil)

	args := []string{"fanout", "-mode", "notification", "-versions", "-bucket", bucket, "-prefix", "h/",
		"-target-queue-url", target, "-s3-path-style", "-run-id", "history-1"}
	code, out, errOut := runCLI(t, "", args...)
	t.Logf("$ s3sqs %s\n%s%s", strings.Join(args, " "), out, errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, "6 objects announced (not read), 6 sent, 0 failed") {
		t.Errorf("stderr does not say the objects were announced, not read:\n%s", errOut)
	}
	if rep.Objects != 6 || rep.RecordsSent != 6 || rep.Chunks != 3 || rep.RecordsFailed != 0 {
		t.Errorf("report %+v; want 6 versions of 3 keys, a task per key, 6 sent", rep)
	}
	got := map[string][]string{}
	for _, m := range localaws.Drain(t, sqsc, target, 2*time.Second) {
		body := aws.ToString(m.Body)
		n, err := s3event.Parse([]byte(body))
		if err != nil || len(n.Objects) != 1 || !strings.Contains(body, `"configurationId":"s3sqs-replay:history-1"`) {
			t.Fatalf("Parse = %+v, %v\n%s", n, err, body)
		}
		got[n.Objects[0].Key] = append(got[n.Objects[0].Key], n.Objects[0].VersionID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions announced by key, in the order received (-want +got):\n%s", diff)
	}

	code, _, errOut = runCLI(t, "", "fanout", "-versions", "-bucket", bucket, "-prefix", "h/", "-target-queue-url", target, "-s3-path-style")
	if code != 2 || !strings.Contains(errOut, "-versions replays every version of each key as notifications: give -mode notification") {
		t.Errorf("-versions in record mode: exit %d\n%s", code, errOut)
	}
}
