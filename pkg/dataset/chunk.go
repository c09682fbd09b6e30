package dataset

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/s3sqs/s3sqs/pkg/csvrecord"
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

// CSV describes how to read a CSV object: its dialect and its columns.
type CSV struct {
	// Delimiter separates fields; "" means ",".
	Delimiter string `json:"delimiter,omitempty"`
	// Quote is the character that quotes a field; "" means '"'.
	Quote string `json:"quote,omitempty"`
	// NoQuotes reads every field as written, quotes included, as
	// tab-separated values are written (.tsv).
	NoQuotes bool `json:"noQuotes,omitempty"`
	// Escape, when set, escapes the quote, or itself, inside a quoted
	// field (\" in the dialect of Spark's and MySQL's escape option); ""
	// means a quote is escaped by doubling it, as RFC 4180 says.
	Escape string `json:"escape,omitempty"`
	// Header names the columns, in order, made unique (UniqueColumns).
	Header []string `json:"header"`
	// SkipFirstLine is set when the object's first line is the header.
	SkipFirstLine bool `json:"skipFirstLine,omitempty"`
	// HeaderFirst says that the object's first record is its header, for
	// the reader of its one chunk to read (a record may span lines, and so
	// may a header); Header is then empty.
	HeaderFirst bool `json:"headerFirst,omitempty"`
}

// Comma returns the delimiter as a rune.
func (c *CSV) Comma() rune {
	if c == nil || c.Delimiter == "" {
		return ','
	}
	r, _ := utf8.DecodeRuneInString(c.Delimiter)
	return r
}

// QuoteChar returns the quote character, or 0 when fields are not quoted.
func (c *CSV) QuoteChar() byte {
	switch {
	case c != nil && c.NoQuotes:
		return 0
	case c == nil || c.Quote == "":
		return '"'
	}
	return c.Quote[0]
}

// EscapeChar returns the escape character, or 0 when a quote is escaped by
// doubling it.
func (c *CSV) EscapeChar() byte {
	if c == nil || c.Escape == "" {
		return 0
	}
	return c.Escape[0]
}

// UniqueColumns returns names made unique, so that each column is a key of
// its own in a record's JSON object (a JSON reader keeps one value of a
// key given twice): an empty name becomes the name of its position
// (ColumnName: c0, c1, ...), and a name met before takes the first of
// "_2", "_3", ... not taken. "id,name,id" is read as id, name, id_2.
func UniqueColumns(names []string) []string {
	out := make([]string, len(names))
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			n = ColumnName(i)
		}
		if seen[n] {
			base := n
			for k := 2; seen[n]; k++ {
				n = base + "_" + strconv.Itoa(k)
			}
		}
		seen[n] = true
		out[i] = n
	}
	return out
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
	// Quote quotes fields; zero means '"', or no quoting for .tsv keys.
	// It must be an ASCII character.
	Quote byte
	// NoQuotes reads every field as written, for every key.
	NoQuotes bool
	// Escape escapes the quote inside a quoted field; zero means a quote
	// is escaped by doubling it. It must be an ASCII character.
	Escape byte
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

// Check reports options whose characters cannot read CSV: a delimiter,
// quote or escape that is a line end, is not one character, or is the
// delimiter too.
func (o CSVOptions) Check() error {
	d := csvrecord.Dialect{Comma: []byte(string(cmp.Or(o.Delimiter, ','))), Quote: cmp.Or(o.Quote, '"'), Escape: o.Escape}
	if o.NoQuotes {
		d.Quote = 0
	}
	return d.Check()
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
	// Parquet says how Parquet objects' values are written.
	Parquet Parquet
	// RowGroupsPerChunk is how many Parquet row groups make a chunk; zero
	// means one.
	RowGroupsPerChunk int
}

// Planner splits objects into chunks. It reads the first line of CSV
// objects split at line ends (for the header) and the footer of Parquet
// objects (for the row groups); other objects are planned without I/O.
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
		if p.opts.Parquet != (Parquet{}) {
			pq := p.opts.Parquet
			base.Parquet = &pq
		}
		return split(base, int64(groups), int64(p.opts.RowGroupsPerChunk)), nil
	case format == FormatCSV:
		byLines := comp == CompressionNone && p.opts.CSV.NoQuotedNewlines
		c, err := p.csv(ctx, obj, comp, byLines)
		if errors.As(err, &enc) && comp == CompressionNone {
			// The header's read found the object compressed by its
			// Content-Encoding: it is read whole, decompressed, and its
			// header with it.
			comp, byLines = enc.Compression, false
			base.Compression = comp
			c, err = p.csv(ctx, obj, comp, false)
		}
		if err != nil {
			return nil, err
		}
		base.CSV = c
		if !byLines {
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

// csv works out the dialect and the columns of a CSV object. An object
// read whole (split false) has its header read with its records, where a
// header may span lines as any record may; one split at line ends has it
// read here, from its first line.
func (p *Planner) csv(ctx context.Context, obj Object, comp Compression, split bool) (*CSV, error) {
	o := p.opts.CSV
	c := &CSV{}
	tsv := isTSV(obj.Key)
	comma := o.Delimiter
	if comma == 0 {
		comma = ','
		if tsv {
			comma = '\t'
		}
	}
	if comma != ',' {
		c.Delimiter = string(comma)
	}
	switch {
	case o.NoQuotes || o.Quote == 0 && tsv:
		// Tab-separated values have no quoting: a field is what lies
		// between tabs, quotes and all.
		c.NoQuotes = true
	case o.Quote != 0 && o.Quote != '"':
		c.Quote = string(o.Quote)
	}
	if o.Escape != 0 && o.Escape != c.QuoteChar() {
		c.Escape = string(o.Escape)
	}
	d := csvrecord.Dialect{Comma: []byte(string(comma)), Quote: c.QuoteChar(), Escape: c.EscapeChar()}
	if err := d.Check(); err != nil {
		return nil, err
	}
	if o.NoHeader {
		if len(o.Columns) > 0 {
			c.Header = UniqueColumns(o.Columns)
		}
		return c, nil
	}
	if !split {
		c.HeaderFirst = true
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
	line, err := firstLine(bufio.NewReader(io.LimitReader(src, maxHeaderLine)))
	if err != nil {
		return nil, err
	}
	// A UTF-8 byte order mark, which Excel writes first, is not part of
	// the first column's name; package records drops it from the first
	// line too.
	line = bytes.TrimPrefix(line, []byte("\ufeff"))
	hp := csvrecord.Parser{Dialect: d}
	if col, err := hp.Add(line, nil, 1); err != nil || hp.Open() {
		if err == nil {
			err = fmt.Errorf("the quoted field that opens %s does not end on its line, and this CSV is split at line ends (CSV_NO_QUOTED_NEWLINES)", hp.Opened(1))
		} else {
			err = fmt.Errorf("%w (column %d)", err, col)
		}
		return nil, &ReadError{Object: obj, Err: fmt.Errorf("read CSV header: %w", err)}
	}
	header := make([]string, hp.Fields())
	for i := range header {
		header[i] = string(hp.Field(i))
	}
	c.Header = UniqueColumns(header)
	c.SkipFirstLine = true
	return c, nil
}

// firstLine reads the first line of a CSV object, without its line end:
// "\n", "\r\n" or "\r" alone.
func firstLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
		if b == '\n' || b == '\r' {
			return line, nil
		}
		line = append(line, b)
	}
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
