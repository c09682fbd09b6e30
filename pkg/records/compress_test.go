package records_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
)

// noisyLines returns n JSON Lines records that compress poorly, so that
// their compressed object spans several small chunks.
func noisyLines(n int) (string, []string) {
	r := rand.New(rand.NewChaCha8([32]byte{3}))
	var b strings.Builder
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf(`{"n":%d,"r":"%016x%016x"}`, i, r.Uint64(), r.Uint64())
		b.WriteString(want[i] + "\n")
	}
	return b.String(), want
}

// noisyCSV returns n CSV rows under the header id,r that compress poorly,
// and the JSON objects they are read as.
func noisyCSV(n int) (string, []string) {
	r := rand.New(rand.NewChaCha8([32]byte{4}))
	b := strings.Builder{}
	b.WriteString("id,r\n")
	want := make([]string, n)
	for i := range n {
		v := fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
		fmt.Fprintf(&b, "%d,%s\n", i, v)
		want[i] = fmt.Sprintf(`{"id":"%d","r":"%s"}`, i, v)
	}
	return b.String(), want
}

// readChunk reads one chunk with client, returning its record values, the
// offset of each and its errors.
func readChunk(client dataset.GetAPI, c dataset.Chunk) (vals []string, offsets []int64, errs []error) {
	for r, err := range records.Read(context.Background(), client, c, records.Options{}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vals = append(vals, string(r.Value))
		offsets = append(offsets, r.Offset)
	}
	return vals, offsets, errs
}

// TestReadContentEncoding reads objects stored with Content-Encoding gzip
// whose keys say nothing of it, larger than the chunk size, on both S3
// stand-ins (each returns Content-Encoding on GET): planned as one chunk,
// every record is read. A chunk planned before, as a byte range of the
// compressed bytes, is an *EncodingError, not bad records.
func TestReadContentEncoding(t *testing.T) {
	lines, want := noisyLines(300)
	clients := map[string]*s3.Client{
		"gofakes3": localaws.FakeS3(t),
		"moto":     localaws.S3Client(localaws.Endpoint(t, localaws.EnvS3)),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			bucket := fmt.Sprintf("renc-%s-%d", name, rand.Uint32())
			if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			opts := dataset.PlanOptions{ChunkSize: 1024}
			put(t, c, bucket, "events.jsonl", gz(t, lines), "gzip")
			obj := head(t, c, bucket, "events.jsonl")
			got, errs, chunks := readAll(t, c, obj, opts)
			if len(chunks) != 1 || obj.Size <= opts.ChunkSize {
				t.Fatalf("%d chunks of a %d-byte object, want one", len(chunks), obj.Size)
			}
			if diff := cmp.Diff(want, got); diff != "" || len(errs) != 0 {
				t.Errorf("errors %v; records (-want +got):\n%s", errs, diff)
			}

			csv, csvWant := noisyCSV(300)
			put(t, c, bucket, "rows.csv", gz(t, csv), "gzip")
			got, errs, chunks = readAll(t, c, head(t, c, bucket, "rows.csv"), dataset.PlanOptions{ChunkSize: 1024, CSV: dataset.CSVOptions{NoQuotedNewlines: true}})
			if diff := cmp.Diff(csvWant, got); len(chunks) != 1 || diff != "" || len(errs) != 0 {
				t.Errorf("csv: %d chunks, errors %.300v; records (-want +got):\n%.2000s", len(chunks), errs, diff)
			}

			// A task planned before the encoding was known.
			old := dataset.Chunk{Object: obj, Index: 1, Count: 3, Start: 1024, End: 2048, Format: dataset.FormatJSONL}
			for _, ch := range []dataset.Chunk{old, {Object: obj, Index: 0, Count: 3, Start: 0, End: 1024, Format: dataset.FormatJSONL}} {
				vals, _, errs := readChunk(c, ch)
				var enc *dataset.EncodingError
				if len(vals) != 0 || len(errs) != 1 || !errors.As(errs[0], &enc) || enc.Compression != dataset.CompressionGzip {
					t.Errorf("chunk [%d,%d) planned as bytes: %d records, errors %v; want one EncodingError", ch.Start, ch.End, len(vals), errs)
				}
			}
		})
	}
}

