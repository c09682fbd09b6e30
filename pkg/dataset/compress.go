package dataset

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Decompress returns a reader of r's bytes decompressed as c says. Close it
// to release the decompressor; r is not closed.
//
// An error of r itself (a read that failed after Reader's resumes) comes
// back as r gave it. An error of the decompressor once r's bytes are all
// read or as they are read (a bad header or checksum, data that does not
// decode, a stream that ends before its end) wraps ErrCorrupt, with the
// number of compressed bytes read by then.
func Decompress(r io.Reader, c Compression) (io.ReadCloser, error) {
	switch c {
	case CompressionNone:
		return io.NopCloser(r), nil
	case CompressionGzip:
		src := newCompressed(r, c)
		// Multistream is on by default, so concatenated gzip members (as
		// many writers produce) read as one stream.
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, src.check(err)
		}
		return &decompressed{Reader: zr, close: zr.Close, src: src}, nil
	case CompressionZstd:
		src := newCompressed(r, c)
		// One goroutine, and a bounded window, so that memory stays flat.
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, src.check(err)
		}
		return &decompressed{Reader: zr, close: func() error { zr.Close(); return nil }, src: src}, nil
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}

// compressed is the stream under a decompressor. It counts the bytes the
// decompressor took, for the error's offset, and keeps the first error of
// the stream itself, so that the decompressor's own errors (corruption) can
// be told from the stream's (a failed read).
type compressed struct {
	r    *bufio.Reader
	comp Compression
	n    int64
	err  error
}

func newCompressed(r io.Reader, c Compression) *compressed {
	// A bufio.Reader is an io.ByteReader, which gzip reads byte by byte
	// instead of buffering ahead: n is then exactly where it stopped.
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	return &compressed{r: br, comp: c}
}

func (s *compressed) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	s.note(err)
	return n, err
}

func (s *compressed) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	if err == nil {
		s.n++
	}
	s.note(err)
	return b, err
}

func (s *compressed) note(err error) {
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
}

// check returns what the decompressor's err is: the stream's own error, or
// the decompressor's, which wraps ErrCorrupt. io.EOF, the end of the
// decompressed stream, stays as it is.
func (s *compressed) check(err error) error {
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return err
	case s.err != nil:
		return s.err
	}
	return fmt.Errorf("%w: %s stream, %d compressed bytes in: %w", ErrCorrupt, s.comp, s.n, err)
}

// decompressed is a decompressor whose errors say whether the data is
// corrupt.
type decompressed struct {
	io.Reader
	close func() error
	src   *compressed
}

func (d *decompressed) Read(p []byte) (int, error) {
	n, err := d.Reader.Read(p)
	return n, d.src.check(err)
}

func (d *decompressed) Close() error { return d.close() }
