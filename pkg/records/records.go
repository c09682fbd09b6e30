package records

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/internal/jsonfields"
)

// DefaultMaxRecordSize is the record size limit used when
// Options.MaxRecordSize is zero.
const DefaultMaxRecordSize = 8 << 20

// readBufferSize is the buffer of the line splitter.
const readBufferSize = 256 << 10

// Record is one record of a chunk.
type Record struct {
	// Offset is the position in the object of the line where the record
	// starts (in the decompressed stream of a compressed object; 0 for the
	// first line, byte order mark or not), or for Parquet the row's number
	// in the file. With the object's pin it identifies the record.
	Offset int64
	// Line is the record's line number, from 1, when it is known: in a
	// chunk that starts at the beginning of its object.
	Line int64
	// Value is the record: a JSON value for JSON Lines, CSV and Parquet,
	// the line itself for text. It is valid until the next record is read.
	Value []byte
}

// RecordError is a record that could not be read. Reading goes on after it.
type RecordError struct {
	Object dataset.Object
	Offset int64
	// Line is the line number, from 1, when known.
	Line int64
	Err  error
}

func (e *RecordError) Error() string {
	at := fmt.Sprintf("offset %d", e.Offset)
	if e.Line > 0 {
		at += fmt.Sprintf(" (line %d)", e.Line)
	}
	return fmt.Sprintf("records: %s at %s: %v", e.Object, at, e.Err)
}

// Unwrap returns the underlying error.
func (e *RecordError) Unwrap() error { return e.Err }

// ErrTooLong is wrapped by the RecordError of a record over the size limit.
var ErrTooLong = errors.New("record is longer than the limit")

// utf8BOM is the UTF-8 byte order mark that Excel and other Windows tools
// write first in a file. It is not part of the first record.
var utf8BOM = []byte("\xef\xbb\xbf")

// ErrNotJSON is wrapped by the RecordError of a JSON Lines record that is
// not valid JSON.
var ErrNotJSON = errors.New("record is not valid JSON")

// Options configures reading. The zero value is ready to use.
type Options struct {
	// MaxRecordSize bounds a record's size in bytes; zero means
	// DefaultMaxRecordSize. A longer record is a RecordError.
	MaxRecordSize int
}

// Read yields the records of chunk c, reading with client. A
// *RecordError is yielded in place of a record that cannot be read, and
// reading goes on; any other error is yielded last.
func Read(ctx context.Context, client dataset.GetAPI, c dataset.Chunk, opts Options) iter.Seq2[Record, error] {
	if opts.MaxRecordSize <= 0 {
		opts.MaxRecordSize = DefaultMaxRecordSize
	}
	return func(yield func(Record, error) bool) {
		if c.Format == dataset.FormatParquet {
			readParquet(ctx, client, c, opts.MaxRecordSize, yield)
			return
		}
		src, start, end, closer, err := open(ctx, client, c)
		if err != nil {
			yield(Record{}, err)
			return
		}
		defer closer()
		switch c.Format {
		case dataset.FormatCSV:
			readCSV(src, c, start, end, opts.MaxRecordSize, yield)
		case dataset.FormatJSONL:
			readLines(newSplitter(src, c, start, end, opts.MaxRecordSize), true, yield)
		case dataset.FormatText:
			readLines(newSplitter(src, c, start, end, opts.MaxRecordSize), false, yield)
		default:
			yield(Record{}, fmt.Errorf("records: %s: unknown format %q", c.Object, c.Format))
		}
	}
}