// cutOnce resets the body of its first GET after At bytes; later GETs go
// through.
type cutOnce struct {
	*s3.Client
	At     int64
	mu     sync.Mutex
	ranges []string
}

func (c *cutOnce) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	c.ranges = append(c.ranges, aws.ToString(in.Range))
	first := len(c.ranges) == 1
	c.mu.Unlock()
	out, err := c.Client.GetObject(ctx, in, opts...)
	if err == nil && first {
		out.Body = &resetAfter{ReadCloser: out.Body, left: c.At}
	}
	return out, err
}

type resetAfter struct {
	io.ReadCloser
	left int64
}

func (b *resetAfter) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, syscall.ECONNRESET
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, err
}

// TestReadContentEncodingResumes cuts the connection in the middle of the
// whole read of a Content-Encoding gzip object: the read goes on from the
// next compressed byte with a Range, under the same decompressor, and every
// record is read once. A task that resumes at a record's offset (in the
// decompressed stream) reads the object from its start again, as .gz
// objects do, and finds its record at the same offset.
func TestReadContentEncodingResumes(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	lines, want := noisyLines(300)
	body := gz(t, lines)
	put(t, c, bucket, "cut.jsonl", body, "gzip")
	obj := head(t, c, bucket, "cut.jsonl")
	chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: 1024}).Plan(t.Context(), obj)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("plan: %v, %v", chunks, err)
	}
	cut := &cutOnce{Client: c, At: int64(len(body) / 2)}
	got, offsets, errs := readChunk(cut, chunks[0])
	if diff := cmp.Diff(want, got); diff != "" || len(errs) != 0 {
		t.Errorf("errors %v; records (-want +got):\n%s", errs, diff)
	}
	if wantRanges := []string{"", fmt.Sprintf("bytes=%d-", cut.At)}; !cmp.Equal(cut.ranges, wantRanges) {
		t.Errorf("GETs %q, want %q: the whole object, then the rest after the cut", cut.ranges, wantRanges)
	}
	// Offsets are in the decompressed stream, where the records are.
	if at := int64(strings.Index(lines, want[150])); offsets[150] != at {
		t.Errorf("record 150 at offset %d, want %d", offsets[150], at)
	}
}

