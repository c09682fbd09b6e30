package awserr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// answer is an error as the SDK returns it for an answer with status:
// api inside the HTTP response error, inside the operation error, wrapped
// once more by a caller.
func answer(status int, api error) error {
	return fmt.Errorf("get s3://b/k: %w", &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: api},
			RequestID:     "req-1",
		}})
}

// generic is an answer with status and code that no modeled error has.
func generic(status int, code string) error {
	return answer(status, &smithy.GenericAPIError{Code: code, Message: "injected by the test"})
}

// transport is an error of a call that got no answer.
func transport(err error) error {
	return fmt.Errorf("send: %w", &smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessageBatch",
		Err: &smithyhttp.RequestSendError{Err: err}})
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		want    awserr.Class
		code    string
		status  int
		missing awserr.Resource
	}{
		{name: "nil", err: nil, want: awserr.Unknown},
		{name: "not an AWS error", err: io.ErrUnexpectedEOF, want: awserr.Unknown},

		{name: "S3 throttling", err: generic(503, "SlowDown"), want: awserr.Retryable, code: "SlowDown", status: 503},
		{name: "throttling code at 400", err: generic(400, "ThrottlingException"), want: awserr.Retryable, code: "ThrottlingException", status: 400},
		{name: "SQS RequestThrottled", err: answer(403, &sqstypes.RequestThrottled{Message: aws.String("x")}), want: awserr.Retryable, code: "RequestThrottled", status: 403},
		{name: "SQS KMS throttling", err: answer(400, &sqstypes.KmsThrottled{}), want: awserr.Retryable, code: "KmsThrottled", status: 400},
		{name: "SQS KMS throttling, query code", err: answer(400, &sqstypes.KmsThrottled{ErrorCodeOverride: aws.String("KMS.ThrottlingException")}),
			want: awserr.Retryable, code: "KMS.ThrottlingException", status: 400},
		{name: "S3 request timeout at 400", err: generic(400, "RequestTimeout"), want: awserr.Retryable, code: "RequestTimeout", status: 400},
		{name: "500", err: generic(500, "InternalError"), want: awserr.Retryable, code: "InternalError", status: 500},
		{name: "502 without a code", err: answer(502, &smithy.GenericAPIError{}), want: awserr.Retryable, status: 502},
		{name: "504", err: generic(504, "GatewayTimeout"), want: awserr.Retryable, code: "GatewayTimeout", status: 504},
		{name: "429 without a modeled error", err: generic(429, "TooManyRequests"), want: awserr.Retryable, code: "TooManyRequests", status: 429},
		{name: "after the SDK's attempts", err: &retry.MaxAttemptsError{Attempt: 3, Err: generic(503, "SlowDown")}, want: awserr.Retryable, code: "SlowDown", status: 503},
		{name: "connection reset", err: transport(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), want: awserr.Retryable},
		{name: "connection refused", err: transport(&url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), want: awserr.Retryable},
		{name: "client timeout", err: transport(&url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}), want: awserr.Retryable},
		{name: "a deadline, bare", err: fmt.Errorf("read: %w", context.DeadlineExceeded), want: awserr.Retryable},

		{name: "missing key", err: answer(404, &s3types.NoSuchKey{}), want: awserr.NotFound, code: "NoSuchKey", status: 404, missing: awserr.Key},
		{name: "missing key, HEAD", err: answer(404, &s3types.NotFound{}), want: awserr.NotFound, code: "NotFound", status: 404, missing: awserr.Key},
		{name: "missing version", err: generic(404, "NoSuchVersion"), want: awserr.NotFound, code: "NoSuchVersion", status: 404, missing: awserr.Version},
		{name: "missing bucket", err: answer(404, &s3types.NoSuchBucket{}), want: awserr.NotFound, code: "NoSuchBucket", status: 404, missing: awserr.Bucket},
		{name: "missing queue", err: answer(400, &sqstypes.QueueDoesNotExist{}), want: awserr.NotFound, code: "QueueDoesNotExist", status: 400, missing: awserr.Queue},
		{name: "missing queue, query code", err: answer(400, &sqstypes.QueueDoesNotExist{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")}),
			want: awserr.NotFound, code: "AWS.SimpleQueueService.NonExistentQueue", status: 400, missing: awserr.Queue},
		{name: "404 with another code", err: generic(404, "NoSuchUpload"), want: awserr.NotFound, code: "NoSuchUpload", status: 404},
		{name: "missing queue, no answer", err: &smithy.GenericAPIError{Code: "QueueDoesNotExist"}, want: awserr.NotFound, code: "QueueDoesNotExist", missing: awserr.Queue},

		{name: "pin failed", err: generic(412, "PreconditionFailed"), want: awserr.Changed, code: "PreconditionFailed", status: 412},
		{name: "412 without a code", err: answer(412, &smithy.GenericAPIError{}), want: awserr.Changed, status: 412},

		{name: "access denied", err: generic(403, "AccessDenied"), want: awserr.Permanent, code: "AccessDenied", status: 403},
		{name: "access denied, no answer", err: &smithy.GenericAPIError{Code: "AccessDenied"}, want: awserr.Permanent, code: "AccessDenied"},
		{name: "bad argument", err: generic(400, "InvalidArgument"), want: awserr.Permanent, code: "InvalidArgument", status: 400},
		{name: "SQS invalid parameter", err: generic(400, "InvalidParameterValue"), want: awserr.Permanent, code: "InvalidParameterValue", status: 400},
		{name: "KMS key disabled", err: answer(400, &sqstypes.KmsDisabled{ErrorCodeOverride: aws.String("KMS.DisabledException")}),
			want: awserr.Permanent, code: "KMS.DisabledException", status: 400},
		{name: "KMS key missing", err: answer(400, &sqstypes.KmsNotFound{}), want: awserr.Permanent, code: "KmsNotFound", status: 400},
		{name: "some other 4xx", err: generic(409, "Whatever"), want: awserr.Permanent, code: "Whatever", status: 409},
		{name: "416", err: generic(416, "InvalidRange"), want: awserr.Permanent, code: "InvalidRange", status: 416},

		{name: "408 without a retried code", err: generic(408, "Whatever"), want: awserr.Unknown, code: "Whatever", status: 408},
		{name: "429 with a modeled error", err: answer(429, &sqstypes.OverLimit{}), want: awserr.Unknown, code: "OverLimit", status: 429},
		{name: "501", err: generic(501, "NotImplemented"), want: awserr.Unknown, code: "NotImplemented", status: 501},
		{name: "redirect", err: generic(301, "PermanentRedirect"), want: awserr.Unknown, code: "PermanentRedirect", status: 301},
		{name: "unknown code, no answer", err: &smithy.GenericAPIError{Code: "Whatever", Fault: smithy.FaultClient}, want: awserr.Unknown, code: "Whatever"},
		{name: "canceled", err: fmt.Errorf("send: %w", context.Canceled), want: awserr.Unknown},
		{name: "canceled in the SDK", err: transport(&smithy.CanceledError{Err: context.DeadlineExceeded}), want: awserr.Unknown},
		{name: "no such host", err: transport(&net.DNSError{Err: "no such host", Name: "sqs.invalid", IsNotFound: true}), want: awserr.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := awserr.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
			if got := awserr.Code(tc.err); got != tc.code {
				t.Errorf("Code = %q, want %q", got, tc.code)
			}
			if got := awserr.StatusCode(tc.err); got != tc.status {
				t.Errorf("StatusCode = %d, want %d", got, tc.status)
			}
			if got := awserr.Missing(tc.err); got != tc.missing {
				t.Errorf("Missing = %s, want %s", got, tc.missing)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{generic(400, "InvalidAction"), true},
		{generic(400, "UnsupportedOperation"), true},
		{generic(400, "UnknownOperationException"), true},
		{generic(501, "NotImplemented"), true},
		{generic(400, "AWS.SimpleQueueService.UnsupportedOperation"), false},
		{generic(403, "AccessDenied"), false},
		{errors.New("InvalidAction"), false},
		{nil, false},
	} {
		if got := awserr.Unsupported(tc.err); got != tc.want {
			t.Errorf("Unsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := fmt.Sprint(awserr.Unknown, awserr.Retryable, awserr.NotFound, awserr.Changed, awserr.Permanent, awserr.Class(9)); got != "Unknown Retryable NotFound Changed Permanent Class(?)" {
		t.Errorf("class names: %s", got)
	}
	if got := fmt.Sprint(awserr.NoResource, awserr.Key, awserr.Version, awserr.Bucket, awserr.Queue, awserr.Resource(-1)); got != "NoResource Key Version Bucket Queue Resource(?)" {
		t.Errorf("resource names: %s", got)
	}
}

// canned is an HTTP client that answers every request with one response,
// so that the SDK's own deserializers build the errors.
type canned struct {
	status int
	header http.Header
	body   string
}

func (c canned) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: c.status, Status: http.StatusText(c.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header, Body: io.NopCloser(strings.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: req}, nil
}

// TestSDKAnswers has the SDK's clients build the errors from answers as S3
// and SQS send them, with retries off.
func TestSDKAnswers(t *testing.T) {
	s3Client := func(c canned) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", HTTPClient: c, RetryMaxAttempts: 1, UsePathStyle: true,
			BaseEndpoint: aws.String("http://s3.test"), Credentials: aws.AnonymousCredentials{}})
	}
	sqsClient := func(c canned) *sqs.Client {
		return sqs.New(sqs.Options{Region: "us-east-1", HTTPClient: c, RetryMaxAttempts: 1,
			BaseEndpoint: aws.String("http://sqs.test"), Credentials: aws.AnonymousCredentials{}})
	}
	xml := http.Header{"Content-Type": {"application/xml"}}
	s3Body := func(code string) string {
		return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>m</Message></Error>`
	}
	sqsAnswer := func(status int, code, query string) canned {
		h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}}
		if query != "" {
			h.Set("X-Amzn-Query-Error", query)
		}
		return canned{status, h, `{"__type":"com.amazonaws.sqs#` + code + `","message":"m"}`}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		call    func() error
		want    awserr.Class
		code    string
		missing awserr.Resource
	}{
		{"GetObject of a missing key", func() error {
			_, err := s3Client(canned{404, xml, s3Body("NoSuchKey")}).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			return err
		}, awserr.NotFound, "NoSuchKey", awserr.Key},
		{"HeadObject of a missing key", func() error {
			_, err := s3Client(canned{404, http.Header{}, ""}).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			return err
		}, awserr.NotFound, "NotFound", awserr.Key},
		{"GetObject pinned to an old ETag", func() error {
			_, err := s3Client(canned{412, xml, s3Body("PreconditionFailed")}).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), IfMatch: aws.String(`"e"`)})
			return err
		}, awserr.Changed, "PreconditionFailed", awserr.NoResource},
		{"HeadObject pinned to an old ETag", func() error {
			_, err := s3Client(canned{412, http.Header{}, ""}).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), IfMatch: aws.String(`"e"`)})
			return err
		}, awserr.Changed, "PreconditionFailed", awserr.NoResource},
		{"GetObject throttled", func() error {
			_, err := s3Client(canned{503, xml, s3Body("SlowDown")}).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			return err
		}, awserr.Retryable, "SlowDown", awserr.NoResource},
		{"GetObject denied", func() error {
			_, err := s3Client(canned{403, xml, s3Body("AccessDenied")}).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			return err
		}, awserr.Permanent, "AccessDenied", awserr.NoResource},
		{"GetQueueUrl of a missing queue", func() error {
			_, err := sqsClient(sqsAnswer(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender")).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
			return err
		}, awserr.NotFound, "AWS.SimpleQueueService.NonExistentQueue", awserr.Queue},
		{"SendMessageBatch, KMS throttled", func() error {
			_, err := sqsClient(sqsAnswer(400, "KmsThrottled", "KMS.ThrottlingException;Sender")).SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://sqs.test/1/q"),
				Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("x")}}})
			return err
		}, awserr.Retryable, "KMS.ThrottlingException", awserr.NoResource},
		{"SendMessageBatch, throttled", func() error {
			_, err := sqsClient(sqsAnswer(400, "ThrottlingException", "")).SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://sqs.test/1/q"),
				Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("x")}}})
			return err
		}, awserr.Retryable, "ThrottlingException", awserr.NoResource},
		{"SendMessageBatch, KMS key disabled", func() error {
			_, err := sqsClient(sqsAnswer(400, "KmsDisabled", "KMS.DisabledException;Sender")).SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://sqs.test/1/q"),
				Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("x")}}})
			return err
		}, awserr.Permanent, "KMS.DisabledException", awserr.NoResource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			if got := awserr.Classify(err); got != tc.want {
				t.Errorf("Classify(%v) = %s, want %s", err, got, tc.want)
			}
			if got := awserr.Code(err); got != tc.code {
				t.Errorf("Code = %q, want %q", got, tc.code)
			}
			if got := awserr.Missing(err); got != tc.missing {
				t.Errorf("Missing = %s, want %s", got, tc.missing)
			}
		})
	}
}

// TestThrottleCode checks the one list of throttling codes against the
// SDK's own (each of which Classify must call Retryable, as an entry's code
// or a request's) and SQS's KMS throttles, which the SDK does not know.
func TestThrottleCode(t *testing.T) {
	codes := []string{"KmsThrottled", "KMS.ThrottlingException"}
	for code := range retry.DefaultThrottleErrorCodes {
		codes = append(codes, code)
	}
	for _, code := range codes {
		if !awserr.ThrottleCode(code) {
			t.Errorf("ThrottleCode(%q) = false", code)
		}
		err := &smithy.GenericAPIError{Code: code, Message: "slow down"}
		if c := awserr.Classify(err); c != awserr.Retryable {
			t.Errorf("Classify(%s) = %v, want Retryable", code, c)
		}
	}
	for _, code := range []string{"", "AccessDenied", "InternalError", "throttlingexception", "KmsAccessDenied"} {
		if awserr.ThrottleCode(code) {
			t.Errorf("ThrottleCode(%q) = true", code)
		}
	}
}
