package sqsbatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// Rule names a check that an entry failed before it was sent.
type Rule string

// Rules checked before sending. Each mirrors a rule SQS enforces.
const (
	RuleEmptyBody              Rule = "EmptyBody"
	RuleTooLarge               Rule = "MessageTooLarge"
	RuleInvalidCharacters      Rule = "InvalidCharacters"
	RuleTooManyAttributes      Rule = "TooManyAttributes"
	RuleInvalidAttribute       Rule = "InvalidAttribute"
	RuleInvalidDelay           Rule = "InvalidDelaySeconds"
	RuleMissingGroupID         Rule = "MissingMessageGroupId"
	RuleInvalidGroupID         Rule = "InvalidMessageGroupId"
	RuleMissingDeduplicationID Rule = "MissingMessageDeduplicationId"
	RuleInvalidDeduplicationID Rule = "InvalidMessageDeduplicationId"
)

// CodeGroupFailed is the [EntryError] code of a FIFO entry that was not sent
// because an earlier entry of its message group failed for good.
const CodeGroupFailed = "MessageGroupFailed"

// CodeMD5Mismatch is the [EntryError] code of an entry that SQS answered
// as accepted with an MD5 of its body that is not the MD5 of the body
// sent, on every attempt. Such an entry is not counted as accepted: it is
// retried as a throttled entry is, while the other entries of the answer
// count as accepted. SQS may hold a message for each attempt, with
// whatever body it received.
const CodeMD5Mismatch = "MD5Mismatch"

// ValidationError reports an entry that breaks a rule SQS enforces. Such an
// entry is never sent.
type ValidationError struct {
	// EntryID is the caller's [Entry.ID].
	EntryID string
	// Rule is the rule the entry breaks.
	Rule Rule
	// Detail says what was found.
	Detail string
}

func newValidationError(id string, rule Rule, format string, args ...any) *ValidationError {
	return &ValidationError{EntryID: id, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("sqsbatch: entry %q breaks %s: %s", e.EntryID, e.Rule, e.Detail)
}

// EntryError is an entry that SQS did not accept, with the reason. It is
// what [Result.Failures] holds.
type EntryError struct {
	// Entry is the entry as it would have been sent (after any character
	// replacement), so that it can be written to a failure output. Its ID
	// and Ref are the caller's, as given.
	Entry Entry
	// Seq is the entry's position in the input, from zero.
	Seq int
	// Code is SQS's error code for the entry or the request, a [Rule] for
	// entries that failed validation, [CodeGroupFailed] or
	// [CodeMD5Mismatch].
	Code string
	// Message is SQS's error message, or a description of the failure.
	Message string
	// SenderFault reports that SQS blamed the entry itself, so that
	// resending it unchanged would fail again.
	SenderFault bool
	// Attempts is the number of requests the entry was part of.
	Attempts int
	// Err is the underlying error, if any: a [*ValidationError], a
	// [*StopError], or the context's error.
	Err error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("sqsbatch: entry %q (#%d) failed after %d attempts: %s: %s", e.Entry.ID, e.Seq, e.Attempts, e.Code, e.Message)
}

// Unwrap returns the underlying error.
func (e *EntryError) Unwrap() error { return e.Err }

// Stopped reports whether the entry failed because its send stopped (an
// answer no retry fixes, a [*StopError], or the context's end) rather than
// for a reason of its own: sent again later, it may well be accepted.
func (e *EntryError) Stopped() bool {
	var stop *StopError
	return errors.As(e.Err, &stop) || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded)
}

// StopError is returned when a request failed in a way that no retry can fix,
// such as a missing queue, denied access or invalid credentials. The send
// stops; entries not yet accepted are reported in [Result.Failures].
type StopError struct {
	// Code is the AWS error code, when the service returned one.
	Code string
	// Err is the request's error.
	Err error
}

func (e *StopError) Error() string {
	return "sqsbatch: send stopped: " + e.Err.Error()
}

// Unwrap returns the request's error.
func (e *StopError) Unwrap() error { return e.Err }

// codeOf returns the AWS error code in err, or a short name for errors
// without one.
func codeOf(err error) string {
	switch code := awserr.Code(err); {
	case code != "":
		return code
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	default:
		return "RequestError"
	}
}
