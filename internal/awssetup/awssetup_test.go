package awssetup

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
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

// TestDynamoDB: the client follows the SDK's standard configuration, here
// AWS_ENDPOINT_URL_DYNAMODB, over an AWS_ENDPOINT_URL that answers
// nothing.
func TestDynamoDB(t *testing.T) {
	moto := localaws.Endpoint(t, localaws.EnvMoto)
	_, table := localaws.ClaimsTable(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", moto)
	t.Setenv("AWS_REGION", localaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	c, err := DynamoDB(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || aws.ToString(out.Table.TableName) != table {
		t.Fatalf("describe %s through the client: %v", table, err)
	}
}

// TestClientsSayWhatIsMissing: without a region, or without credentials,
// the CLI's clients are refused once, in words that name what to set,
// rather than failing each request with the SDK's chain.
func TestClientsSayWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, _, err := Clients(t.Context(), false); !errors.Is(err, ErrNoRegion) || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("no region: %v; want ErrNoRegion", err)
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	if _, err := DynamoDB(t.Context()); !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "AWS_PROFILE") {
		t.Errorf("no credentials: %v; want ErrNoCredentials", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, _, err := Clients(t.Context(), false); err != nil {
		t.Errorf("with both: %v", err)
	}
}
