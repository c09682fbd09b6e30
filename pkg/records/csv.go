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

	"github.com/s3sqs/s3sqs/pkg/csvrecord"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// readCSV yields each row of a CSV chunk as a JSON object keyed by the
// header. A row that is not valid CSV, or has the wrong number of fields,
// is a RecordError at the line where it starts, and the rows after it are
// still read (the package doc gives the rule).
func readCSV(src io.Reader, c dataset.Chunk, start, end int64, max int, yield func(Record, error) bool) {
	d := csvrecord.Dialect{Comma: utf8.AppendRune(nil, c.CSV.Comma()), Quote: c.CSV.QuoteChar(), Escape: c.CSV.EscapeChar()}
	if err := d.Check(); err != nil {
		yield(Record{}, fmt.Errorf("records: %s: %w", c.Object, err))
		return
	}
	r := &csvReader{obj: c.Object, p: csvrecord.Parser{Dialect: d}}
	if c.CSV != nil {
		r.header = c.CSV.Header
		r.skipHeader = c.CSV.SkipFirstLine && start == 0
		r.headerFirst = c.CSV.HeaderFirst && start == 0
	}
	s := newSplitter(src, c, start, end, max)
	s.cr = true
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
		r.p.Reset()
		col, err := r.p.Add(rec.Value, nil, rec.Line)
		if err == nil && r.p.Open() {
			err = fmt.Errorf("CSV %w: the quoted field that opens %s does not end on its line, and this CSV is split at line ends (no quoted newlines)",
				csv.ErrQuote, r.p.Opened(rec.Line))
		} else if err != nil {
			err = fmt.Errorf("CSV %w (column %d)", err, col)
		}
		if err != nil {
			return yield(Record{}, &RecordError{Object: r.obj, Offset: rec.Offset, Line: rec.Line, Err: err})
		}
		return r.emit(rec.Offset, rec.Line, yield)
	})
}

// csvReader frames and parses the rows of one CSV chunk.
type csvReader struct {
	obj        dataset.Object
	header     []string
	skipHeader bool
	// headerFirst says the first record is the header, not yet read.
	headerFirst bool
	p           csvrecord.Parser
	json        []byte
}

// csvLine is a line of a CSV stream, without its line ending (eol).
type csvLine struct {
	off, no   int64
	text, eol []byte
	tooLong   bool
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
	if off == 0 {
		text = bytes.TrimPrefix(text, utf8BOM)
	}
	if keep {
		text = bytes.Clone(text)
	}
	return csvLine{off: off, no: ls.no, text: text, eol: s.eol, tooLong: tooLong}, true
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
			r.p.Reset()
			var col int
			if col, err = r.p.Add(first.text, nil, first.no); err != nil {
				err = fmt.Errorf("CSV %w (column %d)", err, col)
			}
		}
		if err == nil && r.p.Open() {
			held, err = r.rest(lines, first, held)
			if err == nil && s.err != nil {
				yield(Record{}, s.err)
				return
			}
		}
		if err == nil && r.headerFirst {
			// The object's first record names the columns.
			r.headerFirst = false
			r.header = make([]string, r.p.Fields())
			for i := range r.header {
				r.header[i] = string(r.p.Field(i))
			}
			r.header = dataset.UniqueColumns(r.header)
			held = held[:0]
			continue
		}
		if err != nil {
			if r.headerFirst {
				// Without its header no row can be read: the object fails
				// here, with the header's error.
				yield(Record{}, &dataset.ReadError{Object: r.obj, Offset: first.off, Err: fmt.Errorf("%w: CSV header on line %d: %w", dataset.ErrCorrupt, first.no, err)})
				return
			}
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

// rest reads the lines of the record that starts with first, while a
// quoted field is open, into held. A stream that fails ends it with s.err
// set and no error.
func (r *csvReader) rest(lines *csvLines, first csvLine, held []csvLine) ([]csvLine, error) {
	s := lines.s
	size := len(first.text)
	eol := first.eol
	for r.p.Open() {
		l, ok := lines.next(true)
		if !ok {
			if s.err != nil {
				return held, nil
			}
			return held, fmt.Errorf("CSV %w: the quoted field that opens %s does not end before the end of the object",
				csv.ErrQuote, r.p.Opened(first.no))
		}
		held = append(held, l)
		size += len(eol) + len(l.text)
		if l.tooLong || size > s.max {
			return held, fmt.Errorf("%w (%d bytes): the quoted field that opens %s does not end within it",
				ErrTooLong, s.max, r.p.Opened(first.no))
		}
		if col, err := r.p.Add(l.text, eol, l.no); err != nil {
			return held, fmt.Errorf("CSV %w (line %d, column %d, in the record that starts on line %d)", err, l.no, col, first.no)
		}
		eol = l.eol
	}
	return held, nil
}

// emit yields the parsed row at off as a JSON object, or a RecordError when
// its fields do not match the header.
func (r *csvReader) emit(off, line int64, yield func(Record, error) bool) bool {
	n := r.p.Fields()
	if len(r.header) > 0 && n != len(r.header) {
		err := &RecordError{Object: r.obj, Offset: off, Line: line,
			Err: fmt.Errorf("CSV row has %d fields, the header %d", n, len(r.header))}
		return yield(Record{}, err)
	}
	b := append(r.json[:0], '{')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if i < len(r.header) {
			b = appendString(b, r.header[i])
		} else {
			b = appendString(b, dataset.ColumnName(i))
		}
		b = append(b, ':')
		b = appendString(b, r.p.Field(i))
	}
	b = append(b, '}')
	r.json = b
	return yield(Record{Offset: off, Line: line, Value: b}, nil)
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
