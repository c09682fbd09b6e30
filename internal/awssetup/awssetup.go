// Package awssetup is the AWS side of start-up that the two Lambda
// functions (through internal/runtime/lambdaenv) and the CLI share: the S3,
// SQS and DynamoDB clients built from the SDK's standard configuration, the
// S3 event types a notification filter takes, and the words for a queue
// that cannot be used. It is not the Lambda runtime, so that the CLI links
// none of it.
package awssetup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// Clients returns S3 and SQS clients from the SDK's standard configuration
// (credentials, region, AWS_ENDPOINT_URL_...); s3PathStyle turns on
// path-style S3 requests, which stand-ins such as moto need.
func Clients(ctx context.Context, s3PathStyle bool) (*s3.Client, *sqs.Client, error) {
	cfg, err := load(ctx)
	if err != nil {
		return nil, nil, err
	}
	s3c, sqsc := FromConfig(cfg, s3PathStyle)
	return s3c, sqsc, nil
}

// ErrNoRegion and ErrNoCredentials are load's errors when the SDK's
// standard configuration gives no region or no credentials: said once, in
// words that name what to set, instead of in each request's error chain.
var (
	ErrNoRegion      = errors.New("no AWS region: set AWS_REGION (or AWS_PROFILE naming a profile with a region)")
	ErrNoCredentials = errors.New("no AWS credentials: set AWS_PROFILE (after `aws sso login` or `aws configure`), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
)

// load reads the SDK's standard configuration, and its credentials once.
func load(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	switch {
	case err != nil:
		return cfg, fmt.Errorf("AWS config: %w", err)
	case cfg.Region == "":
		return cfg, ErrNoRegion
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return cfg, fmt.Errorf("%w (the SDK's standard chain said: %v)", ErrNoCredentials, err)
	}
	return cfg, nil
}

// FromConfig returns the S3 and SQS clients of cfg, as Clients does.
func FromConfig(cfg aws.Config, s3PathStyle bool) (*s3.Client, *sqs.Client) {
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = s3PathStyle
		// Ranged GETs come back without a whole-object checksum, and
		// objects uploaded without one are normal: the SDK would log
		// that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return s3c, sqs.NewFromConfig(cfg)
}

// DynamoDB returns a DynamoDB client from the SDK's standard
// configuration, as Clients does; AWS_ENDPOINT_URL_DYNAMODB (or
// AWS_ENDPOINT_URL) points it at a stand-in.
func DynamoDB(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := load(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// ParseEventTypes reads a comma-separated list of S3 event types, as
// EVENT_TYPES and the CLI's -event-types write it, and returns the names
// s3event.CheckEventType accepts and an error for each other one.
func ParseEventTypes(list string) ([]string, []error) {
	var (
		types []string
		errs  []error
	)
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if err := s3event.CheckEventType(t); err != nil {
			errs = append(errs, errors.New(strings.TrimPrefix(err.Error(), "s3event: ")))
			continue
		}
		types = append(types, t)
	}
	return types, errs
}

// QueueError says, in words a user acts on, why the queue a variable names
// cannot be used at a function's init: the variable, the queue, and AWS's
// error code and message, with a hint for the common codes.
func QueueError(variable, queue string, err error) error {
	return queueError(variable, queue, err, "the function's role", "")
}

// FlagQueueError is QueueError for a command: flag names the queue, the
// caller's credentials need the permissions, and skip, when not empty, is
// the flag that spares the GetQueueAttributes call a denial may be about.
func FlagQueueError(flag, queue string, err error, skip string) error {
	return queueError(flag, queue, err, "the credentials in use", skip)
}

// queueError is QueueError with who needs the permissions and the setting
// that skips GetQueueAttributes, if any.
func queueError(setting, queue string, err error, who, skip string) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		// No answer from SQS: the endpoint, network or credentials.
		var op *smithy.OperationError
		if errors.As(err, &op) {
			err = op.Err
		}
		return fmt.Errorf("%s: queue %s cannot be reached: %w", setting, queue, err)
	}
	hint := ""
	switch code := awserr.Code(err); {
	case awserr.Missing(err) == awserr.Queue:
		hint = " (no such queue in this account and region; check the URL or name)"
	case code == "AccessDenied", code == "AccessDeniedException", code == "KMS.AccessDeniedException":
		hint = " (" + who + " needs sqs:GetQueueAttributes and sqs:SendMessage on it, and kms:GenerateDataKey for a KMS-encrypted queue"
		if skip != "" {
			hint += "; " + skip + " spares GetQueueAttributes"
		}
		hint += ")"
	}
	return fmt.Errorf("%s: queue %s cannot be used: %s: %s%s", setting, queue, api.ErrorCode(), api.ErrorMessage(), hint)
}
