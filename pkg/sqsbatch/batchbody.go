package sqsbatch

import (
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

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

// Close does nothing: a body is read again for each attempt. With it a
// body is an io.ReadCloser, which net/http takes as it is.
func (b *batchBody) Close() error { return nil }

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
