package dataset

import (
	"context"
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// OpenParquet opens the pinned Parquet object for reading, fetching its
// footer with ranged GETs.
func OpenParquet(ctx context.Context, client GetAPI, obj Object) (*parquet.File, error) {
	f, err := parquet.OpenFile(NewReaderAt(ctx, client, obj), obj.Size,
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(1<<20))
	if err != nil {
		return nil, &ReadError{Object: obj, Err: fmt.Errorf("open Parquet: %w", err)}
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
