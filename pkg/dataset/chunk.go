package dataset

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// DefaultChunkSize is the chunk size used when PlanOptions.ChunkSize is zero.
const DefaultChunkSize = 8 << 20

// maxHeaderLine bounds the first line of a CSV object read for its header.
const maxHeaderLine = 1 << 20

// Chunk is a part of one object that can be read on its own: the records
// whose first byte lies in [Start, End), or for Parquet the row groups
// [Start, End).
type Chunk struct {
	Object
	// Index is the chunk's number within its object, from zero.
	Index int `json:"index"`
	// Count is the number of chunks of the object.
	Count int `json:"count"`
	// Start and End bound the chunk: bytes, or row groups for Parquet.
	Start int64 `json:"start"`
	End   int64 `json:"end"`

	Format      Format      `json:"format"`
	Compression Compression `json:"compression,omitempty"`
	// CSV describes a CSV object; nil for other formats.
	CSV *CSV `json:"csv,omitempty"`
	// Parquet says how a Parquet object's values are written; nil for
	// the defaults.
	Parquet *Parquet `json:"parquet,omitempty"`
}

// ID returns a deterministic identifier of the chunk, built from its
// object's bucket, key, version (or ETag) and range: 32 hex characters,
// valid as an SQS deduplication id.
func (c Chunk) ID() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%d", c.Bucket, c.Key, c.Pin(), c.Start, c.End)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Whole reports whether the chunk is its object's only chunk.
func (c Chunk) Whole() bool { return c.Count == 1 }

// CSV describes how to read a CSV object.
type CSV struct {
	// Delimiter separates fields; "" means ",".
	Delimiter string `json:"delimiter,omitempty"`
	// Header names the columns, in order.
	Header []string `json:"header"`
	// SkipFirstLine is set when the object's first line is the header.
	SkipFirstLine bool `json:"skipFirstLine,omitempty"`
}

// Comma returns the delimiter as a rune.
func (c *CSV) Comma() rune {
	if c == nil || c.Delimiter == "" {
		return ','
	}
	r, _ := utf8.DecodeRuneInString(c.Delimiter)
	return r
}

// Parquet says how the values of a Parquet object are written as JSON
// (see package parquetjson).
type Parquet struct {
	// BinaryAsString writes byte arrays without a logical type as
	// strings instead of base64 (parquetjson.Options.BinaryAsString).
	BinaryAsString bool `json:"binaryAsString,omitempty"`
}

// CSVOptions configures how CSV objects are planned.
type CSVOptions struct {
	// Delimiter separates fields; zero means ',' (or '\t' for .tsv keys).
	Delimiter rune
	// NoHeader says the objects have no header line; Columns then names
	// the fields, or they are named c0, c1, ...
	NoHeader bool
	// Columns names the fields when NoHeader is set.
	Columns []string
	// NoQuotedNewlines promises that no quoted field holds a newline, so
	// that a CSV object can be split at line boundaries. Without it a
	// newline may lie inside a record, a reader starting mid-object could
	// not tell, and so each CSV object is read as one chunk.
	NoQuotedNewlines bool
}

// PlanOptions configures a [Planner]. The zero value plans 8 MiB chunks with
// the format taken from each key's extension.
type PlanOptions struct {
	// ChunkSize is the byte size of a chunk; zero means DefaultChunkSize.
	ChunkSize int64
	// Format overrides the format taken from the extension.
	Format Format
	// Compression overrides the compression taken from the extension.
	Compression Compression
	// CSV configures CSV objects.
	CSV CSVOptions
	// RowGroupsPerChunk is how many Parquet row groups make a chunk; zero
	// means one.
	RowGroupsPerChunk int
}

// Planner splits objects into chunks. It reads the first line of CSV
// objects (for the header) and the footer of Parquet objects (for the row
// groups); other objects are planned without I/O.
type Planner struct {
	client GetAPI
	opts   PlanOptions
}

// NewPlanner returns a Planner that reads with client.
func NewPlanner(client GetAPI, opts PlanOptions) *Planner {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.RowGroupsPerChunk <= 0 {
		opts.RowGroupsPerChunk = 1
	}
	return &Planner{client: client, opts: opts}
}

// ErrUnknownFormat is wrapped by Plan when neither the options nor the key
// name a format.
var ErrUnknownFormat = errors.New("cannot tell the format from the key; set a format")

