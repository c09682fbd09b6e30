// Package csvrecord parses the records of delimited text (CSV, TSV) a
// line at a time, in a dialect: its delimiter, its quote character or no
// quoting at all, and how a quote is escaped inside a quoted field.
//
// With the default dialect it reads what encoding/csv reads with
// LazyQuotes and TrimLeadingSpace off (RFC 4180), except for line ends:
// a field that starts with the quote ends at a quote followed by the
// delimiter or the line's end, holds the quote doubled as one quote, and
// may hold delimiters and line ends, which it keeps as they were written
// ("\r\n", "\n" or "\r"; encoding/csv turns "\r\n" into "\n"). A quote
// anywhere else is an error. The caller splits lines and decides where
// they come from, and so what a bad record costs.
package csvrecord

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Dialect is how fields are delimited and quoted. The zero value is not
// usable: Comma must be set.
type Dialect struct {
	// Comma separates fields: the UTF-8 bytes of one character.
	Comma []byte
	// Quote quotes a field; 0 reads every field as written (no quoting).
	Quote byte
	// Escape, when not 0 or Quote, makes the byte after it literal inside
	// a quoted field (\" for a quote); else a quote inside a quoted field
	// is written twice.
	Escape byte
}

// ErrDialect is wrapped by Check's errors.
var ErrDialect = errors.New("csvrecord: dialect")

// Check reports a dialect whose characters cannot do their work: a
// delimiter, quote or escape that is a line end, is not valid UTF-8, or
// is the delimiter too; a quote or escape outside ASCII.
func (d Dialect) Check() error {
	r, n := utf8.DecodeRune(d.Comma)
	switch {
	case len(d.Comma) == 0 || n != len(d.Comma) || r == utf8.RuneError:
		return fmt.Errorf("%w: delimiter %q is not one character", ErrDialect, d.Comma)
	case r == '\r' || r == '\n':
		return fmt.Errorf("%w: delimiter %q is a line end", ErrDialect, r)
	case d.Quote != 0 && (d.Quote >= utf8.RuneSelf || d.Quote == '\r' || d.Quote == '\n' || string(d.Comma) == string(d.Quote)):
		return fmt.Errorf("%w: quote %q cannot quote fields delimited by %q", ErrDialect, d.Quote, d.Comma)
	case d.Escape != 0 && (d.Escape >= utf8.RuneSelf || d.Escape == '\r' || d.Escape == '\n' || string(d.Comma) == string(d.Escape)):
		return fmt.Errorf("%w: escape %q cannot escape in fields delimited by %q", ErrDialect, d.Escape, d.Comma)
	}
	return nil
}

// Parser parses one record, a line at a time. Its zero value is not
// usable: set Dialect.
type Parser struct {
	Dialect
	// buf holds the record's fields one after another; ends[i] is where
	// field i ends.
	buf  []byte
	ends []int
	// open is set while the last field is a quoted field that has not
	// ended: the record goes on on the next line. It opened at openLine,
	// column openCol.
	open              bool
	openLine, openCol int64
}

// Reset starts a new record.
func (p *Parser) Reset() {
	p.buf, p.ends, p.open = p.buf[:0], p.ends[:0], false
}

// Open reports whether the record goes on on the next line: a quoted
// field has not ended.
func (p *Parser) Open() bool { return p.open }

// Opened says where the open quoted field opened, for a message about the
// record that starts on line first.
func (p *Parser) Opened(first int64) string {
	if p.openLine == first {
		return fmt.Sprintf("at column %d", p.openCol)
	}
	return fmt.Sprintf("on line %d, column %d", p.openLine, p.openCol)
}

// Fields returns the number of fields parsed.
func (p *Parser) Fields() int { return len(p.ends) }

// Field returns field i; it is valid until the next Reset.
func (p *Parser) Field(i int) []byte {
	from := 0
	if i > 0 {
		from = p.ends[i-1]
	}
	return p.buf[from:p.ends[i]]
}

// Add parses the next line of the record, line number no, without its
// line end. eol is the line end of the line before (for a record that
// goes on, the line end its open quoted field holds). On error it returns
// the error, which wraps csv.ErrBareQuote or csv.ErrQuote, and the
// 1-based column of the quote at fault.
func (p *Parser) Add(line, eol []byte, no int64) (int, error) {
	i := 0
	quoted := p.open
	if quoted {
		p.buf = append(p.buf, eol...)
	}
	for {
		if !quoted {
			if p.Quote != 0 && i < len(line) && line[i] == p.Quote {
				quoted = true
				p.openLine, p.openCol = no, int64(i+1)
				i++
				continue
			}
			field := line[i:]
			j := bytes.Index(field, p.Comma)
			if j >= 0 {
				field = field[:j]
			}
			if p.Quote != 0 {
				if q := bytes.IndexByte(field, p.Quote); q >= 0 {
					return i + q + 1, csv.ErrBareQuote
				}
			}
			p.buf = append(p.buf, field...)
			p.ends = append(p.ends, len(p.buf))
			if j < 0 {
				p.open = false
				return 0, nil
			}
			i += j + len(p.Comma)
			continue
		}
		q := p.special(line[i:])
		if q < 0 {
			p.buf = append(p.buf, line[i:]...)
			p.open = true
			return 0, nil
		}
		p.buf = append(p.buf, line[i:i+q]...)
		i += q
		if line[i] != p.Quote {
			// The escape: the byte after it is literal. At the line's
			// end it escapes the line end, which the field keeps.
			i++
			if i == len(line) {
				p.open = true
				return 0, nil
			}
			p.buf = append(p.buf, line[i])
			i++
			continue
		}
		i++
		switch {
		case p.escapes() == p.Quote && i < len(line) && line[i] == p.Quote:
			p.buf = append(p.buf, p.Quote)
			i++
		case bytes.HasPrefix(line[i:], p.Comma):
			p.ends = append(p.ends, len(p.buf))
			i += len(p.Comma)
			quoted = false
		case i == len(line):
			p.ends = append(p.ends, len(p.buf))
			p.open = false
			return 0, nil
		default:
			return i, csv.ErrQuote
		}
	}
}

// escapes returns the byte that escapes a quote inside a quoted field:
// the quote itself (doubled) or the escape.
func (p *Parser) escapes() byte {
	if p.Escape == 0 {
		return p.Quote
	}
	return p.Escape
}

// special returns the index in s of the first quote, or escape, or -1.
func (p *Parser) special(s []byte) int {
	q := bytes.IndexByte(s, p.Quote)
	if p.Escape == 0 || p.Escape == p.Quote {
		return q
	}
	if e := bytes.IndexByte(s, p.Escape); e >= 0 && (q < 0 || e < q) {
		return e
	}
	return q
}
