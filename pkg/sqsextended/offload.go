package sqsextended

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

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
// 1,024-byte key limit less the 64 hex digits of the id's hash.
const MaxPrefixLen = 1024 - sha256.Size*2

// OffloadAPI is the part of the S3 client an [Offloader] uses. *s3.Client
// satisfies it; tests wrap one to inject failures.
type OffloadAPI interface {
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ OffloadAPI = (*s3.Client)(nil)

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
	// key (an id, ARN or alias). Empty means SSE-S3 (AES256).
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

// Key returns the object key of the record with the given id: Prefix
// followed by the lower-case hex SHA-256 of id. The same id always gives
// the same key, so a retried record overwrites its own object; ids must be
// unique among the records that share a prefix.
func (o *Offloader) Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return o.opts.Prefix + hex.EncodeToString(sum[:])
}

// Pointer returns the pointer to the object of the record with the given
// id.
func (o *Offloader) Pointer(id string) Pointer {
	return Pointer{Bucket: o.opts.Bucket, Key: o.Key(id)}
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
// Key(id) and returns a copy of e whose body is the pointer and whose
// attributes are e's plus SizeAttribute (Number, the body's size in bytes);
// offloaded is true. GroupID, DeduplicationID, DelaySeconds and ID are kept.
//
// id must identify the record stably across retries; e.ID may serve when it
// does.
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
	p := o.Pointer(id)
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
	in := &s3.PutObjectInput{
		Bucket:        aws.String(p.Bucket),
		Key:           aws.String(p.Key),
		Body:          strings.NewReader(e.Body),
		ContentLength: aws.Int64(int64(len(e.Body))),
	}
	if o.opts.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(o.opts.KMSKeyID)
	} else {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAes256
	}
	if _, err := o.client.PutObject(ctx, in); err != nil {
		return sqsbatch.Entry{}, false, fmt.Errorf("sqsextended: write payload of entry %q (%d bytes) to %s: %w", id, len(e.Body), p, err)
	}
	return out, true, nil
}
