package records

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/parquetjson"
)

// readParquet yields the rows of the chunk's row groups [Start, End) as
// JSON objects, by package parquetjson's mapping. Record.Offset is the
// row's number in the file.
func readParquet(ctx context.Context, client dataset.GetAPI, c dataset.Chunk, max int, yield func(Record, error) bool) {
	f, err := dataset.OpenParquet(ctx, client, c.Object)
	if err != nil {
		yield(Record{}, err)
		return
	}
	var opts parquetjson.Options
	if c.Parquet != nil {
		opts.BinaryAsString = c.Parquet.BinaryAsString
	}
	enc, err := parquetjson.NewEncoder(f.Metadata().Schema, opts)
	if err != nil {
		yield(Record{}, &dataset.ReadError{Object: c.Object, Err: fmt.Errorf("%w: %w", dataset.ErrCorrupt, err)})
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
		r := &rowReader{obj: c.Object, enc: enc, max: max, row: row}
		if !r.group(g, yield) {
			return
		}
		row += g.NumRows()
	}
}

// rowReader reads the rows of a row group a column page at a time, so
// that a row larger than the record size limit is refused without
// holding it: its values are counted and dropped.
type rowReader struct {
	obj     dataset.Object
	enc     *parquetjson.Encoder
	max     int
	row     int64
	columns []columnCursor
	values  [][]parquet.Value
	json    []byte
}

func (r *rowReader) group(g parquet.RowGroup, yield func(Record, error) bool) bool {
	chunks := g.ColumnChunks()
	if len(chunks) != r.enc.Columns() {
		return yield(Record{}, r.readErr(fmt.Errorf("%w: a row group of %d columns in a schema of %d", dataset.ErrCorrupt, len(chunks), r.enc.Columns())))
	}
	r.columns = make([]columnCursor, len(chunks))
	r.values = make([][]parquet.Value, len(chunks))
	for i, cc := range chunks {
		r.columns[i].pages = cc.Pages()
	}
	defer func() {
		for i := range r.columns {
			r.columns[i].pages.Close()
		}
	}()
	for range g.NumRows() {
		size, err := r.next()
		if err != nil {
			return yield(Record{}, r.readErr(err))
		}
		if size > r.max {
			err := &RecordError{Object: r.obj, Offset: r.row, Err: fmt.Errorf("Parquet row %d: %w (%d bytes): its values alone hold %d", r.row, ErrTooLong, r.max, size)}
			if !yield(Record{}, err) {
				return false
			}
			r.row++
			continue
		}
		b, err := r.enc.AppendColumns(r.json[:0], r.values)
		switch {
		case err != nil:
			err = &RecordError{Object: r.obj, Offset: r.row, Err: fmt.Errorf("Parquet row %d: %w", r.row, err)}
		case len(b) > r.max:
			err = &RecordError{Object: r.obj, Offset: r.row, Err: fmt.Errorf("Parquet row %d as JSON: %w (%d bytes)", r.row, ErrTooLong, r.max)}
		}
		r.json = b
		if err != nil {
			if !yield(Record{}, err) {
				return false
			}
		} else if !yield(Record{Offset: r.row, Value: b}, nil) {
			return false
		}
		r.row++
	}
	return true
}

// readErr makes err, met reading the row group's pages, the chunk's error.
func (r *rowReader) readErr(err error) error {
	var re *dataset.ReadError
	if !errors.As(err, &re) && !errors.Is(err, dataset.ErrCorrupt) {
		// Not S3's answer nor the network's: the pages read do not
		// decode.
		err = fmt.Errorf("%w: %w", dataset.ErrCorrupt, err)
	}
	return &dataset.ReadError{Object: r.obj, Offset: r.row, Err: fmt.Errorf("Parquet row %d: %w", r.row, err)}
}

// next reads the values of the next row of every column into r.values
// and returns their size: the bytes of their byte arrays and 8 for each
// other value. Past r.max the values are read and dropped.
func (r *rowReader) next() (size int, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The decoder's answer to some corrupt pages.
			err = fmt.Errorf("%w: corrupt Parquet data: %v", dataset.ErrCorrupt, p)
		}
	}()
	for i := range r.columns {
		c := &r.columns[i]
		vs := r.values[i][:0]
		for first := true; ; first = false {
			v, ok, err := c.peek()
			if err != nil {
				return 0, fmt.Errorf("column %d: %w", i, err)
			}
			if !ok {
				if first {
					return 0, fmt.Errorf("%w: column %d ends before the row group's rows", dataset.ErrCorrupt, i)
				}
				break
			}
			if !first && v.RepetitionLevel() == 0 {
				break
			}
			c.i++
			size += 8
			if k := v.Kind(); !v.IsNull() && (k == parquet.ByteArray || k == parquet.FixedLenByteArray) {
				size += len(v.ByteArray())
			}
			if size <= r.max {
				vs = append(vs, v)
			}
		}
		r.values[i] = vs
	}
	return size, nil
}

// columnCursor reads a column chunk's values a page at a time. It never
// releases a page to parquet-go's pools: a row's values may lie on two
// pages, and the byte arrays of the first must outlive the reading of
// the second.
type columnCursor struct {
	pages  parquet.Pages
	values parquet.ValueReader
	buf    []parquet.Value
	i      int
}

// peek returns the next value; ok is false at the end of the chunk.
func (c *columnCursor) peek() (v parquet.Value, ok bool, err error) {
	for c.i >= len(c.buf) {
		if c.values == nil {
			p, err := c.pages.ReadPage()
			if errors.Is(err, io.EOF) {
				return v, false, nil
			}
			if err != nil {
				return v, false, err
			}
			c.values = p.Values()
		}
		if c.buf == nil {
			c.buf = make([]parquet.Value, 256)
		}
		n, err := c.values.ReadValues(c.buf[:cap(c.buf)])
		c.buf, c.i = c.buf[:n], 0
		if n == 0 && err == nil {
			return v, false, io.ErrNoProgress
		}
		if errors.Is(err, io.EOF) {
			c.values = nil
		} else if err != nil {
			return v, false, err
		}
	}
	return c.buf[c.i], true, nil
}
