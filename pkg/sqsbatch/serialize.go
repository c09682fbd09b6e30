package sqsbatch

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// exactBodies is the client option of every SendMessageBatch the Sender
// makes: the request's JSON is written into one buffer of its exact size,
// and the MD5 of each accepted body is checked without copying the body,
// entry by entry (see bodyChecksums). The SDK's own encoder grows its buffer as it writes (by a quarter at a
// time once a body holds a character it escapes, as JSON records do: about
// five times a request's size in garbage) and then copies it, and its MD5
// check copies each body again; with requests of up to a MiB in flight,
// that was most of a run's memory.
func exactBodies(o *sqs.Options) {
	// Only SQS's JSON protocol: the body written is its JSON, and under
	// another protocol the SDK's own serializer stays.
	if o.Protocol != nil && o.Protocol.ID() == awsJSON10 {
		o.Protocol = exactBatchProtocol{o.Protocol}
	}
	if !o.DisableMessageChecksumValidation {
		o.DisableMessageChecksumValidation = true
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(bodyChecksums{}, middleware.Before)
		})
	}
}

// awsJSON10 is the protocol whose SendMessageBatch body batchBody writes.
var awsJSON10 = smithy.ShapeID{Namespace: "aws.protocols", Name: "awsJson1_0"}

// bodyChecksums checks, as the SDK does when its own check is on, that
// SQS's MD5 of each accepted body is the MD5 of the body sent. Where the
// SDK fails the whole call, which would report every entry of the request
// failed although SQS accepted the others, an entry whose MD5 does not
// match is moved from the answer's Successful to its Failed entries with
// code CodeMD5Mismatch, not the sender's fault: the Sender retries it as
// it retries a throttled entry, and counts the others accepted.
type bodyChecksums struct{}

func (bodyChecksums) ID() string { return "SQSBatchBodyChecksums" }

func (bodyChecksums) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	out, meta, err := next.HandleInitialize(ctx, in)
	if err != nil {
		return out, meta, err
	}
	input, ok1 := in.Parameters.(*sqs.SendMessageBatchInput)
	output, ok2 := out.Result.(*sqs.SendMessageBatchOutput)
	if !ok1 || !ok2 {
		return out, meta, nil
	}
	bodies := make(map[string]*string, len(input.Entries))
	for i := range input.Entries {
		if id := input.Entries[i].Id; id != nil {
			bodies[*id] = input.Entries[i].MessageBody
		}
	}
	accepted := output.Successful[:0]
	for _, ok := range output.Successful {
		body := bodies[aws.ToString(ok.Id)]
		if body == nil || ok.MD5OfMessageBody == nil {
			accepted = append(accepted, ok)
			continue
		}
		if sum := md5Hex(*body); sum != *ok.MD5OfMessageBody {
			output.Failed = append(output.Failed, types.BatchResultErrorEntry{
				Id:   ok.Id,
				Code: aws.String(CodeMD5Mismatch),
				Message: aws.String(fmt.Sprintf("SQS answered MD5 %s for message %s, but the body sent has MD5 %s",
					*ok.MD5OfMessageBody, aws.ToString(ok.MessageId), sum)),
			})
			continue
		}
		accepted = append(accepted, ok)
	}
	output.Successful = accepted
	return out, meta, nil
}