// TestReadCorrupt reads compressed objects whose stream is truncated or
// corrupt although S3 served every byte: the records before the damage are
// read, then the read ends with an error that wraps dataset.ErrCorrupt and
// says where, once, without resuming.
func TestReadCorrupt(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	lines, want := noisyLines(300)
	full := gz(t, lines)
	badCRC := append([]byte(nil), full...)
	binary.LittleEndian.PutUint32(badCRC[len(badCRC)-8:], binary.LittleEndian.Uint32(badCRC[len(badCRC)-8:])+1)
	// BTYPE 11 in the first block header: a block type deflate refuses.
	badBlock := append([]byte(nil), full...)
	badBlock[10] |= 0x06
	// Frames of 50 lines each, so that a cut leaves whole frames before it.
	var zframes []byte
	for i := 0; i < len(want); i += 50 {
		zframes = append(zframes, zst(t, strings.Join(want[i:i+50], "\n")+"\n")...)
	}
	csv, csvWant := noisyCSV(300)
	csvGz := gz(t, csv)
	tests := []struct {
		name, key, encoding string
		body                []byte
		want                []string // the records before the damage are a prefix of it
		all                 bool     // every record is read before the error
		says                string   // in the error
	}{
		{name: "truncated gzip", key: "t.jsonl.gz", body: full[:len(full)/2], says: "gzip stream"},
		{name: "truncated gzip by Content-Encoding", key: "t.jsonl", encoding: "gzip", body: full[:len(full)/2], says: "unexpected EOF"},
		{name: "truncated zstd", key: "t.jsonl.zst", body: zframes[:len(zframes)/2], says: "zstd stream"},
		{name: "truncated gzip csv", key: "t.csv.gz", body: csvGz[:len(csvGz)/2], want: csvWant, says: "gzip stream"},
		{name: "gzip trailer cut", key: "trailer.jsonl.gz", body: full[:len(full)-4], all: true, says: "unexpected EOF"},
		{name: "bad checksum", key: "crc.jsonl.gz", body: badCRC, all: true, says: "checksum"},
		{name: "corrupt deflate block", key: "block.jsonl.gz", body: badBlock, says: "corrupt input"},
		{name: "not gzip", key: "header.jsonl.gz", body: []byte("this is not gzip at all"), says: "invalid header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, c, bucket, tt.key, tt.body, tt.encoding)
			chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, tt.key))
			if err != nil || len(chunks) != 1 {
				t.Fatalf("plan: %v, %v", chunks, err)
			}
			cc := &cutOnce{Client: c, At: 1 << 40} // counts the GETs
			got, offsets, errs := readChunk(cc, chunks[0])
			var re *dataset.ReadError
			if len(errs) != 1 || !errors.Is(errs[0], dataset.ErrCorrupt) || !errors.As(errs[0], &re) || !strings.Contains(errs[0].Error(), tt.says) || !strings.Contains(errs[0].Error(), tt.key) {
				t.Fatalf("%d errors (first %.300v, last %.300v); want one that wraps ErrCorrupt, names the object and says %q", len(errs), errs[0], errs[len(errs)-1], tt.says)
			}
			if len(cc.ranges) != 1 {
				t.Errorf("GETs %q: a corrupt stream is not read again", cc.ranges)
			}
			all := want
			if tt.want != nil {
				all = tt.want
			}
			if len(got) > len(all) || !slices.Equal(got, all[:len(got)]) || (tt.all && len(got) != len(all)) {
				t.Errorf("%d records before the error, want the first ones (all: %v)", len(got), tt.all)
			}
			if strings.HasPrefix(tt.name, "truncated") && len(got) == 0 {
				t.Errorf("no record before the cut")
			}
			// The error's offset is in the decompressed stream, past the
			// last record read.
			if len(offsets) > 0 && re.Offset <= offsets[len(offsets)-1] {
				t.Errorf("error at offset %d, not after the last record read at %d", re.Offset, offsets[len(offsets)-1])
			}
		})
	}
}

// TestReadNetworkCutIsNotCorrupt reads a .gz object through a network path
// that breaks at the same byte every time: the reader resumes as often as
// it may, then ends with the network's error, which is not ErrCorrupt (a
// continuation may read the rest later); once the path heals, the same
// chunk reads whole.
func TestReadNetworkCutIsNotCorrupt(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	lines, want := noisyLines(300)
	body := gz(t, lines)
	put(t, c, bucket, "net.jsonl.gz", body, "")
	chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, "net.jsonl.gz"))
	if err != nil || len(chunks) != 1 {
		t.Fatalf("plan: %v, %v", chunks, err)
	}
	broken := &s3fault.CutAt{S3API: c, At: int64(len(body) / 2)}
	got, _, errs := readChunk(broken, chunks[0])
	if len(errs) != 1 || errors.Is(errs[0], dataset.ErrCorrupt) || !errors.Is(errs[0], syscall.ECONNRESET) {
		t.Fatalf("errors %v; want the reset connection, not ErrCorrupt", errs)
	}
	if len(got) == 0 || !cmp.Equal(got, want[:len(got)]) {
		t.Errorf("%d records before the cut, want the first ones", len(got))
	}
	broken.Heal()
	got, _, errs = readChunk(broken, chunks[0])
	if diff := cmp.Diff(want, got); diff != "" || len(errs) != 0 {
		t.Errorf("healed: errors %v; records (-want +got):\n%s", errs, diff)
	}
}

