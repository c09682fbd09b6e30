package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// Errors that reads of a pinned object wrap, for errors.Is.
var (
	// ErrChanged reports that the object is no longer the version that
	// was planned (its ETag no longer matches).
	ErrChanged = errors.New("object changed since it was planned")
	// ErrNotFound reports that the object, or the planned version of it,
	// is gone.
	ErrNotFound = errors.New("object not found")
	// ErrCorrupt reports that the object's bytes, all of them read, are
	// not what their format says: a compressed stream that is truncated or
	// corrupt (a bad gzip header or checksum, deflate or zstd data that
	// does not decode, a stream that stops before its end), or a Parquet
	// file whose footer or pages do not decode. Reading the same bytes
	// again gives the same error, so it is never resumed; a body that
	// broke off in the network is resumed instead, and what it ends with
	// when that fails is not ErrCorrupt. The error says where: the
	// compressed byte the decompressor had reached, and the *ReadError
	// around it the offset in the records' stream.
	ErrCorrupt = errors.New("corrupt or truncated data")
	// ErrUnsupported reports an object that is valid in its format but
	// uses a part of it that s3sqs does not read: a Parquet column
	// compressed with LZ4 (the deprecated framing, codec 5) or LZO. The
	// error names the part and what to write instead; reading again
	// gives the same error.
	ErrUnsupported = errors.New("not read by s3sqs")
)

// EncodingError is the error of a read of an object's stored bytes by
// range when S3 serves the object with a Content-Encoding that compresses
// it (gzip or zstd): a range of compressed bytes holds no records. It means
// the read's chunk was planned before the object's Content-Encoding was
// known, as one of several byte ranges; a chunk planned whole reads the
// object as the encoding says. Asking again gives the same answer, so it
// is not resumed.
type EncodingError struct {
	Object Object
	// ContentEncoding is the encoding S3 reported.
	ContentEncoding string
	// Compression is the compression it names.
	Compression Compression
}

func (e *EncodingError) Error() string {
	return fmt.Sprintf("dataset: %s is stored with Content-Encoding %q: its bytes are %s-compressed and can only be read whole, from the start", e.Object, e.ContentEncoding, e.Compression)
}

// checkEncoding returns an *EncodingError when out, the answer to a ranged
// read of obj's stored bytes, says they are compressed.
func checkEncoding(obj Object, out *s3.GetObjectOutput) error {
	enc := aws.ToString(out.ContentEncoding)
	if c := CompressionFromEncoding(enc); c != CompressionNone {
		return &EncodingError{Object: obj, ContentEncoding: enc, Compression: c}
	}
	return nil
}

