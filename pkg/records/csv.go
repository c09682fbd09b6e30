package records

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// readCSV yields each row of a CSV chunk as a JSON object keyed by the
// header. A row that is not valid CSV, or has the wrong number of fields,
// is a RecordError at the line where it starts, and the rows after it are
// still read (the package doc gives the rule).
func readCSV(src io.Reader, c dataset.Chunk, start, end int64, max int, yield func(Record, error) bool) {
	comma := c.CSV.Comma()
	if !validComma(comma) {
		yield(Record{}, fmt.Errorf("records: %s: %q cannot delimit CSV fields", c.Object, comma))
		return
	}
	r := &csvReader{obj: c.Object, p: csvParser{comma: utf8.AppendRune(nil, comma)}}
	if c.CSV != nil {
		r.header = c.CSV.Header
		r.skipHeader = c.CSV.SkipFirstLine && start == 0
	}
	s := newSplitter(src, c, start, end, max)
	if end == endless {
		// The whole object as one stream: quoted fields may hold newlines.
		r.whole(s, yield)
		return
	}
	// Split at line boundaries, as the caller promised that no quoted field
	// holds a newline.
	readLines(s, false, func(rec Record, err error) bool {
		if err != nil {
			return yield(Record{}, err)
		}
		if r.skipHeader && rec.Offset == 0 {
			return true
		}
		r.p.reset()
		col, err := r.p.add(rec.Value, rec.Line)
		if err == nil && r.p.open {
			err = fmt.Errorf("CSV %w: the quoted field that opens at column %d does not end on its line, and this CSV is split at line ends (no quoted newlines)",
				csv.ErrQuote, r.p.openCol)
		} else if err != nil {
			err = fmt.Errorf("CSV %w (column %d)", err, col)
		}
		if err != nil {
			return yield(Record{}, &RecordError{Object: r.obj, Offset: rec.Offset, Line: rec.Line, Err: err})
		}
		return r.emit(rec.Offset, rec.Line, yield)
	})
}

// validComma reports whether r can delimit fields, as encoding/csv says.
func validComma(r rune) bool {
	return r != '"' && r != '\r' && r != '\n' && utf8.ValidRune(r) && r != utf8.RuneError
}

// csvReader frames and parses the rows of one CSV chunk.
type csvReader struct {
	obj        dataset.Object
	header     []string
	skipHeader bool
	p          csvParser
	json       []byte
}

// csvLine is a line of a CSV stream, without its line ending.
type csvLine struct {
	off, no int64
	text    []byte
	tooLong bool
}

// csvLines hands out the lines of a whole stream: those to frame again
// first, then the stream's next ones.
type csvLines struct {
	s *splitter
	// pending are the lines to frame again before reading on.
	pending []csvLine
	no      int64
}

// next returns the next line; with keep, one that outlives the next read.
func (ls *csvLines) next(keep bool) (csvLine, bool) {
	if len(ls.pending) > 0 {
		l := ls.pending[0]
		ls.pending = ls.pending[1:]
		return l, true
	}
	s := ls.s
	off := s.pos
	text, tooLong, err := s.readLine(false)
	if err != nil && (!errors.Is(err, io.EOF) || len(text) == 0 && !tooLong) {
		s.setErr(err)
		return csvLine{}, false
	}
	ls.no++
	text = bytes.TrimSuffix(text, []byte{'\r'})
	if off == 0 {
		text = bytes.TrimPrefix(text, utf8BOM)
	}
	if keep {
		text = bytes.Clone(text)
	}
	return csvLine{off: off, no: ls.no, text: text, tooLong: tooLong}, true
}

