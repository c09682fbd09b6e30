package dataset

import (
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Decompress returns a reader of r's bytes decompressed as c says. Close it
// to release the decompressor; r is not closed.
func Decompress(r io.Reader, c Compression) (io.ReadCloser, error) {
	switch c {
	case CompressionNone:
		return io.NopCloser(r), nil
	case CompressionGzip:
		// Multistream is on by default, so concatenated gzip members (as
		// many writers produce) read as one stream.
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case CompressionZstd:
		// One goroutine, and a bounded window, so that memory stays flat.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}
