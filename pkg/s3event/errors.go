package s3event

import (
	"fmt"
	"unicode/utf8"
)

// maxExcerpt is the most bytes of a body that an error quotes.
const maxExcerpt = 120

// MalformedError reports a body (or the Message inside an SNS envelope) that
// is not valid JSON. Err is the error of encoding/json.
type MalformedError struct {
	// In says where the JSON was read: "body" or "SNS Message".
	In string
	// Excerpt is the start of the text that failed, at most 120 bytes.
	Excerpt string
	// Err is the JSON decoder's error.
	Err error
}

// Error implements error.
func (e *MalformedError) Error() string {
	return fmt.Sprintf("s3event: malformed JSON in %s: %v; starts %q", e.In, e.Err, e.Excerpt)
}

// Unwrap returns the JSON decoder's error.
func (e *MalformedError) Unwrap() error { return e.Err }

// UnrecognizedError reports valid JSON that is none of the shapes this
// package reads: an S3 event, an s3:TestEvent, an EventBridge aws.s3 event,
// or one of those inside an SNS envelope.
type UnrecognizedError struct {
	// In says where the JSON was read: "body" or "SNS Message".
	In string
	// Found says what was there instead, for example
	// `an object with keys ["foo" "bar"]` or
	// `an EventBridge event from source "aws.ec2"`.
	Found string
	// Excerpt is the start of the text, at most 120 bytes.
	Excerpt string
}

// Error implements error.
func (e *UnrecognizedError) Error() string {
	return fmt.Sprintf("s3event: %s is not an S3 notification: found %s; starts %q", e.In, e.Found, e.Excerpt)
}

// RecordError reports one record of a notification that could not be read,
// for example because its key holds a malformed escape. The other records of
// the same notification are not affected.
type RecordError struct {
	// Index is the record's position in Records[]; 0 for an EventBridge
	// event, which names a single object.
	Index int
	// Bucket is the bucket named by the record, if any.
	Bucket string
	// RawKey is the key as it appeared in the notification, if any.
	RawKey string
	// Err says what is wrong.
	Err error
}

// Error implements error.
func (e *RecordError) Error() string {
	return fmt.Sprintf("s3event: record %d (bucket %q, key %q): %v", e.Index, e.Bucket, e.RawKey, e.Err)
}

// Unwrap returns the underlying error.
func (e *RecordError) Unwrap() error { return e.Err }

// excerpt returns the start of b, cut at a rune boundary, with "..." when
// something was left off.
func excerpt(b []byte) string {
	if len(b) <= maxExcerpt {
		return string(b)
	}
	n := maxExcerpt
	for n > maxExcerpt-utf8.UTFMax && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "..."
}