// whole reads a whole stream, in which a record runs over several lines
// while a quoted field is open. A record that fails is its first line
// alone: the lines after it are framed again, from the next line.
func (r *csvReader) whole(s *splitter, yield func(Record, error) bool) {
	// held keeps the lines after the first of the record being read.
	var held []csvLine
	lines := &csvLines{s: s}
	for {
		first, ok := lines.next(false)
		if !ok {
			if s.err != nil {
				yield(Record{}, s.err)
			}
			return
		}
		var err error
		switch {
		case first.tooLong:
			err = fmt.Errorf("%w (%d bytes)", ErrTooLong, s.max)
		case len(bytes.TrimSpace(first.text)) == 0:
			continue // a blank line, as in a chunked read
		case r.skipHeader && first.off == 0:
			continue
		default:
			r.p.reset()
			var col int
			if col, err = r.p.add(first.text, first.no); err != nil {
				err = fmt.Errorf("CSV %w (column %d)", err, col)
			}
		}
		size := len(first.text)
		for err == nil && r.p.open {
			l, ok := lines.next(true)
			if !ok {
				if s.err != nil {
					yield(Record{}, s.err)
					return
				}
				err = fmt.Errorf("CSV %w: the quoted field that opens %s does not end before the end of the object",
					csv.ErrQuote, r.p.opened(first.no))
				break
			}
			held = append(held, l)
			size += 1 + len(l.text)
			if l.tooLong || size > s.max {
				err = fmt.Errorf("%w (%d bytes): the quoted field that opens %s does not end within it",
					ErrTooLong, s.max, r.p.opened(first.no))
				break
			}
			if col, perr := r.p.add(l.text, l.no); perr != nil {
				err = fmt.Errorf("CSV %w (line %d, column %d, in the record that starts on line %d)", perr, l.no, col, first.no)
			}
		}
		if err != nil {
			// The lines after the first are read again as records of
			// their own.
			lines.pending = append(held, lines.pending...)
			held = nil
			if !yield(Record{}, &RecordError{Object: r.obj, Offset: first.off, Line: first.no, Err: err}) {
				return
			}
			continue
		}
		held = held[:0]
		if !r.emit(first.off, first.no, yield) {
			return
		}
	}
}

// emit yields the parsed row at off as a JSON object, or a RecordError when
// its fields do not match the header.
func (r *csvReader) emit(off, line int64, yield func(Record, error) bool) bool {
	n := len(r.p.ends)
	if len(r.header) > 0 && n != len(r.header) {
		err := &RecordError{Object: r.obj, Offset: off, Line: line,
			Err: fmt.Errorf("CSV row has %d fields, the header %d", n, len(r.header))}
		return yield(Record{}, err)
	}
	b := append(r.json[:0], '{')
	from := 0
	for i, to := range r.p.ends {
		if i > 0 {
			b = append(b, ',')
		}
		if i < len(r.header) {
			b = appendString(b, r.header[i])
		} else {
			b = appendString(b, dataset.ColumnName(i))
		}
		b = append(b, ':')
		b = appendString(b, r.p.buf[from:to])
		from = to
	}
	b = append(b, '}')
	r.json = b
	return yield(Record{Offset: off, Line: line, Value: b}, nil)
}

// csvParser parses a record a line at a time, by the grammar encoding/csv
// reads with LazyQuotes and TrimLeadingSpace off (RFC 4180): a field that
// starts with a quote ends at a quote followed by the delimiter or the
// line's end, holds "" as a quote, and may hold delimiters and newlines; a
// quote anywhere else is an error. Its caller decides where lines come
// from, and so what a bad record costs.
type csvParser struct {
	comma []byte
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

// opened says where the open quoted field opened, for a message about
// the record that starts on line first.
func (p *csvParser) opened(first int64) string {
	if p.openLine == first {
		return fmt.Sprintf("at column %d", p.openCol)
	}
	return fmt.Sprintf("on line %d, column %d", p.openLine, p.openCol)
}

func (p *csvParser) reset() {
	p.buf, p.ends, p.open = p.buf[:0], p.ends[:0], false
}

// add parses the next line of the record (without its line ending), its
// line number no. On error it returns the error and the 1-based column
// of the quote at fault.
func (p *csvParser) add(line []byte, no int64) (int, error) {
	i := 0
	quoted := p.open
	if quoted {
		p.buf = append(p.buf, '\n')
	}
	for {
		if !quoted {
			if i < len(line) && line[i] == '"' {
				quoted = true
				p.openLine, p.openCol = no, int64(i+1)
				i++
				continue
			}
			field := line[i:]
			j := bytes.Index(field, p.comma)
			if j >= 0 {
				field = field[:j]
			}
			if q := bytes.IndexByte(field, '"'); q >= 0 {
				return i + q + 1, csv.ErrBareQuote
			}
			p.buf = append(p.buf, field...)
			p.ends = append(p.ends, len(p.buf))
			if j < 0 {
				p.open = false
				return 0, nil
			}
			i += j + len(p.comma)
			continue
		}
		q := bytes.IndexByte(line[i:], '"')
		if q < 0 {
			p.buf = append(p.buf, line[i:]...)
			p.open = true
			return 0, nil
		}
		p.buf = append(p.buf, line[i:i+q]...)
		i += q + 1
		switch {
		case i < len(line) && line[i] == '"':
			p.buf = append(p.buf, '"')
			i++
		case bytes.HasPrefix(line[i:], p.comma):
			p.ends = append(p.ends, len(p.buf))
			i += len(p.comma)
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

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString[T string | []byte](b []byte, s T) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(string(s))
	if err != nil {
		return strconv.AppendQuote(b, string(s))
	}
	return append(b, q...)
}
