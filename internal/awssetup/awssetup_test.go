package awssetup

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

func TestParseEventTypes(t *testing.T) {
	types, errs := ParseEventTypes(" ObjectCreated:Put, s3:ObjectRemoved:* ,,ObjectCreate:*")
	if strings.Join(types, "|") != "ObjectCreated:Put|s3:ObjectRemoved:*" {
		t.Errorf("types %q; want the two known ones, trimmed", types)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"ObjectCreate:*" is not an S3 event type`) || strings.HasPrefix(errs[0].Error(), "s3event:") {
		t.Errorf("errors %v; want one for ObjectCreate:*, without the package's prefix", errs)
	}
}

func TestQueueError(t *testing.T) {
	const q = "https://sqs.us-east-1.amazonaws.com/1/q"
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"missing", QueueError("TARGET_QUEUE_URL", q, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "gone"}),
			"TARGET_QUEUE_URL: queue " + q + " cannot be used: AWS.SimpleQueueService.NonExistentQueue: gone (no such queue"},
		{"denied", QueueError("WORK_QUEUE_URL", q, &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}),
			"(the function's role needs sqs:GetQueueAttributes"},
		{"denied with a way round", FlagQueueError("-target-queue-url", q, &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}, "-target-max-message-size"),
			"(the credentials in use needs sqs:GetQueueAttributes and sqs:SendMessage on it, and kms:GenerateDataKey for a KMS-encrypted queue; -target-max-message-size spares GetQueueAttributes)"},
		{"no answer", FlagQueueError("-dlq", q, &smithy.OperationError{ServiceID: "SQS", OperationName: "GetQueueAttributes", Err: errors.New("dial tcp: refused")}, ""),
			"-dlq: queue " + q + " cannot be reached: dial tcp: refused"},
	} {
		if !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, tc.err, tc.want)
		}
	}
}
