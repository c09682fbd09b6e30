package dataset

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// maxManifestJSON bounds the size of an S3 Inventory manifest.json, which
// lists data files, not objects.
const maxManifestJSON = 64 << 20

// listManifest lists the objects a manifest names from cursor from on. A
// key ending in manifest.json is an S3 Inventory manifest; anything else is
// a CSV of bucket,key[,versionId] lines as S3 Batch Operations uses, with
// URL-encoded keys.
func listManifest(ctx context.Context, client ListAPI, src Source, f *Filter, from Cursor, yield func(Listed, error) bool) {
	bucket, key, err := ParseS3URI(src.Manifest)
	if err != nil {
		yield(Listed{}, err)
		return
	}
	if strings.HasSuffix(key, "manifest.json") {
		listInventory(ctx, client, src, f, Object{Bucket: bucket, Key: key, ETag: from.ETag}, from, yield)
		return
	}
	body, etag, err := getManifest(ctx, client, Object{Bucket: bucket, Key: key, ETag: from.ETag}, from.Offset)
	if err != nil {
		yield(Listed{}, err)
		return
	}
	if body == nil {
		return // the cursor is at the end
	}
	defer body.Close()
	// A Batch Operations manifest names objects without their size or
	// ETag: List pins them, and judges them by what HeadObject says.
	readManifestCSV(src.Manifest, body, nil, func(row inventoryRow, offset int64, err error) bool {
		o := Object{Bucket: row.Bucket, Key: row.Key, VersionID: row.VersionID, Size: -1}
		next := Cursor{Offset: from.Offset + offset, ETag: etag}
		if err == nil && dirMarker(row.Key) {
			return yield(Listed{Next: next}, nil)
		}
		if by := f.Key(row.Key); err == nil && by != "" {
			o.Size = 0 // not known, and not asked for
			return yield(filtered(o, by, next), nil)
		}
		return yield(Listed{Object: o, Next: next}, err)
	})
}

// getManifest reads obj from byte offset on, pinned to obj.ETag when set,
// and returns its body and ETag. A nil body means offset is at the end.
func getManifest(ctx context.Context, client ListAPI, obj Object, offset int64) (io.ReadCloser, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(obj.Bucket), Key: aws.String(obj.Key)}
	if obj.ETag != "" {
		in.IfMatch = aws.String(`"` + obj.ETag + `"`)
	}
	if offset > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := client.GetObject(ctx, in)
	switch {
	case offset > 0 && awserr.Code(err) == "InvalidRange":
		return nil, obj.ETag, nil
	case err != nil:
		if err = classify(err); errors.Is(err, ErrChanged) {
			return nil, "", fmt.Errorf("dataset: manifest %s changed while the run was planned: %w", obj.URI(), err)
		}
		return nil, "", fmt.Errorf("dataset: get manifest %s: %w", obj.URI(), err)
	}
	return out.Body, trimETag(aws.ToString(out.ETag)), nil
}

// inventoryManifest is the part of an S3 Inventory manifest.json that
// listing reads.
type inventoryManifest struct {
	SourceBucket      string `json:"sourceBucket"`
	DestinationBucket string `json:"destinationBucket"`
	FileFormat        string `json:"fileFormat"`
	FileSchema        string `json:"fileSchema"`
	Files             []struct {
		Key string `json:"key"`
	} `json:"files"`
}

// inventoryRow is a row of an S3 Inventory data file, in any of its
// formats.
type inventoryRow struct {
	Bucket, Key, VersionID, ETag string
	// Size is -1 when the report has no Size field.
	Size int64
	// StorageClass and AccessTier are the StorageClass and
	// IntelligentTieringAccessTier fields, empty when the report has none.
	StorageClass, AccessTier string
	// Latest and DeleteMarker are the IsLatest and IsDeleteMarker fields
	// (true and false when the report has none).
	Latest, DeleteMarker bool
	// Modified is the LastModifiedDate field, zero when the report has
	// none.
	Modified time.Time
}

// inventoryReader reads the rows of one inventory data file after its
// first skip rows. fileSchema is the manifest's description of the file's
// columns.
type inventoryReader func(ctx context.Context, client ListAPI, file Object, fileSchema string, skip int64) iter.Seq2[inventoryRow, error]

