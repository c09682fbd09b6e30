package awserr

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Class is what an error of an AWS call says about asking again.
type Class int

// The classes, in the order Classify decides them.
const (
	// Unknown is an error this package cannot place: no error, an error of
	// no AWS answer that the SDK does not know as a connection error (a
	// short body, a canceled context), or an answer whose code and status
	// say nothing sure (408, a 429 with a code, a 5xx the SDK does not
	// retry, a redirect). The caller decides.
	Unknown Class = iota
	// Retryable is an error that asking again may not meet: what the
	// SDK's standard retryer retries (throttling codes such as
	// ThrottlingException, RequestThrottled and SlowDown, RequestTimeout,
	// HTTP 500, 502, 503 and 504, a 429 without a modeled error, reset or
	// refused connections, timeouts) and SQS's KMS throttling (KmsThrottled,
	// KMS.ThrottlingException).
	Retryable
	// NotFound is an answer that the key, version, bucket or queue asked
	// for does not exist (see Missing), or any HTTP 404.
	NotFound
	// Changed is a failed precondition: PreconditionFailed or HTTP 412,
	// S3's answer when the object no longer has the ETag a read was pinned
	// to, or when a write that must not overwrite finds the object.
	Changed
	// Permanent is an answer that asking again gets again: access denied,
	// invalid parameters, a KMS key that is disabled, missing or in the
	// wrong state, and any other HTTP 4xx but 408 and 429.
	Permanent
)

var classNames = [...]string{Unknown: "Unknown", Retryable: "Retryable", NotFound: "NotFound", Changed: "Changed", Permanent: "Permanent"}

// String returns the class's name.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "Class(?)"
	}
	return classNames[c]
}

// Code returns the AWS error code in err's chain: the ErrorCode of a
// smithy.APIError or of a modeled error such as *s3types.NoSuchKey (SQS's
// query-compatible code, such as AWS.SimpleQueueService.NonExistentQueue,
// when SQS sent one), or "" when err carries none.
func Code(err error) string {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// StatusCode returns the HTTP status of the answer err came with (the SDK
// wraps every error that follows an answer in an *awshttp.ResponseError),
// or 0 when no answer came.
func StatusCode(err error) int {
	var resp interface{ HTTPStatusCode() int }
	if errors.As(err, &resp) {
		return resp.HTTPStatusCode()
	}
	return 0
}

// sdkRetryable is the SDK's standard retryer's judgment: its retryables
// (which hold its throttling codes), and its throttle checks on their own
// too, so that a throttle is Retryable even where an earlier retryable
// check says no (a canceled request, an error whose RetryableError() is
// false).
var sdkRetryable = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary ||
		retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
})

// Classify returns the class of err, the first of these that applies: a
// retry of the SDK's standard retryer or a KMS throttling code is
// Retryable; a not-found, precondition or permanent code is NotFound,
// Changed or Permanent; HTTP 404 is NotFound, 412 Changed, another 4xx but
// 408 and 429 Permanent; anything else, and nil, is Unknown. It is safe for
// concurrent use.
func Classify(err error) Class {
	if err == nil {
		return Unknown
	}
	if sdkRetryable.IsErrorRetryable(err) == aws.TrueTernary {
		return Retryable
	}
	code := Code(err)
	switch {
	case ThrottleCode(code):
		return Retryable
	case missingCodes[code] != NoResource:
		return NotFound
	case code == "PreconditionFailed":
		return Changed
	case permanentCodes[code]:
		return Permanent
	}
	switch status := StatusCode(err); {
	case status == 404:
		return NotFound
	case status == 412:
		return Changed
	case status >= 400 && status < 500 && status != 408 && status != 429:
		return Permanent
	}
	return Unknown
}

// ThrottleCode reports whether code says the service, or one behind it,
// is throttling: one of the SDK's standard retryer's throttling codes
// (retry.DefaultThrottleErrorCodes: ThrottlingException,
// RequestThrottled, SlowDown and others) or SQS's KMS throttling, which
// the SDK does not know, by its own code (KmsThrottled) and by its
// query-compatible one (KMS.ThrottlingException, which SQS sends, and
// Code returns, in place of the other). An entry of an SQS batch fails
// with a code and no error, so this is the check for it.
func ThrottleCode(code string) bool {
	_, sdk := retry.DefaultThrottleErrorCodes[code]
	return sdk || code == "KmsThrottled" || code == "KMS.ThrottlingException"
}

// permanentCodes are the codes, beside the not-found ones, that no retry
// changes: denied access, invalid requests, and KMS keys that cannot be
// used (SQS's codes and its query-compatible ones, S3's).
var permanentCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "Forbidden": true,
	"InvalidObjectState": true, "InvalidArgument": true, "InvalidBucketName": true,
	"InvalidParameterValue": true, "InvalidAttributeName": true, "InvalidAttributeValue": true,
	"KmsAccessDenied": true, "KmsDisabled": true, "KmsInvalidKeyUsage": true, "KmsInvalidState": true,
	"KmsNotFound": true, "KmsOptInRequired": true,
	"KMS.AccessDeniedException": true, "KMS.DisabledException": true, "KMS.InvalidKeyUsageException": true,
	"KMS.InvalidStateException": true, "KMS.NotFoundException": true, "KMS.OptInRequired": true,
}
