package sqsextended

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Mode says which messages an [Offloader] writes to S3.
type Mode string

// Modes.
const (
	// ModeLarge offloads a message only when it would exceed the queue's
	// limit. It is what the zero Mode means.
	ModeLarge Mode = "large"
	// ModeAlways offloads every message, as the Java client's
	// alwaysThroughS3 does.
	ModeAlways Mode = "always"
)

// ParseMode reads a mode as configuration writes it ("large" or "always",
// any case); "" is the zero Mode, which means ModeLarge.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ModeLarge, ModeAlways:
		return m, nil
	}
	return "", fmt.Errorf("%q is not large or always", s)
}

// MaxPrefixLen is the longest key prefix an [Offloader] accepts: S3's
// 1,024-byte key limit less the 129 bytes of [Offloader.Key]'s two hashes
// and the slash between them.
const MaxPrefixLen = 1024 - (2*sha256.Size*2 + 1)

// OffloadAPI is the part of the S3 client an [Offloader] uses. *s3.Client
// satisfies it; tests wrap one to inject failures.
type OffloadAPI interface {
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ OffloadAPI = (*s3.Client)(nil)

// Discard is an OffloadAPI that writes nothing: an Offloader over it
// returns the pointers it would send, for a dry run.
var Discard OffloadAPI = discard{}

type discard struct{}

func (discard) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return &s3.PutObjectOutput{}, nil
}

// OffloaderOptions configures an [Offloader].
type OffloaderOptions struct {
	// Bucket is the bucket payloads are written to. It is required.
	Bucket string
	// Prefix is prepended to every object key, for example "offload/".
	// It may hold only the characters the Java client allows in its key
	// prefix, A-Z a-z 0-9 . / _ - (INVALID_S3_PREFIX_KEY_CHARACTERS_PATTERN in
	// SQSExtendedClientConstants.java), and at most MaxPrefixLen of them.
	// Empty means the bucket's root.
	Prefix string
	// Mode says which messages are offloaded; "" means ModeLarge.
	Mode Mode
	// MaxMessageSize is the queue's MaximumMessageSize in bytes, for
	// example [sqsbatch.Sender.MaxMessageSize]. It is required: a default
	// would be wrong for every queue with another limit.
	MaxMessageSize int
	// KMSKeyID, when set, has payloads encrypted with SSE-KMS under this
	// key (an id, ARN or alias). Empty means the bucket's default
	// encryption: the write names none, so that a bucket whose default is
	// SSE-KMS keeps it (S3 encrypts every object, with SSE-S3 when the
	// bucket says nothing).
	KMSKeyID string
}

// Offloader turns entries too large for their queue into pointer entries,
// writing their bodies to S3. It is safe for concurrent use.
type Offloader struct {
	client OffloadAPI
	opts   OffloaderOptions
}

// NewOffloader checks opts and returns an Offloader that writes with
// client. It makes no request.
func NewOffloader(client OffloadAPI, opts OffloaderOptions) (*Offloader, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("no S3 client"))
	}
	if opts.Bucket == "" {
		errs = append(errs, errors.New("no bucket"))
	}
	if err := CheckPrefix(opts.Prefix); err != nil {
		errs = append(errs, err)
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeLarge
	case ModeLarge, ModeAlways:
	default:
		errs = append(errs, fmt.Errorf("mode %q is not large or always", opts.Mode))
	}
	if opts.MaxMessageSize <= 0 {
		errs = append(errs, errors.New("MaxMessageSize is not set (use the queue's MaximumMessageSize, as sqsbatch.Sender.MaxMessageSize reports it)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sqsextended: offloader: %w", err)
	}
	return &Offloader{client: client, opts: opts}, nil
}

// CheckPrefix reports whether prefix may be an [Offloader]'s key prefix
// (see OffloaderOptions.Prefix), so that configuration can be checked
// before an Offloader is made.
func CheckPrefix(prefix string) error {
	if len(prefix) > MaxPrefixLen {
		return fmt.Errorf("key prefix is %d bytes; at most %d are allowed", len(prefix), MaxPrefixLen)
	}
	if i := strings.IndexFunc(prefix, func(r rune) bool { return !prefixChar(r) }); i >= 0 {
		return fmt.Errorf("key prefix %q has %q at byte %d; only A-Z a-z 0-9 . / _ - are allowed", prefix, prefix[i:i+1], i)
	}
	return nil
}

func prefixChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '/' || r == '_' || r == '-'
}

// Key returns the object key of the payload body of the record with the
// given id: Prefix, the lower-case hex SHA-256 of id, "/", and the
// lower-case hex SHA-256 of body. The key names its bytes: two entries
// share an object only when they carry the same record with the same
// body, and the object under a key never changes (see [Offloader.Entry]).
// The first hash groups the payloads of one record, so that
// "Prefix<sha256 of id>/" lists them all.
func (o *Offloader) Key(id, body string) string {
	idSum, bodySum := sha256.Sum256([]byte(id)), sha256.Sum256([]byte(body))
	return o.opts.Prefix + hex.EncodeToString(idSum[:]) + "/" + hex.EncodeToString(bodySum[:])
}

// Pointer returns the pointer to the payload body of the record with the
// given id, the object named by Key(id, body).
func (o *Offloader) Pointer(id, body string) Pointer {
	return Pointer{Bucket: o.opts.Bucket, Key: o.Key(id, body)}
}

