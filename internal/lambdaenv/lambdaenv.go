// Package lambdaenv reads the Lambda functions' configuration from their
// environment: each variable through the same check that a request field or
// CLI flag of the same setting uses, with every problem gathered and named
// by its variable.
package lambdaenv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
)

// Reader reads variables with getenv and gathers the problems it finds.
// It is used by one goroutine.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New returns a Reader that reads with getenv (os.Getenv in Lambda, a map
// in tests).
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err returns every problem found so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Bad records a problem with the variable name.
func (r *Reader) Bad(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// String returns the variable with surrounding spaces removed.
func (r *Reader) String(name string) string { return strings.TrimSpace(r.getenv(name)) }

// Raw returns the variable as written, for values such as key prefixes
// that may begin or end with spaces.
func (r *Reader) Raw(name string) string { return r.getenv(name) }

// Parse calls parse with the variable when it is set, and records parse's
// error under the variable's name.
func Parse[T any](r *Reader, name string, parse func(string) (T, error)) T {
	var zero T
	v := r.String(name)
	if v == "" {
		return zero
	}
	out, err := parse(v)
	if err != nil {
		r.Bad(name, "%v", err)
		return zero
	}
	return out
}

// Bool reads true or false; unset means def.
func (r *Reader) Bool(name string, def bool) bool {
	v := r.String(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.Bad(name, "%q is not true or false", v)
		return def
	}
	return b
}

// Int reads a whole number with parse (such as fanout.ParseMaxInFlight);
// unset means zero.
func (r *Reader) Int(name string, parse func(string) (int64, error)) int {
	return int(Parse(r, name, parse))
}

// Size reads a positive size such as 64MiB; unset means zero.
func (r *Reader) Size(name string) int64 {
	return Parse(r, name, func(v string) (int64, error) {
		n, err := fanout.ParseSize(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a positive size (bytes, or a number with KiB, MiB or GiB)", v)
		}
		return n, nil
	})
}

// Duration reads a positive duration such as 10s; unset means zero.
func (r *Reader) Duration(name string) time.Duration {
	return Parse(r, name, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive duration such as 10s", v)
		}
		return d, nil
	})
}

// QueueURL reads an SQS queue URL; unset means "".
func (r *Reader) QueueURL(name string) string {
	return Parse(r, name, func(v string) (string, error) { return v, fanout.CheckQueueURL(v) })
}

// S3URI reads an s3://bucket/prefix URI; unset means "".
func (r *Reader) S3URI(name string) string {
	return Parse(r, name, func(v string) (string, error) {
		if _, _, err := dataset.ParseS3URI(v); err != nil {
			return "", fmt.Errorf("%q is not an s3://bucket/prefix URI", v)
		}
		return v, nil
	})
}

// OneOf records a problem when more than one of the named variables is
// set.
func (r *Reader) OneOf(names ...string) {
	var set []string
	for _, n := range names {
		if r.String(n) != "" {
			set = append(set, n)
		}
	}
	if len(set) > 1 {
		r.Bad(set[len(set)-1], "set only one of %s", strings.Join(names, " and "))
	}
}

// QueueError says, in words a user acts on, why the queue a variable names
// cannot be used at init: the variable, the queue, and AWS's error code and
// message, with a hint for the common codes.
func QueueError(variable, queue string, err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		// No answer from SQS: the endpoint, network or credentials.
		var op *smithy.OperationError
		if errors.As(err, &op) {
			err = op.Err
		}
		return fmt.Errorf("%s: queue %s cannot be reached: %v", variable, queue, err)
	}
	hint := ""
	switch api.ErrorCode() {
	case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		hint = " (no such queue in this account and region; check the URL or name)"
	case "AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException":
		hint = " (the function's role needs sqs:GetQueueAttributes and sqs:SendMessage on it, and kms:GenerateDataKey for a KMS-encrypted queue)"
	}
	return fmt.Errorf("%s: queue %s cannot be used: %s: %s%s", variable, queue, api.ErrorCode(), api.ErrorMessage(), hint)
}
