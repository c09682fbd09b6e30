package dataset_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// countingClient records the Range of each GET a real client makes.
type countingClient struct {
	*s3.Client
	mu     sync.Mutex
	ranges []string
}

func (c *countingClient) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	c.ranges = append(c.ranges, aws.ToString(in.Range))
	c.mu.Unlock()
	return c.Client.GetObject(ctx, in, opts...)
}

func (c *countingClient) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.ranges
	c.ranges = nil
	return r
}

// encodedLines returns n JSON Lines records that compress poorly, so that
// a compressed object of them is larger than a small chunk.
func encodedLines(n int) string {
	r := rand.New(rand.NewChaCha8([32]byte{2}))
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"n":%d,"r":"%016x%016x"}`+"\n", i, r.Uint64(), r.Uint64())
	}
	return b.String()
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func zstded(t *testing.T, s string) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll([]byte(s), nil)
}

func putEncoded(t *testing.T, c *s3.Client, bucket, key string, body []byte, encoding string) dataset.Object {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if encoding != "" {
		in.ContentEncoding = aws.String(encoding)
	}
	if _, err := c.PutObject(t.Context(), in); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	obj, err := dataset.Head(t.Context(), c, bucket, key, "")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// standIns returns S3 clients of both stand-ins, each of which returns
// Content-Encoding on GET, ranged GET and HEAD: the in-process gofakes3 and
// moto_server.
func standIns(t *testing.T) map[string]*s3.Client {
	t.Helper()
	return map[string]*s3.Client{
		"gofakes3": localaws.FakeS3(t),
		"moto":     localaws.S3Client(localaws.Endpoint(t, localaws.EnvS3)),
	}
}

// TestPlanContentEncoding plans objects whose key says nothing of their
// compression but whose Content-Encoding does: each is one chunk that
// says how it is compressed, as a .gz key is, instead of byte ranges of
// compressed bytes. Only an object the planner would cut costs a GET, of
// one byte.
func TestPlanContentEncoding(t *testing.T) {
	const chunk = 1024
	lines := encodedLines(200)
	csvBody := "id,name\n" + strings.ReplaceAll(strings.ReplaceAll(lines, `{"n":`, ""), `,"r":`, ",")
	for name, s3c := range standIns(t) {
		t.Run(name, func(t *testing.T) {
			bucket := newBucket(t, s3c, fmt.Sprintf("enc-%s-%d", name, rand.Uint32()))
			c := &countingClient{Client: s3c}
			tests := []struct {
				name, key, encoding string
				body                []byte
				opts                dataset.PlanOptions
				comp                dataset.Compression
				header              []string
				headerFirst         bool
				gets                []string // the planner's GETs
			}{
				{name: "gzip jsonl", key: "a.jsonl", encoding: "gzip", body: gzipped(lines),
					comp: dataset.CompressionGzip, gets: []string{"bytes=0-0"}},
				{name: "zstd text", key: "a.log", encoding: "zstd", body: zstded(t, lines),
					comp: dataset.CompressionZstd, gets: []string{"bytes=0-0"}},
				{name: "gzip csv with header", key: "h.csv", encoding: "gzip", body: gzipped(csvBody),
					opts: dataset.PlanOptions{CSV: dataset.CSVOptions{NoQuotedNewlines: true}},
					comp: dataset.CompressionGzip, headerFirst: true,
					// The header's ranged read learns the encoding; the
					// object is then read whole, its header with it.
					gets: []string{"bytes=0-"}},
				{name: "gzip csv without header", key: "n.csv", encoding: "gzip", body: gzipped(csvBody),
					opts: dataset.PlanOptions{CSV: dataset.CSVOptions{NoQuotedNewlines: true, NoHeader: true, Columns: []string{"x", "y"}}},
					comp: dataset.CompressionGzip, header: []string{"x", "y"}, gets: []string{"bytes=0-0"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if len(tt.body) <= chunk {
						t.Fatalf("the object is %d bytes, want more than a chunk", len(tt.body))
					}
					obj := putEncoded(t, s3c, bucket, tt.key, tt.body, tt.encoding)
					c.take()
					tt.opts.ChunkSize = chunk
					chunks, err := dataset.NewPlanner(c, tt.opts).Plan(t.Context(), obj)
					if err != nil {
						t.Fatal(err)
					}
					if len(chunks) != 1 || chunks[0].Compression != tt.comp || chunks[0].Start != 0 || chunks[0].End != obj.Size || !chunks[0].Whole() {
						t.Fatalf("chunks %+v: want one whole chunk, compression %q", chunks, tt.comp)
					}
					if tt.header != nil && !cmp.Equal(chunks[0].CSV.Header, tt.header) {
						t.Errorf("header %q, want %q", chunks[0].CSV.Header, tt.header)
					}
					if tt.headerFirst && (chunks[0].CSV == nil || !chunks[0].CSV.HeaderFirst) {
						t.Errorf("CSV %+v, want the header read with the records", chunks[0].CSV)
					}
					if got := c.take(); !cmp.Equal(got, tt.gets) {
						t.Errorf("planning GETs %q, want %q", got, tt.gets)
					}
				})
			}
			t.Run("not encoded", func(t *testing.T) {
				obj := putEncoded(t, s3c, bucket, "plain.jsonl", []byte(lines), "")
				c.take()
				chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: chunk}).Plan(t.Context(), obj)
				if err != nil {
					t.Fatal(err)
				}
				if want := int((obj.Size + chunk - 1) / chunk); len(chunks) != want || chunks[0].Compression != dataset.CompressionNone {
					t.Errorf("%d chunks, compression %q: want %d uncompressed byte ranges", len(chunks), chunks[0].Compression, want)
				}
				if got := c.take(); !cmp.Equal(got, []string{"bytes=0-0"}) {
					t.Errorf("planning GETs %q, want one of the first byte", got)
				}
			})
			t.Run("small", func(t *testing.T) {
				// One chunk whatever its encoding: its read decodes what
				// the GET's Content-Encoding says, so planning asks nothing.
				obj := putEncoded(t, s3c, bucket, "small.jsonl", gzipped(`{"a":1}`+"\n"), "gzip")
				c.take()
				chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: chunk}).Plan(t.Context(), obj)
				if err != nil || len(chunks) != 1 || !chunks[0].Whole() {
					t.Fatalf("chunks %+v, %v: want one whole chunk", chunks, err)
				}
				if got := c.take(); len(got) != 0 {
					t.Errorf("planning GETs %q, want none", got)
				}
			})
			t.Run("parquet", func(t *testing.T) {
				obj := putEncoded(t, s3c, bucket, "p.parquet", gzipped("PAR1 not really PAR1"), "gzip")
				_, err := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: chunk}).Plan(t.Context(), obj)
				if err == nil || !strings.Contains(err.Error(), `compressed Parquet file is not supported (Content-Encoding "gzip")`) {
					t.Errorf("plan: %v, want the compressed Parquet file refused", err)
				}
			})
		})
	}
}

// TestReaderRefusesEncodedRange reads a range of an object stored with
// Content-Encoding gzip, as a chunk planned before the encoding was known
// does: the read fails at once with an *EncodingError, without a byte of
// compressed data and without resuming, while a whole read gets the bytes
// for its caller to decode.
func TestReaderRefusesEncodedRange(t *testing.T) {
	s3c := localaws.FakeS3(t)
	bucket := newBucket(t, s3c, "ranged")
	body := gzipped(encodedLines(100))
	obj := putEncoded(t, s3c, bucket, "e.jsonl", body, "gzip")
	c := &countingClient{Client: s3c}
	for _, start := range []int64{0, 100} {
		r := dataset.NewReader(t.Context(), c, obj, start, 500)
		n, err := r.Read(make([]byte, 64))
		r.Close()
		var enc *dataset.EncodingError
		if n != 0 || !errors.As(err, &enc) || enc.Compression != dataset.CompressionGzip || enc.ContentEncoding != "gzip" {
			t.Errorf("start %d: read %d bytes, %v; want an EncodingError naming gzip", start, n, err)
		}
		if errors.Is(err, dataset.ErrCorrupt) {
			t.Errorf("start %d: %v is ErrCorrupt; the bytes are not corrupt", start, err)
		}
		if got := c.take(); len(got) != 1 {
			t.Errorf("start %d: GETs %q, want one, not resumed", start, got)
		}
	}
	r := dataset.NewReader(t.Context(), c, obj, 0, 0)
	defer r.Close()
	got := new(bytes.Buffer)
	if _, err := got.ReadFrom(r); err != nil || !bytes.Equal(got.Bytes(), body) || r.ContentEncoding() != "gzip" {
		t.Errorf("whole read: %d bytes, %v, encoding %q; want the stored bytes and gzip", got.Len(), err, r.ContentEncoding())
	}
}