// inventoryReaders are the readers of each fileFormat, by upper-case name.
// ORC is not among them: see errORCInventory.
var inventoryReaders = map[string]inventoryReader{
	"CSV":     csvInventoryRows,
	"PARQUET": parquetInventoryRows,
}

// ErrInventoryFormat reports an S3 Inventory report whose fileFormat
// listing does not read: ORC, or a format S3 does not write.
var ErrInventoryFormat = errors.New("S3 Inventory fileFormat not read")

// errORCInventory refuses an ORC report. No maintained Go reader of ORC
// was found: github.com/scritchley/orc, the only pure-Go one, is
// unmaintained and not served by the Go module proxy, and Apache Arrow's Go
// module (github.com/apache/arrow-go/v18) has no ORC reader; Arrow's C++
// one would need cgo, and the functions are built with CGO_ENABLED=0. See
// docs/fanout.md.
func errORCInventory(manifest string) error {
	return fmt.Errorf("dataset: inventory manifest %s: fileFormat ORC: %w: there is no maintained Go ORC reader; "+
		"configure the S3 Inventory report with the CSV or Apache Parquet format instead", manifest, ErrInventoryFormat)
}

// listInventory lists the objects of an S3 Inventory report from cursor
// from on: data file from.Index, after its first from.Offset rows.
func listInventory(ctx context.Context, client ListAPI, src Source, f *Filter, manifest Object, from Cursor, yield func(Listed, error) bool) {
	body, etag, err := getManifest(ctx, client, manifest, 0)
	if err != nil {
		yield(Listed{}, err)
		return
	}
	var m inventoryManifest
	err = json.NewDecoder(io.LimitReader(body, maxManifestJSON)).Decode(&m)
	body.Close()
	if err != nil {
		yield(Listed{}, fmt.Errorf("dataset: inventory manifest %s: %w", src.Manifest, err))
		return
	}
	read, ok := inventoryReaders[strings.ToUpper(m.FileFormat)]
	switch {
	case strings.EqualFold(m.FileFormat, "ORC"):
		yield(Listed{}, errORCInventory(src.Manifest))
		return
	case !ok:
		yield(Listed{}, fmt.Errorf("dataset: inventory manifest %s: fileFormat %q: %w (want CSV or Parquet)", src.Manifest, m.FileFormat, ErrInventoryFormat))
		return
	}
	dest := m.DestinationBucket
	if i := strings.LastIndex(dest, ":"); i >= 0 {
		dest = dest[i+1:] // arn:aws:s3:::bucket
	}
	passed := 0
	for i := from.Index; i < len(m.Files); i++ {
		var skip int64
		if i == from.Index {
			skip = from.Offset
		}
		n := skip // rows of file i read, those skipped and filtered included
		for row, err := range read(ctx, client, Object{Bucket: dest, Key: m.Files[i].Key}, m.FileSchema, skip) {
			if err != nil {
				yield(Listed{}, err)
				return
			}
			if n++; !row.Latest || row.DeleteMarker || dirMarker(row.Key) {
				if passed++; passed%markEvery == 0 && !yield(Listed{Next: Cursor{Index: i, Offset: n, ETag: etag}}, nil) {
					return
				}
				continue
			}
			if !yield(inventoryListed(f, row, Cursor{Index: i, Offset: n, ETag: etag}), nil) {
				return
			}
		}
	}
}

// inventoryListed is the Listed of an inventory row, judged by f, or, when
// the report lacks a field that f needs, to be pinned and judged by
// HeadObject's answer.
func inventoryListed(f *Filter, row inventoryRow, next Cursor) Listed {
	o := Object{Bucket: row.Bucket, Key: row.Key, VersionID: row.VersionID, ETag: row.ETag, Size: row.Size, StorageClass: storageClass(row.StorageClass)}
	if by := f.Key(row.Key); by != "" {
		o.Size = max(o.Size, 0)
		return filtered(o, by, next)
	}
	size, class, modified := f.needs()
	if size && row.Size < 0 || class && row.StorageClass == "" || modified && row.Modified.IsZero() {
		o.Size = -1 // HeadObject tells
		return Listed{Object: o, Next: next}
	}
	if o.Size >= 0 {
		if by := f.Object(o, row.Modified); by != "" {
			return filtered(o, by, next)
		}
	}
	l := Listed{Object: o, Next: next}
	// Only an archive class or tier is looked at with HeadObject (a
	// restore may have been made since the report): a report without the
	// StorageClass field is read as before, its archived objects failing
	// their GET.
	l.settled = row.StorageClass == "" || row.StorageClass == "INTELLIGENT_TIERING" && row.AccessTier != "" && !archiveTiers[row.AccessTier]
	return l
}

