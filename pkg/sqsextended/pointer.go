package sqsextended

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Names the format uses. They are the constants of the Java client
// (awslabs/amazon-sqs-java-extended-client-lib,
// src/main/java/com/amazon/sqs/javamessaging/SQSExtendedClientConstants.java
// and AmazonSQSExtendedClientUtil.java) and the Python client
// (awslabs/amazon-sqs-python-extended-client-lib,
// src/sqs_extended_client/client.py).
const (
	// SizeAttribute is the message attribute that marks an offloaded
	// message and holds the payload's size in bytes (data type Number).
	SizeAttribute = "ExtendedPayloadSize"
	// LegacySizeAttribute is the name older clients, and the Java client
	// by default, give to the same attribute.
	LegacySizeAttribute = "SQSLargePayloadSize"
	// PointerClass is the Java class name that opens a pointer body.
	PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"
	// LegacyPointerClass is the class name Java client 1.0 wrote.
	LegacyPointerClass = "com.amazon.sqs.javamessaging.MessageS3Pointer"
)

// AttributeNames returns the message attribute names a receiver must ask
// for (in ReceiveMessageInput.MessageAttributeNames) to tell offloaded
// messages apart, unless it asks for "All". It returns a new slice on every
// call.
func AttributeNames() []string {
	return []string{SizeAttribute, LegacySizeAttribute}
}

// Marked reports whether attrs, the message attributes of a received
// message, hold SizeAttribute or LegacySizeAttribute: whether the message's
// body is a pointer. It takes the attribute map of the SDK's
// types.Message as well as that of aws-lambda-go's events.SQSMessage.
func Marked[V any](attrs map[string]V) bool {
	_, ok := attrs[SizeAttribute]
	if !ok {
		_, ok = attrs[LegacySizeAttribute]
	}
	return ok
}

// Pointer names the S3 object that holds an offloaded message's payload.
// The zero Pointer names nothing.
type Pointer struct {
	// Bucket is the S3 bucket (s3BucketName).
	Bucket string
	// Key is the object key (s3Key).
	Key string
}

// String returns the pointer as an s3:// URI, for logs.
func (p Pointer) String() string { return "s3://" + p.Bucket + "/" + p.Key }

// Body returns the message body that the Java client writes for p, byte
// for byte:
//
//	["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"BUCKET","s3Key":"KEY"}]
//
// Strings are escaped as Jackson escapes them: '"' and '\' with a
// backslash, control characters as \b, \t, \n, \f, \r or \u00XX (upper-case
// hex), everything else written as UTF-8. Invalid UTF-8 is written as
// U+FFFD.
func (p Pointer) Body() string {
	b := make([]byte, 0, len(PointerClass)+len(p.Bucket)+len(p.Key)+36)
	b = append(b, '[')
	b = appendJSONString(b, PointerClass)
	b = append(b, `,{"s3BucketName":`...)
	b = appendJSONString(b, p.Bucket)
	b = append(b, `,"s3Key":`...)
	b = appendJSONString(b, p.Key)
	b = append(b, "}]"...)
	return string(b)
}

const upperHex = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string the way Jackson's generator
// writes it with its default settings (com.fasterxml.jackson.core.io.CharTypes:
// only '"', '\' and characters below U+0020 are escaped).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20:
				b = append(b, c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', upperHex[c>>4], upperHex[c&0xF])
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+w]...)
		}
		i += w
	}
	return append(b, '"')
}

// PointerError reports a body that is not a pointer in any form this
// package reads. [Resolver.Resolve] returns it for a message that carries
// the size attribute but no pointer: such a message cannot be read, and
// retrying will not change that.
type PointerError struct {
	// Reason says what was found instead.
	Reason string
	// Excerpt is the start of the body, at most 120 bytes.
	Excerpt string
}

// Error implements error.
func (e *PointerError) Error() string {
	return fmt.Sprintf("sqsextended: not an S3 pointer: %s; body starts %q", e.Reason, e.Excerpt)
}

const maxExcerpt = 120

func pointerError(body, format string, args ...any) *PointerError {
	ex := body
	if len(ex) > maxExcerpt {
		ex = ex[:maxExcerpt]
		for len(ex) > 0 && !utf8.ValidString(ex) {
			ex = ex[:len(ex)-1]
		}
	}
	return &PointerError{Reason: fmt.Sprintf(format, args...), Excerpt: ex}
}

// pointerFields are the fields of a pointer object. encoding/json matches
// names without regard to case, which reads the Json.NET spelling
// (S3BucketName, S3Key) too; unknown fields are ignored, as Jackson is told
// to (FAIL_ON_UNKNOWN_PROPERTIES false in JsonDataConverter.java).
type pointerFields struct {
	Bucket *string `json:"s3BucketName"`
	Key    *string `json:"s3Key"`
}

// ParsePointer reads a pointer body in any of the forms described in the
// package documentation: [PointerClass] or [LegacyPointerClass] followed by
// the object in a two-element array, or the bare object. Bucket and key
// must both be non-empty strings. Any other body yields a *PointerError.
// ParsePointer never panics.
func ParsePointer(body string) (Pointer, error) {
	data := bytes.TrimLeft([]byte(body), " \t\r\n")
	if len(data) == 0 {
		return Pointer{}, pointerError(body, "empty body")
	}
	obj := data
	switch data[0] {
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(data, &parts); err != nil {
			return Pointer{}, pointerError(body, "invalid JSON array: %v", err)
		}
		if len(parts) != 2 {
			return Pointer{}, pointerError(body, "an array of %d elements, want a class name and an object", len(parts))
		}
		var class string
		if err := json.Unmarshal(parts[0], &class); err != nil {
			return Pointer{}, pointerError(body, "the array does not start with a class name")
		}
		if class != PointerClass && class != LegacyPointerClass {
			return Pointer{}, pointerError(body, "class %q, want %s", class, PointerClass)
		}
		obj = parts[1]
	case '{':
	default:
		return Pointer{}, pointerError(body, "neither a JSON array nor an object")
	}
	if t := bytes.TrimLeft(obj, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Pointer{}, pointerError(body, "no pointer object")
	}
	var f pointerFields
	if err := json.Unmarshal(obj, &f); err != nil {
		return Pointer{}, pointerError(body, "invalid pointer object: %v", err)
	}
	if f.Bucket == nil || *f.Bucket == "" || f.Key == nil || *f.Key == "" {
		return Pointer{}, pointerError(body, "the object lacks a non-empty s3BucketName and s3Key")
	}
	return Pointer{Bucket: *f.Bucket, Key: *f.Key}, nil
}
