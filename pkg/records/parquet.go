package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// readParquet yields the rows of the chunk's row groups [Start, End) as
// JSON objects. Record.Offset is the row's number in the file.
func readParquet(ctx context.Context, client dataset.GetAPI, c dataset.Chunk, yield func(Record, error) bool) {
	f, err := dataset.OpenParquet(ctx, client, c.Object)
	if err != nil {
		yield(Record{}, err)
		return
	}
	groups := f.RowGroups()
	if c.End > int64(len(groups)) || c.Start < 0 || c.Start > c.End {
		yield(Record{}, &dataset.ReadError{Object: c.Object, Err: fmt.Errorf("row groups [%d, %d) of a file with %d: %w", c.Start, c.End, len(groups), dataset.ErrChanged)})
		return
	}
	var row int64
	for _, g := range groups[:c.Start] {
		row += g.NumRows()
	}
	for _, g := range groups[c.Start:c.End] {
		if !readRowGroup(c, g, &row, yield) {
			return
		}
	}
}

func readRowGroup(c dataset.Chunk, g parquet.RowGroup, row *int64, yield func(Record, error) bool) bool {
	r := parquet.NewRowGroupReader(g)
	defer r.Close()
	for {
		m := map[string]any{}
		err := readRow(r, &m)
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			var re *dataset.ReadError
			if !errors.As(err, &re) {
				// Not S3's answer nor the network's: the pages read do
				// not decode.
				err = fmt.Errorf("%w: %w", dataset.ErrCorrupt, err)
			}
			yield(Record{}, &dataset.ReadError{Object: c.Object, Offset: *row, Err: fmt.Errorf("Parquet row %d: %w", *row, err)})
			return false
		}
		b, err := json.Marshal(m)
		if err != nil {
			if !yield(Record{}, &RecordError{Object: c.Object, Offset: *row, Err: fmt.Errorf("Parquet row %d as JSON: %w", *row, err)}) {
				return false
			}
		} else if !yield(Record{Offset: *row, Value: b}, nil) {
			return false
		}
		*row++
	}
}

// readRow reads one row, turning a panic of the Parquet decoder on a
// corrupt file into an error.
func readRow(r *parquet.Reader, m *map[string]any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt Parquet data: %v", p)
		}
	}()
	return r.Read(m)
}
