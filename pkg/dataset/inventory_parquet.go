package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// parquetInventoryBatch is how many rows a Parquet inventory reader decodes
// at a time, column by column.
const parquetInventoryBatch = 1024

// inventoryColumn is a column of an S3 Inventory data file that listing
// reads. Parquet and ORC reports name their columns in lower-case snake
// case, as the fileSchema of their manifest.json shows ("message
// s3.inventory { required binary bucket (UTF8); required binary key (UTF8);
// optional binary version_id (UTF8); optional boolean is_latest; ... }").
type inventoryColumn int

const (
	colBucket inventoryColumn = iota
	colKey
	colVersionID
	colIsLatest
	colIsDeleteMarker
	colSize
	colETag
	colStorageClass
	colAccessTier
	colModified
	numInventoryColumns
)

var inventoryColumnNames = [numInventoryColumns]string{"bucket", "key", "version_id", "is_latest", "is_delete_marker", "size", "e_tag", "storage_class", "intelligent_tiering_access_tier", "last_modified_date"}

// kindOK reports whether a Parquet column of physical type k can hold c.
func (c inventoryColumn) kindOK(k parquet.Kind) bool {
	switch c {
	case colIsLatest, colIsDeleteMarker:
		return k == parquet.Boolean
	case colSize:
		return k == parquet.Int64 || k == parquet.Int32
	case colModified:
		return k == parquet.Int64 // TIMESTAMP(MILLIS, true)
	default:
		return k == parquet.ByteArray
	}
}

// set stores a non-null value of column c in row.
func (c inventoryColumn) set(row *inventoryRow, v parquet.Value) {
	switch c {
	case colBucket:
		row.Bucket = string(v.ByteArray()) // copied: the page's buffer is reused
	case colKey:
		row.Key = string(v.ByteArray())
	case colVersionID:
		row.VersionID = string(v.ByteArray())
	case colETag:
		row.ETag = string(v.ByteArray())
	case colStorageClass:
		row.StorageClass = string(v.ByteArray())
	case colAccessTier:
		row.AccessTier = string(v.ByteArray())
	case colIsLatest:
		row.Latest = v.Boolean()
	case colIsDeleteMarker:
		row.DeleteMarker = v.Boolean()
	case colModified:
		row.Modified = time.UnixMilli(v.Int64()).UTC()
	case colSize:
		if v.Kind() == parquet.Int32 {
			row.Size = int64(v.Int32())
		} else {
			row.Size = v.Int64()
		}
	}
}

// parquetInventoryRows reads a Parquet inventory data file after its first
// skip rows. It pins the file with HeadObject and reads it with ranged GETs
// (OpenParquet): the footer, then only the columns listing needs, a batch
// of rows at a time, so memory stays bounded whatever the file's size.
// Whole row groups before skip are not read at all.
//
// The file's own schema (its footer) names the columns; the manifest's
// fileSchema is not needed. Keys are taken as written: S3 URL-encodes keys
// only in CSV reports ("When using the CSV file format, the key name is
// URL-encoded and must be decoded before you can use it", Amazon S3 User
// Guide, "Amazon S3 Inventory list"). A report without the size column
// gives Size -1, without is_latest Latest true, and without
// is_delete_marker DeleteMarker false; a null value reads the same.
func parquetInventoryRows(ctx context.Context, client ListAPI, file Object, _ string, skip int64) iter.Seq2[inventoryRow, error] {
	return func(yield func(inventoryRow, error) bool) {
		skip := skip // each run of the iterator skips anew
		obj, err := Head(ctx, client, file.Bucket, file.Key, "")
		if err != nil {
			yield(inventoryRow{}, err)
			return
		}
		f, err := OpenParquet(ctx, client, obj)
		if err != nil {
			yield(inventoryRow{}, fmt.Errorf("dataset: inventory data file %s is not a readable Parquet file: %w", obj.URI(), err))
			return
		}
		cols, err := parquetInventoryColumns(f.Schema())
		if err != nil {
			yield(inventoryRow{}, fmt.Errorf("dataset: inventory data file %s: %w", obj.URI(), err))
			return
		}
		for _, g := range f.RowGroups() {
			if n := g.NumRows(); skip >= n {
				skip -= n
				continue
			}
			if !readParquetInventoryGroup(obj, g, cols, skip, yield) {
				return
			}
			skip = 0
		}
	}
}