// md5Hex returns the MD5 of s in hex, copying s a little at a time.
func md5Hex(s string) string {
	h := md5.New()
	var buf [8 << 10]byte
	for len(s) > 0 {
		n := copy(buf[:], s)
		h.Write(buf[:n])
		s = s[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// exactBatchProtocol is the client's protocol, but for the bodies of
// SendMessageBatch requests, which it writes itself (see batchBody).
// Headers, signing, answers and every other operation are the protocol's.
type exactBatchProtocol struct {
	smithyhttp.ClientProtocol
}

// SerializeRequest lets the protocol build the request of an empty input
// (its method, path and headers), then sets the body to the input's JSON.
func (p exactBatchProtocol) SerializeRequest(ctx context.Context, schema *smithy.OperationSchema, in smithy.Serializable, req *smithyhttp.Request) error {
	batch, ok := in.(*sqs.SendMessageBatchInput)
	if !ok || !plainEntries(batch.Entries) {
		return p.ClientProtocol.SerializeRequest(ctx, schema, in, req)
	}
	if err := p.ClientProtocol.SerializeRequest(ctx, schema, &sqs.SendMessageBatchInput{}, req); err != nil {
		return err
	}
	sreq, err := req.SetStream(newBatchBody(batch))
	if err != nil {
		return err
	}
	*req = *sreq
	return nil
}

// plainEntries reports whether entries use only the members the Sender
// sets, which batchBody writes; others go through the SDK.
func plainEntries(entries []types.SendMessageBatchRequestEntry) bool {
	for i := range entries {
		if entries[i].MessageSystemAttributes != nil {
			return false
		}
		for _, a := range entries[i].MessageAttributes {
			if a.StringListValues != nil || a.BinaryListValues != nil {
				return false
			}
		}
	}
	return true
}

// streamMin is the shortest string a batchBody escapes as it is read
// rather than copies.
const streamMin = 4 << 10

// batchBody is the JSON of a SendMessageBatch request as the SDK writes it
// (members in the same order, unset members left out, strings escaped the
// same way), produced as it is read: message bodies and other long strings
// are escaped from the entries' own strings, so that a request holds no
// copy of what it carries. It reads twice per attempt (for the SigV4
// payload hash, then to send) and seeks only to its start and end, which
// is what the SDK does with a request body.
type batchBody struct {
	parts []bodyPart
	size  int64

	pos     int64
	part    int    // the part being read
	off     int    // in the part's lit or str
	pending []byte // the rest of an escape sequence cut by the end of a Read
	seq     [6]byte
}

// bodyPart is lit, written as it is, or str, written escaped without its
// quotes (which are in the lits around it).
type bodyPart struct {
	lit []byte
	str string
}

func newBatchBody(in *sqs.SendMessageBatchInput) *batchBody {
	w := &bodyWriter{lit: make([]byte, 0, litSize(in))}
	w.raw("{")
	if in.Entries != nil {
		w.raw(`"Entries":[`)
		for i := range in.Entries {
			if i > 0 {
				w.raw(",")
			}
			w.entry(&in.Entries[i])
		}
		w.raw("]")
	}
	if in.QueueUrl != nil {
		if in.Entries != nil {
			w.raw(",")
		}
		w.raw(`"QueueUrl":`)
		w.str(*in.QueueUrl)
	}
	w.raw("}")
	return w.body()
}

// litSize is about the size of the parts of in that are copied: the
// strings shorter than streamMin, before escaping, and the JSON around
// them.
func litSize(in *sqs.SendMessageBatchInput) int {
	short := func(s *string) int {
		if s == nil || len(*s) >= streamMin {
			return 0
		}
		return len(*s)
	}
	n := 64 + short(in.QueueUrl)
	for i := range in.Entries {
		e := &in.Entries[i]
		n += 160 + short(e.Id) + short(e.MessageBody) + short(e.MessageGroupId) + short(e.MessageDeduplicationId)
		for name, a := range e.MessageAttributes {
			n += 48 + len(name) + short(a.DataType) + short(a.StringValue) + base64.StdEncoding.EncodedLen(len(a.BinaryValue))
		}
	}
	return n
}

// bodyWriter gathers the parts of a batchBody.
type bodyWriter struct {
	parts []bodyPart
	lit   []byte
	size  int64
}

func (w *bodyWriter) raw(s string) { w.lit = append(w.lit, s...) }

// str writes s as a quoted JSON string.
func (w *bodyWriter) str(s string) {
	if len(s) < streamMin {
		w.lit = appendJSONString(w.lit, s)
		return
	}
	w.raw(`"`)
	w.flush()
	w.parts = append(w.parts, bodyPart{str: s})
	w.size += int64(jsonStringLen(s) - 2)
	w.raw(`"`)
}

func (w *bodyWriter) flush() {
	if len(w.lit) > 0 {
		w.parts = append(w.parts, bodyPart{lit: w.lit})
		w.size += int64(len(w.lit))
		w.lit = nil
	}
}

func (w *bodyWriter) body() *batchBody {
	w.flush()
	return &batchBody{parts: w.parts, size: w.size}
}

// members writes the members of an object: member(name) before each value.
func (w *bodyWriter) members() func(name string) {
	comma := false
	return func(name string) {
		if comma {
			w.raw(",")
		}
		comma = true
		w.raw(`"` + name + `":`)
	}
}

func (w *bodyWriter) entry(e *types.SendMessageBatchRequestEntry) {
	w.raw("{")
	member := w.members()
	if e.DelaySeconds != 0 {
		member("DelaySeconds")
		w.lit = strconv.AppendInt(w.lit, int64(e.DelaySeconds), 10)
	}
	if e.Id != nil {
		member("Id")
		w.str(*e.Id)
	}
	if e.MessageAttributes != nil {
		member("MessageAttributes")
		w.raw("{")
		first := true
		for name, a := range e.MessageAttributes {
			if !first {
				w.raw(",")
			}
			first = false
			w.str(name)
			w.raw(":")
			w.attribute(&a)
		}
		w.raw("}")
	}
	if e.MessageBody != nil {
		member("MessageBody")
		w.str(*e.MessageBody)
	}
	if e.MessageDeduplicationId != nil {
		member("MessageDeduplicationId")
		w.str(*e.MessageDeduplicationId)
	}
	if e.MessageGroupId != nil {
		member("MessageGroupId")
		w.str(*e.MessageGroupId)
	}
	w.raw("}")
}

func (w *bodyWriter) attribute(a *types.MessageAttributeValue) {
	w.raw("{")
	member := w.members()
	if a.BinaryValue != nil {
		member("BinaryValue")
		w.raw(`"`)
		w.lit = base64.StdEncoding.AppendEncode(w.lit, a.BinaryValue)
		w.raw(`"`)
	}
	if a.DataType != nil {
		member("DataType")
		w.str(*a.DataType)
	}
	if a.StringValue != nil {
		member("StringValue")
		w.str(*a.StringValue)
	}
	w.raw("}")
}

// Read reads the JSON on from where it is.
func (b *batchBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(b.pending) > 0 {
			c := copy(p[n:], b.pending)
			b.pending = b.pending[c:]
			n += c
			continue
		}
		if b.part == len(b.parts) {
			break
		}
		pt := &b.parts[b.part]
		if pt.lit != nil {
			c := copy(p[n:], pt.lit[b.off:])
			b.off += c
			n += c
			if b.off == len(pt.lit) {
				b.part, b.off = b.part+1, 0
			}
			continue
		}
		n += b.escape(p[n:], pt.str)
		if b.off == len(pt.str) {
			b.part, b.off = b.part+1, 0
		}
	}
	b.pos += int64(n)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// escape writes into dst the escaped s from b.off on, as much as fits (an
// escape sequence that does not fit whole is finished by the next Read),
// advances b.off and returns the bytes written.
func (b *batchBody) escape(dst []byte, s string) int {
	n := 0
	for n < len(dst) && b.off < len(s) {
		// The run of bytes written as they are.
		i := b.off
		for i < len(s) && i-b.off < len(dst)-n {
			c := s[i]
			if c < utf8.RuneSelf {
				if jsonEscapes[c] != 0 {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' || i+size-b.off > len(dst)-n {
				break
			}
			i += size
		}
		if i > b.off {
			n += copy(dst[n:], s[b.off:i])
			b.off = i
			continue
		}
		// An escape, or a character cut by the end of dst: written as a
		// sequence, through pending when it does not fit.
		seq, size := b.sequence(s[b.off:])
		b.off += size
		c := copy(dst[n:], seq)
		n += c
		b.pending = seq[c:]
	}
	return n
}

// sequence returns how the character at the start of s is written, and
// its length in s.
func (b *batchBody) sequence(s string) ([]byte, int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch esc := jsonEscapes[c]; esc {
		case 0:
			b.seq[0] = c
			return b.seq[:1], 1
		case 'u':
			b.seq = [6]byte{'\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf]}
			return b.seq[:6], 1
		default:
			b.seq[0], b.seq[1] = '\\', esc
			return b.seq[:2], 1
		}
	}
	r, size := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return append(b.seq[:0], "\ufffd"...), 1
	case r == '\u2028' || r == '\u2029':
		b.seq = [6]byte{'\\', 'u', '2', '0', '2', hexDigits[r&0xf]}
		return b.seq[:6], size
	}
	return append(b.seq[:0], s[:size]...), size
}

// Len returns the bytes not yet read.
func (b *batchBody) Len() int { return int(max(0, b.size-b.pos)) }

// Seek moves to offset. The SDK seeks only to the start and the end;
// elsewhere the body is read again from its start.
func (b *batchBody) Seek(offset int64, whence int) (int64, error) {
	to := offset
	switch whence {
	case io.SeekCurrent:
		to += b.pos
	case io.SeekEnd:
		to += b.size
	}
	if to < 0 {
		return b.pos, fmt.Errorf("sqsbatch: request body: seek to %d", to)
	}
	if to < b.pos {
		b.pos, b.part, b.off, b.pending = 0, 0, 0, nil
	}
	if to >= b.size {
		b.pos, b.part, b.off, b.pending = to, len(b.parts), 0, nil
		return to, nil
	}
	_, err := io.CopyN(io.Discard, b, to-b.pos)
	return b.pos, err
}

// jsonEscapes says how an ASCII byte is written in a JSON string: 0 as
// itself, 'u' as \u00XX, another letter as a backslash and that letter.
var jsonEscapes = func() (t [utf8.RuneSelf]byte) {
	for c := range 0x20 {
		t[c] = 'u'
	}
	t['"'], t['\\'] = '"', '\\'
	t['\n'], t['\r'], t['\t'] = 'n', 'r', 't'
	t[0x7f] = 'u'
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string, escaped as the SDK
// escapes it: invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029 are
// escaped as well.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			esc := jsonEscapes[c]
			if esc == 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if esc == 'u' {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, '\\', esc)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch jsonEscapes[c] {
			case 0:
			case 'u':
				n += 5
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len("\ufffd") - 1
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}