// open returns the stream a chunk's records are read from, positioned at
// start-1 when start > 0, and the chunk's bounds in that stream.
func open(ctx context.Context, client dataset.GetAPI, c dataset.Chunk) (io.Reader, int64, int64, func(), error) {
	if c.Compression == dataset.CompressionNone && c.Start > 0 {
		r := dataset.NewReader(ctx, client, c.Object, c.Start-1, c.End-c.Start+1)
		return r, c.Start, c.End, func() { r.Close() }, nil
	}
	if c.Compression == dataset.CompressionNone && !c.Whole() {
		r := dataset.NewReader(ctx, client, c.Object, 0, c.End)
		return r, 0, c.End, func() { r.Close() }, nil
	}
	// A whole object: one GET, so that Content-Encoding can say it is
	// compressed even when the key does not.
	r := dataset.NewReader(ctx, client, c.Object, 0, 0)
	first := bufio.NewReaderSize(r, readBufferSize)
	if _, err := first.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		r.Close()
		return nil, 0, 0, nil, err
	}
	comp := c.Compression
	if comp == dataset.CompressionNone {
		comp = dataset.CompressionFromEncoding(r.ContentEncoding())
	}
	if comp == dataset.CompressionNone {
		return first, 0, endless, func() { r.Close() }, nil
	}
	d, err := dataset.Decompress(first, comp)
	if err != nil {
		r.Close()
		return nil, 0, 0, nil, &dataset.ReadError{Object: c.Object, Err: err}
	}
	return d, 0, endless, func() { d.Close(); r.Close() }, nil
}

// endless is the end of a chunk read to the end of its stream.
const endless = int64(1<<63 - 1)

// splitter yields the lines of a chunk: those that start in [start, end).
type splitter struct {
	br      *bufio.Reader
	obj     dataset.Object
	pos     int64 // offset of the next byte to read
	end     int64
	line    int64 // number of the next line, or 0 when unknown
	max     int
	buf     []byte
	started bool
	err     error
	// cr makes "\r" alone a line end too, as CSV's lines may end (old Mac
	// writers); eol is then the line end of the last line read ("\n",
	// "\r\n", "\r", or none at the end of the stream).
	cr  bool
	eol []byte
}

func newSplitter(r io.Reader, c dataset.Chunk, start, end int64, maxRecord int) *splitter {
	// A small chunk needs no large buffer: records that run past its end
	// are gathered in s.buf.
	size := int(min(int64(readBufferSize), max(64, end-start)))
	s := &splitter{br: bufio.NewReaderSize(r, size), obj: c.Object, end: end, max: maxRecord}
	if start > 0 {
		s.pos = start - 1
	} else {
		s.line = 1
	}
	return s
}