// ReadError is a failure to read an object, with where it happened.
type ReadError struct {
	Object Object
	// Offset is the byte offset the read was at.
	Offset int64
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("dataset: read %s at offset %d: %v", e.Object, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *ReadError) Unwrap() error { return e.Err }

// GetAPI is the part of the S3 client that reads use. *s3.Client satisfies
// it.
type GetAPI interface {
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ GetAPI = (*s3.Client)(nil)

// get asks for bytes [start, end] of the pinned object (end < 0: to the
// end; start < 0: the whole object without a Range).
func get(ctx context.Context, client GetAPI, obj Object, start, end int64) (*s3.GetObjectOutput, error) {
	return send(ctx, client, obj, getInput(obj, start, end), start)
}

// send makes the GET in, of obj's bytes from start, and classifies its
// error.
func send(ctx context.Context, client GetAPI, obj Object, in *s3.GetObjectInput, start int64) (*s3.GetObjectOutput, error) {
	out, err := client.GetObject(ctx, in)
	if err != nil {
		return nil, &ReadError{Object: obj, Offset: max(start, 0), Err: classify(err)}
	}
	return out, nil
}

// getInput is the GET of bytes [start, end] of the pinned object (see get).
func getInput(obj Object, start, end int64) *s3.GetObjectInput {
	in := &s3.GetObjectInput{Bucket: aws.String(obj.Bucket), Key: aws.String(obj.Key)}
	switch {
	case obj.VersionID != "":
		in.VersionId = aws.String(obj.VersionID)
	case obj.ETag != "":
		in.IfMatch = aws.String(`"` + obj.ETag + `"`)
	}
	switch {
	case start < 0:
	case end < 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", start))
	default:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", start, end))
	}
	return in
}

// FirstInput is the GetObject input of the first GET that the Reader
// NewReader(ctx, client, obj, start, expect) makes, for a caller that opens
// that GET ahead, while something else is read, and answers the Reader's
// first GetObject with it (the Reader cannot tell). Later GETs of the
// Reader, and its resumes, are its own.
func FirstInput(obj Object, start, expect int64) *s3.GetObjectInput {
	if expect <= 0 {
		return getInput(obj, -1, -1)
	}
	end := start + max(expect, 64<<10) - 1
	if obj.Size > 0 && end >= obj.Size-1 {
		end = -1
	}
	return getInput(obj, start, end)
}

// classify wraps err with ErrChanged when S3 says the pin failed, or with
// ErrNotFound when it says the key or version is missing (a missing
// bucket stays as it is: a setting to fix, not an object gone).
func classify(err error) error {
	switch {
	case awserr.Classify(err) == awserr.Changed:
		return fmt.Errorf("%w: %w", ErrChanged, err)
	case awserr.Missing(err) == awserr.Key, awserr.Missing(err) == awserr.Version:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Reader reads a pinned object sequentially from an offset to its end,
// with ranged GETs: a first range of the expected length, then the rest as
// it is needed. A response body that breaks off (a reset, a short body, a
// stall) is resumed from the first byte not yet read, as Resume says. It is
// not safe for concurrent use.
//
// A Reader that starts with a range (expect > 0) reads the stored bytes as
// records: when S3 serves the object with a compressing Content-Encoding
// its first Read fails with an *EncodingError (in a *ReadError) instead.
// One that reads the whole object (expect <= 0) leaves the encoding to its
// caller (see ContentEncoding).
type Reader struct {
	// Resume says how a broken response is resumed; set it before the
	// first Read.
	Resume Resume

	ctx    context.Context
	client GetAPI
	obj    Object
	pos    int64
	next   int64 // length of the next range; 0 means to the end
	body   io.ReadCloser
	// rangeEnd is where the open response's bytes end.
	rangeEnd int64
	watch    *stallWatch
	tries    retries
	// Encoding is the Content-Encoding of the first response.
	encoding string
	opened   bool
}

// NewReader returns a Reader of obj from offset start. expect is how many
// bytes the caller expects to need; the first GET asks for that many (at
// least 64 KiB), and later ones for the rest of the object. expect <= 0
// reads the whole object in one GET, with no Range, as compressed objects
// need (a resumed read asks for the rest with a Range: the bytes are the
// same, so a decompressor above does not notice).
func NewReader(ctx context.Context, client GetAPI, obj Object, start, expect int64) *Reader {
	return &Reader{ctx: ctx, client: client, obj: obj, pos: start, next: expect}
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if r.opened && r.pos >= r.obj.Size {
				return 0, io.EOF
			}
			if err := r.open(); err != nil {
				if r.tries.again(r.ctx, r.Resume, err) {
					continue
				}
				return 0, err
			}
		}
		n, err := r.watch.read(r.body, p)
		r.pos += int64(n)
		if n > 0 {
			r.tries.progress()
		}
		if errors.Is(err, io.EOF) {
			r.closeBody()
			switch {
			case r.pos < r.rangeEnd:
				// The transport saw a clean end, but fewer bytes
				// than the response said it has.
				err = io.ErrUnexpectedEOF
			case n > 0:
				return n, nil
			case r.pos >= r.obj.Size:
				return 0, io.EOF
			default:
				continue
			}
		}
		if err != nil {
			r.closeBody()
			rerr := &ReadError{Object: r.obj, Offset: r.pos, Err: err}
			if !r.tries.again(r.ctx, r.Resume, rerr) {
				return n, rerr
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, nil
	}
}

func (r *Reader) open() error {
	// The first GET asks for a range of the stored bytes, unless it asks
	// for the whole object; later ones for the rest.
	ranged := !r.opened && r.next > 0
	in := FirstInput(r.obj, r.pos, r.next)
	if r.opened {
		in = getInput(r.obj, r.pos, -1)
	}
	out, err := send(r.ctx, r.client, r.obj, in, r.pos)
	if err != nil {
		return err
	}
	if ranged {
		// A whole read is not checked, nor are its resumed ranges: its
		// caller decodes what the encoding says.
		if err := checkEncoding(r.obj, out); err != nil {
			out.Body.Close()
			return &ReadError{Object: r.obj, Offset: r.pos, Err: err}
		}
	}
	r.next = 0 // the rest, when needed, in one range
	if !r.opened {
		r.encoding = aws.ToString(out.ContentEncoding)
		r.obj = pinETag(r.obj, out.ETag)
	}
	r.rangeEnd = max(r.obj.Size, r.pos)
	if out.ContentLength != nil {
		r.rangeEnd = r.pos + *out.ContentLength
	}
	r.opened = true
	r.body = out.Body
	r.watch = newStallWatch(r.Resume.stallTimeout(), out.Body)
	return nil
}

// pinETag pins an object that has neither version nor ETag to the ETag of
// its first response, so that a resumed read cannot splice two versions.
func pinETag(obj Object, etag *string) Object {
	if obj.VersionID == "" && obj.ETag == "" {
		obj.ETag = strings.Trim(aws.ToString(etag), `"`)
	}
	return obj
}

func (r *Reader) closeBody() {
	if r.body != nil {
		r.watch.stop()
		r.body.Close()
		r.body = nil
	}
}

// ContentEncoding returns the Content-Encoding S3 reported, once the first
// Read has been made.
func (r *Reader) ContentEncoding() string { return r.encoding }

// Close releases the open response, if any.
func (r *Reader) Close() error {
	if r.body == nil {
		return nil
	}
	r.watch.stop()
	err := r.body.Close()
	r.body = nil
	return err
}

// ReaderAt reads a pinned object at random offsets, one ranged GET per
// call (more when a response breaks off and is resumed, as Resume says),
// for formats such as Parquet that need it. It is safe for concurrent use.
type ReaderAt struct {
	// Resume says how a broken response is resumed; set it before the
	// first ReadAt.
	Resume Resume

	ctx    context.Context
	client GetAPI
	obj    Object
}

// NewReaderAt returns a ReaderAt of obj.
func NewReaderAt(ctx context.Context, client GetAPI, obj Object) *ReaderAt {
	return &ReaderAt{ctx: ctx, client: client, obj: obj}
}

// ReadAt implements io.ReaderAt.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		// As a corrupt Parquet footer's length can make it: never a GET
		// of the whole object.
		return 0, fmt.Errorf("dataset: read %s at negative offset %d", r.obj, off)
	}
	if off >= r.obj.Size {
		return 0, io.EOF
	}
	want := int(min(off+int64(len(p)), r.obj.Size) - off)
	var (
		n     int
		tries retries
	)
	for n < want {
		err := r.readRange(p[n:want], off+int64(n), &n)
		if err == nil {
			break
		}
		if !tries.again(r.ctx, r.Resume, err) {
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readRange reads p from offset off with one GET, adding what it read to
// *n, so that a caller can resume after it.
func (r *ReaderAt) readRange(p []byte, off int64, n *int) error {
	out, err := get(r.ctx, r.client, r.obj, off, off+int64(len(p))-1)
	if err != nil {
		return err
	}
	defer out.Body.Close()
	if err := checkEncoding(r.obj, out); err != nil {
		return &ReadError{Object: r.obj, Offset: off, Err: err}
	}
	w := newStallWatch(r.Resume.stallTimeout(), out.Body)
	defer w.stop()
	for got := 0; got < len(p); {
		m, err := w.read(out.Body, p[got:])
		got += m
		*n += m
		if err != nil && (got < len(p) || !errors.Is(err, io.EOF)) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return &ReadError{Object: r.obj, Offset: off + int64(got), Err: err}
		}
	}
	return nil
}
