// Package awserr classifies the errors of AWS SDK calls, once, for every
// caller: what code S3 or SQS answered (Code), with which HTTP status
// (StatusCode), and what that says about asking again (Classify): the thing
// asked for is not there (NotFound, with Missing saying what: a key, a
// version, a bucket or a queue), it changed since it was pinned (Changed),
// asking again may succeed (Retryable), or asking again gets the same answer
// (Permanent). What is none of these is Unknown, and each caller maps the
// classes to its own outcome: a resumed read, a failed entry, a skipped
// object, a released claim.
//
// The classification is built as the SDK's aws/retry is: errors.As into the
// behaviours an error has (ErrorCode() of a smithy.APIError or a modeled
// error, HTTPStatusCode() of the *awshttp.ResponseError every answer is
// wrapped in, the connection and timeout checks of retry.DefaultRetryables),
// checked in order, the first that knows deciding. Retryable is exactly
// what the SDK's standard retryer retries, plus SQS's KMS throttling;
// the other classes are decided by the error code first and the HTTP status
// after. Errors are read, never changed or wrapped.
//
// It imports the SDK's aws and aws/retry and nothing of this module.
package awserr