// next returns the next line of the chunk (without its line ending), its
// offset and line number. ok is false at the end of the chunk or on error
// (s.err). A line over the size limit is returned as a RecordError in
// s.err with ok true, and skipped.
func (s *splitter) next() (line []byte, off, lineNo int64, ok bool) {
	if !s.started {
		s.started = true
		if s.line == 0 {
			// The byte before the chunk: unless it ends a line, the first
			// line here belongs to the previous chunk.
			b, err := s.br.ReadByte()
			if err != nil {
				s.setErr(err)
				return nil, 0, 0, false
			}
			s.pos++
			if b != '\n' && !(s.cr && b == '\r') {
				if _, _, err := s.readLine(true); err != nil {
					s.setErr(err)
					return nil, 0, 0, false
				}
			}
		}
	}
	for {
		if s.pos >= s.end {
			return nil, 0, 0, false
		}
		off, lineNo = s.pos, s.line
		if s.line > 0 {
			s.line++
		}
		l, tooLong, err := s.readLine(false)
		if tooLong {
			return nil, off, lineNo, s.recordErr(off, lineNo, fmt.Errorf("%w (%d bytes)", ErrTooLong, s.max))
		}
		if err != nil && (!errors.Is(err, io.EOF) || len(l) == 0) {
			s.setErr(err)
			return nil, 0, 0, false
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if off == 0 {
			l = bytes.TrimPrefix(l, utf8BOM)
		}
		if len(bytes.TrimSpace(l)) == 0 {
			if err != nil {
				return nil, 0, 0, false
			}
			continue
		}
		return l, off, lineNo, true
	}
}

func (s *splitter) recordErr(off, line int64, err error) bool {
	s.err = &RecordError{Object: s.obj, Offset: off, Line: line, Err: err}
	return true
}

// readLine reads through the next '\n' and returns the line without it
// (with cr, through the next line end of any kind). With discard, or once
// a line passes the size limit, the bytes are dropped rather than kept.
func (s *splitter) readLine(discard bool) (line []byte, tooLong bool, err error) {
	if s.cr {
		return s.readCRLine(discard)
	}
	s.buf = s.buf[:0]
	for {
		frag, err := s.br.ReadSlice('\n')
		s.pos += int64(len(frag))
		if !discard && !tooLong {
			if len(s.buf)+len(frag) > s.max+2 {
				tooLong = true
				s.buf = s.buf[:0]
			} else if len(s.buf) == 0 && err == nil {
				// The common case: the whole line is in the buffer.
				return frag[:len(frag)-1], false, nil
			} else {
				s.buf = append(s.buf, frag...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(s.buf, []byte{'\n'}), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return s.buf, tooLong, err
		}
	}
}

// The line ends of CSV.
var (
	eolLF   = []byte("\n")
	eolCRLF = []byte("\r\n")
	eolCR   = []byte("\r")
)

// readCRLine is readLine for CSV: a line ends at "\n", "\r\n" or "\r"
// alone, which s.eol is set to.
func (s *splitter) readCRLine(discard bool) (line []byte, tooLong bool, err error) {
	s.buf = s.buf[:0]
	for {
		if s.br.Buffered() == 0 {
			if _, err := s.br.Peek(1); err != nil {
				s.eol = nil
				return s.buf, tooLong, err
			}
		}
		avail, _ := s.br.Peek(s.br.Buffered())
		i := bytes.IndexAny(avail, "\r\n")
		if i < 0 {
			s.keep(avail, discard, &tooLong)
			s.advance(len(avail))
			continue
		}
		if avail[i] == '\n' || i+1 < len(avail) {
			s.eol = eolLF
			if avail[i] == '\r' {
				s.eol = eolCR
				if avail[i+1] == '\n' {
					s.eol = eolCRLF
				}
			}
			if len(s.buf) == 0 && !discard && !tooLong && i <= s.max {
				// The common case: the line and its end are buffered; the
				// slice stays valid, as discarding does not move them.
				s.advance(i + len(s.eol))
				return avail[:i], false, nil
			}
			s.keep(avail[:i], discard, &tooLong)
			s.advance(i + len(s.eol))
			return s.buf, tooLong, nil
		}
		// A "\r" last in the buffer: whether "\n" follows takes a read,
		// which may move the buffered bytes, so the line is kept first.
		s.keep(avail[:i], discard, &tooLong)
		s.advance(i + 1)
		s.eol = eolCR
		if next, err := s.br.Peek(1); err == nil && next[0] == '\n' {
			s.advance(1)
			s.eol = eolCRLF
		}
		return s.buf, tooLong, nil
	}
}

// keep adds part of a line to s.buf, unless it is discarded or the line
// has passed the size limit (tooLong is then set, and s.buf emptied).
func (s *splitter) keep(part []byte, discard bool, tooLong *bool) {
	if discard || *tooLong {
		return
	}
	if len(s.buf)+len(part) > s.max {
		*tooLong = true
		s.buf = s.buf[:0]
		return
	}
	s.buf = append(s.buf, part...)
}

// advance steps over n buffered bytes.
func (s *splitter) advance(n int) {
	s.br.Discard(n)
	s.pos += int64(n)
}

func (s *splitter) setErr(err error) {
	if errors.Is(err, io.EOF) {
		return
	}
	var re *dataset.ReadError
	if !errors.As(err, &re) {
		err = &dataset.ReadError{Object: s.obj, Offset: s.pos, Err: err}
	}
	s.err = err
}

// readLines yields each line of a JSON Lines or text chunk.
func readLines(s *splitter, jsonOnly bool, yield func(Record, error) bool) {
	for {
		line, off, n, ok := s.next()
		if !ok {
			if s.err != nil {
				yield(Record{}, s.err)
			}
			return
		}
		if s.err != nil {
			err := s.err
			s.err = nil
			if !yield(Record{}, err) {
				return
			}
			continue
		}
		// A JSON Lines line that is not JSON is refused here, once, so that
		// every consumer sees the same bad record at the same offset.
		if jsonOnly && !jsonfields.Valid(line) {
			if !yield(Record{}, &RecordError{Object: s.obj, Offset: off, Line: n, Err: ErrNotJSON}) {
				return
			}
			continue
		}
		if !yield(Record{Offset: off, Line: n, Value: line}, nil) {
			return
		}
	}
}
