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
// header. A row with the wrong number of fields is a RecordError with its
// line, and the rows after it are still read.
func readCSV(src io.Reader, c dataset.Chunk, start, end int64, max int, yield func(Record, error) bool) {
	header := c.CSV.Header
	w := &csvRow{header: header}
	emit := func(fields []string, off, line int64) bool {
		if len(header) > 0 && len(fields) != len(header) {
			err := &RecordError{Object: c.Object, Offset: off, Line: line,
				Err: fmt.Errorf("CSV row has %d fields, the header %d", len(fields), len(header))}
			return yield(Record{}, err)
		}
		return yield(Record{Offset: off, Line: line, Value: w.json(fields)}, nil)
	}
	skipHeader := c.CSV != nil && c.CSV.SkipFirstLine && start == 0

	if start == 0 && end == endless || c.Whole() {
		// The whole object as one stream: quoted fields may hold newlines.
		cr := csv.NewReader(src)
		cr.Comma = c.CSV.Comma()
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		for first := true; ; first = false {
			off := cr.InputOffset()
			fields, err := cr.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) {
					// The rest of the stream cannot be framed reliably, so
					// this ends the chunk: a ReadError, not a RecordError.
					yield(Record{}, &dataset.ReadError{Object: c.Object, Offset: off, Err: fmt.Errorf("CSV line %d: %w", pe.StartLine, err)})
					return
				}
				yield(Record{}, &dataset.ReadError{Object: c.Object, Offset: off, Err: err})
				return
			}
			if first && skipHeader {
				continue
			}
			// Only now: FieldPos panics when a row failed before its first
			// field.
			line, _ := cr.FieldPos(0)
			if !emit(fields, off, int64(line)) {
				return
			}
		}
	}

	// Split at line boundaries, as the caller promised that no quoted field
	// holds a newline.
	readLines(newSplitter(src, c, start, end, max), false, func(r Record, err error) bool {
		if err != nil {
			return yield(Record{}, err)
		}
		if skipHeader && r.Offset == 0 {
			return true
		}
		cr := csv.NewReader(bytes.NewReader(r.Value))
		cr.Comma = c.CSV.Comma()
		cr.FieldsPerRecord = -1
		fields, err := cr.Read()
		if err != nil {
			return yield(Record{}, &RecordError{Object: c.Object, Offset: r.Offset, Line: r.Line, Err: err})
		}
		return emit(fields, r.Offset, r.Line)
	})
}

// csvRow turns rows into JSON objects, reusing its buffer.
type csvRow struct {
	header []string
	buf    []byte
}

func (w *csvRow) json(fields []string) []byte {
	b := append(w.buf[:0], '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		name := dataset.ColumnName(i)
		if i < len(w.header) {
			name = w.header[i]
		}
		b = appendString(b, name)
		b = append(b, ':')
		b = appendString(b, f)
	}
	b = append(b, '}')
	w.buf = b
	return b
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString(b []byte, s string) []byte {
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
	q, err := json.Marshal(s)
	if err != nil {
		return strconv.AppendQuote(b, s)
	}
	return append(b, q...)
}