// InvalidEntryError reports an entry that cannot be sent as a pointer:
// retrying it unchanged will fail again. Nothing was written to S3.
type InvalidEntryError struct {
	// ID is the id given to [Offloader.Entry].
	ID string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *InvalidEntryError) Error() string {
	return fmt.Sprintf("sqsextended: entry %q cannot be offloaded: %s", e.ID, e.Reason)
}

// Entry returns the entry to send in place of e. When e fits its queue
// (and Mode is ModeLarge) that is e itself, and offloaded is false. When it
// does not, or Mode is ModeAlways, Entry writes e.Body to S3 under
// Key(id, e.Body) and returns a copy of e whose body is the pointer and
// whose attributes are e's plus SizeAttribute (Number, the body's size in
// bytes); offloaded is true. GroupID, DeduplicationID, DelaySeconds and ID
// are kept.
//
// id must identify the record stably across retries; e.ID may serve when it
// does.
//
// The object is written only if the key is free (If-None-Match: *), with
// the body's SHA-256 for S3 to check (x-amz-checksum-sha256), so an object
// is never rewritten: an entry whose object exists already, because the
// record was offloaded before with this body (a retry, a second run), gets
// a pointer to it (S3 answers 412 PreconditionFailed, which Entry takes as
// success; the key says the bytes are the same), and the object keeps the
// encryption it was written with. A write that S3 refuses
// with 409 ConditionalRequestConflict, while another write of the same key
// is under way, is retried with the client's retryer.
//
// Entry returns an *InvalidEntryError, and writes nothing, when id is
// empty, when e already has SizeAttribute or LegacySizeAttribute (a
// receiver would take it for a pointer), or when it must be offloaded but
// its body is empty, it has ten attributes already (SQS allows ten and the
// size attribute needs one), or the pointer message with e's attributes
// would itself exceed MaxMessageSize. A failed PutObject returns the S3
// error, wrapped; the SDK has already retried it. On error the returned
// entry is the zero Entry: nothing must be sent for the record.
//
// The body is written as it is; characters that SQS would refuse in a
// message body travel unharmed through S3.
func (o *Offloader) Entry(ctx context.Context, id string, e sqsbatch.Entry) (out sqsbatch.Entry, offloaded bool, err error) {
	invalid := func(format string, args ...any) (sqsbatch.Entry, bool, error) {
		return sqsbatch.Entry{}, false, &InvalidEntryError{ID: id, Reason: fmt.Sprintf(format, args...)}
	}
	if id == "" {
		return invalid("no id to derive the object key from")
	}
	for _, name := range AttributeNames() {
		if _, ok := e.Attributes[name]; ok {
			return invalid("attribute %s is reserved for the SQS Extended Client format", name)
		}
	}
	size := e.Size()
	if o.opts.Mode == ModeLarge && size <= o.opts.MaxMessageSize {
		return e, false, nil
	}
	if e.Body == "" {
		return invalid("its body is empty")
	}
	if len(e.Attributes) >= sqsbatch.MaxAttributes {
		return invalid("it has %d message attributes; an offloaded message may have %d besides %s", len(e.Attributes), sqsbatch.MaxAttributes-1, SizeAttribute)
	}
	p := o.Pointer(id, e.Body)
	out = e
	out.Body = p.Body()
	out.Attributes = make(map[string]sqstypes.MessageAttributeValue, len(e.Attributes)+1)
	maps.Copy(out.Attributes, e.Attributes)
	out.Attributes[SizeAttribute] = sqstypes.MessageAttributeValue{
		DataType:    aws.String("Number"),
		StringValue: aws.String(strconv.Itoa(len(e.Body))),
	}
	if n := out.Size(); n > o.opts.MaxMessageSize {
		return invalid("the pointer message would be %d bytes with its attributes; the queue accepts %d", n, o.opts.MaxMessageSize)
	}
	if err := o.put(ctx, p, e.Body); err != nil {
		return sqsbatch.Entry{}, false, fmt.Errorf("sqsextended: write payload of entry %q (%d bytes) to %s: %w", id, len(e.Body), p, err)
	}
	return out, true, nil
}

// put writes body to p unless p exists. An existing object holds the same
// bytes, since its key is their hash.
func (o *Offloader) put(ctx context.Context, p Pointer, body string) error {
	sum := sha256.Sum256([]byte(body))
	in := &s3.PutObjectInput{
		Bucket:         aws.String(p.Bucket),
		Key:            aws.String(p.Key),
		Body:           strings.NewReader(body),
		ContentLength:  aws.Int64(int64(len(body))),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		IfNoneMatch:    aws.String("*"),
	}
	if o.opts.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(o.opts.KMSKeyID)
	}
	_, err := o.client.PutObject(ctx, in, retryConflicts)
	if awserr.Classify(err) == awserr.Changed {
		return nil // the precondition IfNoneMatch failed: the payload is there
	}
	return err
}

// retryConflicts has the client retry a conditional write that S3 refused
// because another one on the same key was in progress, as S3 asks (see
// s3.PutObjectInput.IfNoneMatch); the retry then finds the object (412)
// or writes it.
func retryConflicts(o *s3.Options) {
	o.Retryer = retry.AddWithErrorCodes(o.Retryer, "ConditionalRequestConflict")
}
