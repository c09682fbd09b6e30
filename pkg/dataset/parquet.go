package dataset

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// OpenParquet opens the pinned Parquet object for reading, fetching its
// footer with ranged GETs. A footer that does not decode wraps ErrCorrupt;
// an object S3 serves with a compressing Content-Encoding is an
// *EncodingError.
func OpenParquet(ctx context.Context, client GetAPI, obj Object) (*parquet.File, error) {
	f, err := parquet.OpenFile(NewReaderAt(ctx, client, obj), obj.Size,
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(1<<20))
	var re *ReadError
	switch {
	case errors.As(err, &re):
		// S3's answer or the network's, as the ReaderAt gave it.
		return nil, &ReadError{Object: obj, Offset: re.Offset, Err: fmt.Errorf("open Parquet: %w", err)}
	case err != nil:
		// The bytes read are not a Parquet file's footer.
		return nil, &ReadError{Object: obj, Err: fmt.Errorf("open Parquet: %w: %w", ErrCorrupt, err)}
	}
	if err := checkCodecs(f); err != nil {
		return nil, &ReadError{Object: obj, Err: err}
	}
	return f, nil
}

// readCodecs are the page compression codecs parquet-go decodes.
var readCodecs = map[format.CompressionCodec]bool{
	format.Uncompressed: true, format.Snappy: true, format.Gzip: true,
	format.Brotli: true, format.Zstd: true, format.Lz4Raw: true,
}

// checkCodecs refuses, from the footer, a file with a column chunk whose
// codec is not read, so that planning names it rather than every read
// failing on its pages.
func checkCodecs(f *parquet.File) error {
	for _, g := range f.Metadata().RowGroups {
		for _, c := range g.Columns {
			codec := c.MetaData.Codec
			if readCodecs[codec] {
				continue
			}
			name := codec.String()
			if codec == format.Lz4 {
				name = "LZ4 (codec 5, the deprecated framing)"
			}
			return fmt.Errorf("open Parquet: column %s is compressed with %s: %w; it reads UNCOMPRESSED, SNAPPY, GZIP, BROTLI, ZSTD and LZ4_RAW: write the file with one of those",
				strings.Join(c.MetaData.PathInSchema, "."), name, ErrUnsupported)
		}
	}
	return nil
}

// RowGroups returns the number of row groups of a Parquet object.
func RowGroups(ctx context.Context, client GetAPI, obj Object) (int, error) {
	f, err := OpenParquet(ctx, client, obj)
	if err != nil {
		return 0, err
	}
	return len(f.RowGroups()), nil
}
