package sqsextended

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
}

// Resolver reads the payloads of received messages. It is safe for
// concurrent use.
type Resolver struct {
	client ResolveAPI
	max    int64
}

// NewResolver returns a Resolver that reads with client.
func NewResolver(client ResolveAPI, opts ResolverOptions) *Resolver {
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return &Resolver{client: client, max: opts.MaxPayloadBytes}
}

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
// *PointerError; a payload over the limit a *TooLargeError; S3's errors
// are returned wrapped, so that a missing payload can be recognised with
// errors.As and *s3types.NoSuchKey (and a denied one by its
// smithy.APIError code).
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
// pointer. Use it with [Marked] and [ParsePointer] for messages that come
// in another shape, such as aws-lambda-go's events.SQSMessage.
func (r *Resolver) Fetch(ctx context.Context, p Pointer) (string, error) {
	out, err := r.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
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
// message has been processed for good; a message still on the queue whose
// payload is gone can no longer be read. Deleting a payload that does not
// exist succeeds, as S3's DeleteObject does.
func (r *Resolver) Delete(ctx context.Context, p Pointer) error {
	if _, err := r.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}); err != nil {
		return fmt.Errorf("sqsextended: delete payload %s: %w", p, err)
	}
	return nil
}