// TestParquetCorrupt opens Parquet objects whose footer is damaged: an
// error that wraps dataset.ErrCorrupt, and never a GET of the whole object.
// A footer that cannot be fetched (the network) is not ErrCorrupt.
func TestParquetCorrupt(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	pq, _ := parquetFile(t, 2, 10)
	footerLen := int(binary.LittleEndian.Uint32(pq[len(pq)-8:]))
	garbled := append([]byte(nil), pq...)
	for i := len(pq) - 8 - footerLen; i < len(pq)-8; i++ {
		garbled[i] = 0xff
	}
	tooLong := append([]byte(nil), pq...)
	binary.LittleEndian.PutUint32(tooLong[len(pq)-8:], uint32(len(pq)*4))
	for _, tt := range []struct {
		name string
		body []byte
	}{
		{"truncated", pq[:len(pq)-20]},
		{"garbled footer", garbled},
		{"footer longer than the file", tooLong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.ReplaceAll(tt.name, " ", "-") + ".parquet"
			put(t, c, bucket, key, tt.body, "")
			cc := &cutOnce{Client: c, At: 1 << 40}
			_, err := dataset.NewPlanner(cc, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, key))
			if !errors.Is(err, dataset.ErrCorrupt) || !strings.Contains(err.Error(), key) {
				t.Errorf("plan: %v; want ErrCorrupt naming the object", err)
			}
			for _, r := range cc.ranges {
				if r == "" {
					t.Errorf("GETs %q: one of the whole object", cc.ranges)
					break
				}
			}
		})
	}
	t.Run("corrupt page", func(t *testing.T) {
		// Bytes of the second row group's first page changed: its page
		// checksum no longer matches. The first group's rows are read.
		f, err := parquet.OpenFile(bytes.NewReader(pq), int64(len(pq)))
		if err != nil {
			t.Fatal(err)
		}
		at := f.Metadata().RowGroups[1].Columns[0].MetaData.DataPageOffset + 20
		bad := append([]byte(nil), pq...)
		for i := at; i < at+8; i++ {
			bad[i] ^= 0xff
		}
		put(t, c, bucket, "page.parquet", bad, "")
		chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{RowGroupsPerChunk: 2}).Plan(t.Context(), head(t, c, bucket, "page.parquet"))
		if err != nil || len(chunks) != 1 {
			t.Fatalf("plan: %v, %v", chunks, err)
		}
		got, _, errs := readChunk(c, chunks[0])
		var re *dataset.ReadError
		if len(got) != 10 || len(errs) != 1 || !errors.Is(errs[0], dataset.ErrCorrupt) || !errors.As(errs[0], &re) || re.Offset != 10 {
			t.Errorf("%d rows, errors %v; want the first group's 10, then ErrCorrupt at row 10", len(got), errs)
		}
	})
	t.Run("pages out of reach", func(t *testing.T) {
		// The footer can be read, the pages cannot (the network): not
		// ErrCorrupt.
		put(t, c, bucket, "far.parquet", pq, "")
		chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, "far.parquet"))
		if err != nil || len(chunks) != 2 {
			t.Fatalf("plan: %v, %v", chunks, err)
		}
		_, _, errs := readChunk(&failRanges{Client: c, from: 1, to: int64(len(pq) - 8 - footerLen)}, chunks[1])
		if len(errs) != 1 || errors.Is(errs[0], dataset.ErrCorrupt) || !errors.Is(errs[0], syscall.ECONNRESET) {
			t.Errorf("errors %v; want the reset connection, not ErrCorrupt", errs)
		}
	})
	put(t, c, bucket, "ok.parquet", pq, "")
	broken := &s3fault.CutAt{S3API: c, At: 0}
	_, err := dataset.NewPlanner(broken, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, "ok.parquet"))
	if err == nil || errors.Is(err, dataset.ErrCorrupt) {
		t.Errorf("plan through a broken network: %v; want an error that is not ErrCorrupt", err)
	}
}

// failRanges fails, with a reset connection, every GET of a range that
// starts in [from, to).
type failRanges struct {
	*s3.Client
	from, to int64
}

func (f *failRanges) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	var start int64
	if _, err := fmt.Sscanf(aws.ToString(in.Range), "bytes=%d-", &start); err == nil && start >= f.from && start < f.to {
		return nil, fmt.Errorf("GET from byte %d: %w", start, syscall.ECONNRESET)
	}
	return f.Client.GetObject(ctx, in, opts...)
}