// parquetInventoryColumns returns the leaf index of each inventory column in
// schema, -1 for a column the report does not have. It refuses a schema
// without bucket and key, or with a column of an unexpected type.
func parquetInventoryColumns(schema *parquet.Schema) ([numInventoryColumns]int, error) {
	var cols [numInventoryColumns]int
	for c, name := range inventoryColumnNames {
		cols[c] = -1
		leaf, ok := schema.Lookup(name)
		if !ok || !leaf.Node.Leaf() {
			if inventoryColumn(c) == colBucket || inventoryColumn(c) == colKey {
				return cols, fmt.Errorf("schema has no %s column (%s)", name, schema)
			}
			continue
		}
		if k := leaf.Node.Type().Kind(); leaf.MaxRepetitionLevel > 0 || !inventoryColumn(c).kindOK(k) {
			return cols, fmt.Errorf("column %s is %s %s, not what S3 Inventory writes", name, repetition(leaf.Node), k)
		}
		if inventoryColumn(c) == colModified && !millisTimestamp(leaf.Node.Type()) {
			continue // not as S3 writes it: a time filter asks HeadObject
		}
		cols[c] = leaf.ColumnIndex
	}
	return cols, nil
}

// millisTimestamp reports whether t is TIMESTAMP(MILLIS), as S3 Inventory
// writes last_modified_date.
func millisTimestamp(t parquet.Type) bool {
	lt := t.LogicalType()
	if lt == nil {
		return false
	}
	ts, ok := lt.Value.(*format.TimestampType)
	if !ok {
		return false
	}
	_, ok = ts.Unit.Value.(*format.MilliSeconds)
	return ok
}

func repetition(n parquet.Node) string {
	switch {
	case n.Repeated():
		return "repeated"
	case n.Optional():
		return "optional"
	}
	return "required"
}

// readParquetInventoryGroup yields the rows of row group g from row skip
// on. It returns false when yield did, or after yielding an error.
func readParquetInventoryGroup(file Object, g parquet.RowGroup, cols [numInventoryColumns]int, skip int64, yield func(inventoryRow, error) bool) bool {
	chunks := g.ColumnChunks()
	var readers [numInventoryColumns]parquet.ColumnChunkValueReader
	for c, i := range cols {
		if i < 0 {
			continue
		}
		r := parquet.NewColumnChunkValueReader(chunks[i])
		defer r.Close()
		if skip > 0 {
			if err := r.SeekToRow(skip); err != nil {
				return yield(inventoryRow{}, fmt.Errorf("dataset: inventory data file %s: column %s: seek to row %d: %w", file.URI(), inventoryColumnNames[c], skip, err))
			}
		}
		readers[c] = r
	}
	rows := make([]inventoryRow, parquetInventoryBatch)
	values := make([]parquet.Value, parquetInventoryBatch)
	for left := g.NumRows() - skip; left > 0; {
		batch := rows[:min(left, int64(len(rows)))]
		for i := range batch {
			batch[i] = inventoryRow{Size: -1, Latest: true}
		}
		for c, r := range readers {
			if r == nil {
				continue
			}
			if err := readParquetColumn(inventoryColumn(c), r, values, batch); err != nil {
				return yield(inventoryRow{}, fmt.Errorf("dataset: inventory data file %s: column %s: %w", file.URI(), inventoryColumnNames[c], err))
			}
		}
		for _, row := range batch {
			if !yield(row, nil) {
				return false
			}
		}
		left -= int64(len(batch))
	}
	return true
}

// readParquetColumn reads one value of column c into each row of batch.
// Each ReadValues is stored before the next one, which may reuse the
// page the values point into. A panic of the decoder on a corrupt file
// is returned as an error.
func readParquetColumn(c inventoryColumn, r parquet.ColumnChunkValueReader, values []parquet.Value, batch []inventoryRow) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt Parquet data: %v", p)
		}
	}()
	for done := 0; done < len(batch); {
		n, err := r.ReadValues(values[:len(batch)-done])
		for _, v := range values[:n] {
			if !v.IsNull() {
				c.set(&batch[done], v)
			}
			done++
		}
		if errors.Is(err, io.EOF) && done < len(batch) {
			return fmt.Errorf("%d values, fewer than the row group's rows: %w", done, io.ErrUnexpectedEOF)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	return nil
}
