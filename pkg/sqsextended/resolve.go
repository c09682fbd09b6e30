package sqsextended

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DefaultMaxPayloadBytes is the largest payload a [Resolver] reads when
// ResolverOptions.MaxPayloadBytes is zero or less.
const DefaultMaxPayloadBytes = 64 << 20

// ResolveAPI is the part of the S3 client a [Resolver] uses: GetObject to
// read payloads, DeleteObject for [Resolver.Delete] only. *s3.Client
// satisfies it; tests wrap one to inject failures.
type ResolveAPI interface {
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, params *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

var _ ResolveAPI = (*s3.Client)(nil)

// ResolverOptions configures a [Resolver].
type ResolverOptions struct {
	// MaxPayloadBytes is the largest payload read from S3; a larger one
	// yields a *TooLargeError and is not read. Zero or less means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int64
	// IgnorePayloadNotFound says what becomes of a marked message whose
	// payload is not in S3, as the Java client's ignorePayloadNotFound
	// does. False, the zero value, makes it a *PayloadNotFoundError, to be
	// handled as any failure: the message comes back and, in the end, goes
	// to its queue's dead-letter queue. True makes it ErrSkip (wrapping the
	// *PayloadNotFoundError): the message is a copy of one already
	// processed, whose consumer deleted the payload (see "Deleting
	// payloads" in the package documentation), and is to be deleted
	// without processing, as the Java client deletes it on receive.
	IgnorePayloadNotFound bool
}

// Resolver reads the payloads of received messages. It is safe for
// concurrent use.
type Resolver struct {
	client     ResolveAPI
	max        int64
	ignoreGone bool
}

// NewResolver returns a Resolver that reads with client.
func NewResolver(client ResolveAPI, opts ResolverOptions) *Resolver {
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return &Resolver{client: client, max: opts.MaxPayloadBytes, ignoreGone: opts.IgnorePayloadNotFound}
}

// ErrSkip is the error, with ResolverOptions.IgnorePayloadNotFound, of a
// marked message whose payload is not in S3: the message is done with, and
// the caller deletes it (or reports it processed) without processing it.
// The error also matches the *PayloadNotFoundError, for logs.
var ErrSkip = errors.New("sqsextended: payload not found: message skipped")

// PayloadNotFoundError reports a payload that S3 does not have (NoSuchKey).
// Payloads are deleted by consumers ([Resolver.Delete]) and by the
// bucket's lifecycle rule; an [Offloader] sends no pointer before its
// object is written. Err is S3's error, so errors.As with *s3types.NoSuchKey
// matches too.
type PayloadNotFoundError struct {
	// Pointer names the payload.
	Pointer Pointer
	// Err is S3's error.
	Err error
}

// Error implements error.
func (e *PayloadNotFoundError) Error() string {
	return fmt.Sprintf("sqsextended: payload %s not found: %v", e.Pointer, e.Err)
}

// Unwrap returns S3's error.
func (e *PayloadNotFoundError) Unwrap() error { return e.Err }

// TooLargeError reports a payload larger than ResolverOptions.MaxPayloadBytes.
// It was not read.
type TooLargeError struct {
	// Pointer names the payload.
	Pointer Pointer
	// Size is the object's size as S3 reported it or, when S3 reported
	// none, the bytes read before giving up (Limit+1).
	Size int64
	// Limit is MaxPayloadBytes.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("sqsextended: payload %s is %d bytes; the limit is %d", e.Pointer, e.Size, e.Limit)
}

// Resolve returns the body of a received message. For a message marked
// with SizeAttribute or LegacySizeAttribute (see [Marked]) it parses the
// pointer in the body, reads the payload from S3 and returns it with the
// pointer; for any other message it returns the body unchanged and a nil
// pointer. The message and its receipt handle are not changed.
//
// Errors: a marked message whose body is not a pointer yields a
// *PointerError; a payload over the limit a *TooLargeError; a payload S3
// does not have a *PayloadNotFoundError, or ErrSkip with
// ResolverOptions.IgnorePayloadNotFound; S3's other errors are returned
// wrapped (a denied one is known by its smithy.APIError code). S3 answers
// NoSuchKey only to a caller allowed s3:ListBucket on the bucket; to any
// other it answers AccessDenied for a missing object, which is not taken
// for a missing payload.
func (r *Resolver) Resolve(ctx context.Context, msg sqstypes.Message) (string, *Pointer, error) {
	body := aws.ToString(msg.Body)
	if !Marked(msg.MessageAttributes) {
		return body, nil, nil
	}
	p, err := ParsePointer(body)
	if err != nil {
		return "", nil, err
	}
	payload, err := r.Fetch(ctx, p)
	if err != nil {
		return "", nil, err
	}
	return payload, &p, nil
}

// Fetch reads the payload p names, as Resolve does once it has the
// pointer, with the same errors. Use it with [Marked] and [ParsePointer]
// for messages that come in another shape, such as aws-lambda-go's
// events.SQSMessage.
func (r *Resolver) Fetch(ctx context.Context, p Pointer) (string, error) {
	out, err := r.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if _, ok := errors.AsType[*s3types.NoSuchKey](err); ok {
		gone := &PayloadNotFoundError{Pointer: p, Err: err}
		if r.ignoreGone {
			return "", fmt.Errorf("%w: %w", ErrSkip, gone)
		}
		return "", gone
	}
	if err != nil {
		return "", fmt.Errorf("sqsextended: read payload %s: %w", p, err)
	}
	defer out.Body.Close()
	size := aws.ToInt64(out.ContentLength)
	if size > r.max {
		return "", &TooLargeError{Pointer: p, Size: size, Limit: r.max}
	}
	var b strings.Builder
	if size > 0 {
		b.Grow(int(size))
	}
	n, err := io.Copy(&b, io.LimitReader(out.Body, r.max+1))
	if err != nil {
		return "", fmt.Errorf("sqsextended: read payload %s: %w", p, err)
	}
	if n > r.max {
		return "", &TooLargeError{Pointer: p, Size: n, Limit: r.max}
	}
	return b.String(), nil
}

// Delete deletes the payload p names, as the Java client's
// deletePayloadFromS3 does when the message is deleted. Call it once the
// message has been processed for good. Every other message that names the
// same payload (a copy of the same record with the same body; see
// "Deleting payloads" in the package documentation) then finds it gone.
// Deleting a payload that does not exist succeeds, as S3's DeleteObject
// does.
func (r *Resolver) Delete(ctx context.Context, p Pointer) error {
	if _, err := r.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}); err != nil {
		return fmt.Errorf("sqsextended: delete payload %s: %w", p, err)
	}
	return nil
}
