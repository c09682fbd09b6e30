package dataset

import (
	"context"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"
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
	return f, nil
}

// RowGroups returns the number of row groups of a Parquet object.
func RowGroups(ctx context.Context, client GetAPI, obj Object) (int, error) {
	f, err := OpenParquet(ctx, client, obj)
	if err != nil {
		return 0, err
	}
	return len(f.RowGroups()), nil
}