// Plan returns the chunks of obj. An empty object has none.
//
// An object compressed by its name (.gz, .zst) or by its Content-Encoding
// (gzip, zstd) is one chunk, read whole as a stream. A listing does not
// give Content-Encoding, so before it cuts an object whose name says it is
// not compressed into byte ranges, Plan asks S3 for the object's first
// byte, whose answer does: one small GET (priced as a HEAD, and pinned as
// every read) for each object over ChunkSize. Smaller objects are one chunk
// anyway, and their read decodes what the GET's Content-Encoding says; a
// CSV object's header read and a Parquet object's footer read learn it
// without an extra request.
func (p *Planner) Plan(ctx context.Context, obj Object) ([]Chunk, error) {
	format, comp := p.detect(obj)
	if format == FormatAuto {
		return nil, fmt.Errorf("dataset: plan %s: %w", obj, ErrUnknownFormat)
	}
	if obj.Size == 0 {
		return nil, nil
	}
	if comp == CompressionNone && p.byRanges(format, obj) {
		var err error
		if comp, err = p.contentEncoding(ctx, obj); err != nil {
			return nil, err
		}
	}
	base := Chunk{Object: obj, Format: format, Compression: comp}
	var enc *EncodingError
	switch {
	case format == FormatParquet:
		if comp != CompressionNone {
			return nil, fmt.Errorf("dataset: plan %s: a compressed Parquet file is not supported; Parquet compresses its pages itself", obj)
		}
		groups, err := RowGroups(ctx, p.client, obj)
		if errors.As(err, &enc) {
			return nil, fmt.Errorf("dataset: plan %s: a compressed Parquet file is not supported (Content-Encoding %q); Parquet compresses its pages itself", obj, enc.ContentEncoding)
		}
		if err != nil {
			return nil, err
		}
		return split(base, int64(groups), int64(p.opts.RowGroupsPerChunk)), nil
	case format == FormatCSV:
		c, err := p.csv(ctx, obj, comp)
		if errors.As(err, &enc) && comp == CompressionNone {
			// The header's read found the object compressed by its
			// Content-Encoding: it is read whole, decompressed.
			comp = enc.Compression
			base.Compression = comp
			c, err = p.csv(ctx, obj, comp)
		}
		if err != nil {
			return nil, err
		}
		base.CSV = c
		if comp != CompressionNone || !p.opts.CSV.NoQuotedNewlines {
			return split(base, obj.Size, obj.Size), nil
		}
	case comp != CompressionNone:
		return split(base, obj.Size, obj.Size), nil
	}
	return split(base, obj.Size, p.opts.ChunkSize), nil
}

// Whole returns obj as one chunk, in the format and compression the
// options or its key give, without reading it: for an object Plan could
// not plan, whose read then meets the same error.
func (p *Planner) Whole(obj Object) Chunk {
	format, comp := p.detect(obj)
	return Chunk{Object: obj, Count: 1, End: obj.Size, Format: format, Compression: comp}
}

// detect returns obj's format and compression: the options', else what
// its key says.
func (p *Planner) detect(obj Object) (Format, Compression) {
	format, comp := Detect(obj.Key)
	if p.opts.Format != FormatAuto {
		format = p.opts.Format
	}
	if p.opts.Compression != CompressionNone {
		comp = p.opts.Compression
	}
	return format, comp
}

// byRanges reports whether Plan would cut obj, not known to be compressed,
// into byte ranges without reading any of it, so that it must ask for its
// Content-Encoding first.
func (p *Planner) byRanges(format Format, obj Object) bool {
	if obj.Size <= p.opts.ChunkSize {
		return false
	}
	switch format {
	case FormatJSONL, FormatText:
		return true
	case FormatCSV:
		// A header is read with a ranged GET, whose answer tells.
		return p.opts.CSV.NoQuotedNewlines && p.opts.CSV.NoHeader
	}
	return false
}

// contentEncoding returns the compression obj's Content-Encoding names,
// from a GET of its first byte.
func (p *Planner) contentEncoding(ctx context.Context, obj Object) (Compression, error) {
	out, err := get(ctx, p.client, obj, 0, 0)
	if err != nil {
		return CompressionNone, fmt.Errorf("dataset: plan %s: ask for its Content-Encoding: %w", obj, err)
	}
	out.Body.Close()
	return CompressionFromEncoding(aws.ToString(out.ContentEncoding)), nil
}

// split cuts [0, total) into chunks of size step.
func split(base Chunk, total, step int64) []Chunk {
	if total <= 0 {
		return nil
	}
	n := int((total + step - 1) / step)
	out := make([]Chunk, n)
	for i := range out {
		c := base
		c.Index, c.Count = i, n
		c.Start = int64(i) * step
		c.End = min(c.Start+step, total)
		out[i] = c
	}
	return out
}

// csv works out the columns of a CSV object.
func (p *Planner) csv(ctx context.Context, obj Object, comp Compression) (*CSV, error) {
	o := p.opts.CSV
	c := &CSV{}
	comma := o.Delimiter
	if comma == 0 {
		comma = ','
		if isTSV(obj.Key) {
			comma = '\t'
		}
	}
	if comma != ',' {
		c.Delimiter = string(comma)
	}
	if o.NoHeader {
		c.Header = o.Columns
		return c, nil
	}
	expect := int64(64 << 10)
	if comp != CompressionNone {
		expect = 0
	}
	r := NewReader(ctx, p.client, obj, 0, expect)
	defer r.Close()
	src, err := Decompress(r, comp)
	if err != nil {
		return nil, &ReadError{Object: obj, Err: err}
	}
	defer src.Close()
	// A small buffer: ReadString gathers a longer line across fills, and
	// planning reads a header per CSV object, 16 at a time.
	line, err := bufio.NewReader(io.LimitReader(src, maxHeaderLine)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// A UTF-8 byte order mark, which Excel writes first, is not part of
	// the first column's name; package records drops it from the first
	// line too.
	line = strings.TrimPrefix(line, "\ufeff")
	cr := csv.NewReader(strings.NewReader(line))
	cr.Comma = comma
	header, err := cr.Read()
	if err != nil {
		return nil, &ReadError{Object: obj, Err: fmt.Errorf("read CSV header: %w", err)}
	}
	c.Header = header
	c.SkipFirstLine = true
	return c, nil
}

// ColumnName returns the name of column i when a CSV has no header.
func ColumnName(i int) string { return "c" + strconv.Itoa(i) }

// isTSV reports whether key names a tab-separated file, compressed or not.
func isTSV(key string) bool {
	k := strings.ToLower(key)
	for _, ext := range []string{".gz", ".gzip", ".zst", ".zstd"} {
		k = strings.TrimSuffix(k, ext)
	}
	return strings.HasSuffix(k, ".tsv")
}