// csvInventoryRows reads a gzipped CSV inventory data file after its first
// skip rows, which it reads and drops (a gzip stream cannot be entered in
// the middle). fileSchema names the columns ("Bucket, Key, Size, ...").
// Keys are URL-encoded.
func csvInventoryRows(ctx context.Context, client ListAPI, file Object, fileSchema string, skip int64) iter.Seq2[inventoryRow, error] {
	return func(yield func(inventoryRow, error) bool) {
		skip := skip // each run of the iterator skips anew
		schema := strings.Split(fileSchema, ",")
		for i := range schema {
			schema[i] = strings.TrimSpace(schema[i])
		}
		body, _, err := getManifest(ctx, client, file, 0)
		if err != nil {
			yield(inventoryRow{}, err)
			return
		}
		defer body.Close()
		gz, err := gzip.NewReader(body)
		if err != nil {
			yield(inventoryRow{}, fmt.Errorf("dataset: inventory file %s: %w", file.URI(), err))
			return
		}
		readManifestCSV(file.URI(), gz, schema, func(row inventoryRow, _ int64, err error) bool {
			if err == nil && skip > 0 {
				skip--
				return true
			}
			return yield(row, err)
		})
	}
}

// readManifestCSV yields the rows of a manifest CSV, each with the byte
// offset just after it. schema names the columns (S3 Inventory); nil means
// bucket,key[,versionId] (Batch Operations). Keys are URL-encoded in both.
// A row without a Size field has Size -1. It returns false when yield did,
// or after yielding an error.
func readManifestCSV(name string, r io.Reader, schema []string, yield func(inventoryRow, int64, error) bool) bool {
	col := map[string]int{"Bucket": 0, "Key": 1, "VersionId": 2}
	if schema != nil {
		col = map[string]int{}
		for i, c := range schema {
			col[c] = i
		}
		if _, ok := col["Key"]; !ok {
			return yield(inventoryRow{}, 0, fmt.Errorf("dataset: inventory %s: schema has no Key column", name))
		}
	}
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return yield(inventoryRow{}, 0, fmt.Errorf("dataset: manifest %s: %w", name, err))
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 2 {
			return yield(inventoryRow{}, 0, fmt.Errorf("dataset: manifest %s line %d: want bucket,key, got %d fields", name, line, len(rec)))
		}
		key, err := url.QueryUnescape(field(rec, "Key"))
		if err != nil {
			return yield(inventoryRow{}, 0, fmt.Errorf("dataset: manifest %s line %d: key %q: %w", name, line, field(rec, "Key"), err))
		}
		row := inventoryRow{Bucket: field(rec, "Bucket"), Key: key, VersionID: field(rec, "VersionId"), ETag: field(rec, "ETag"), Size: -1,
			Latest: field(rec, "IsLatest") != "false", DeleteMarker: field(rec, "IsDeleteMarker") == "true",
			StorageClass: field(rec, "StorageClass"), AccessTier: field(rec, "IntelligentTieringAccessTier")}
		if s := field(rec, "LastModifiedDate"); s != "" {
			row.Modified, err = time.Parse(time.RFC3339, s)
			if err != nil {
				return yield(inventoryRow{}, 0, fmt.Errorf("dataset: manifest %s line %d: LastModifiedDate %q: %w", name, line, s, err))
			}
		}
		if s := field(rec, "Size"); s != "" {
			row.Size, err = strconv.ParseInt(s, 10, 64)
			if err != nil {
				return yield(inventoryRow{}, 0, fmt.Errorf("dataset: manifest %s line %d: size %q: %w", name, line, s, err))
			}
		}
		if !yield(row, cr.InputOffset(), nil) {
			return false
		}
	}
}
