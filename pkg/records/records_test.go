package records_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
)

func newBucket(t *testing.T, c *s3.Client, versioned bool) string {
	t.Helper()
	b := strings.ToLower(fmt.Sprintf("b%d", len(t.Name())*7919%100000))
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if versioned {
		_, err := c.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{
			Bucket:                  aws.String(b),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
		})
		if err != nil {
			t.Fatalf("versioning: %v", err)
		}
	}
	return b
}

func put(t *testing.T, c *s3.Client, bucket, key string, body []byte, encoding string) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if encoding != "" {
		in.ContentEncoding = aws.String(encoding)
	}
	if _, err := c.PutObject(t.Context(), in); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// readAll plans obj and reads its chunks in parallel, returning the record
// values in object order and the errors.
func readAll(t *testing.T, c *s3.Client, obj dataset.Object, opts dataset.PlanOptions) ([]string, []error, []dataset.Chunk) {
	t.Helper()
	chunks, err := dataset.NewPlanner(c, opts).Plan(t.Context(), obj)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	vals := make([][]string, len(chunks))
	errs := make([][]error, len(chunks))
	var wg sync.WaitGroup
	for i, ch := range chunks {
		wg.Go(func() {
			for r, err := range records.Read(context.Background(), c, ch, records.Options{}) {
				if err != nil {
					errs[i] = append(errs[i], err)
					continue
				}
				vals[i] = append(vals[i], string(r.Value))
			}
		})
	}
	wg.Wait()
	var allV []string
	var allE []error
	for i := range chunks {
		allV = append(allV, vals[i]...)
		allE = append(allE, errs[i]...)
	}
	return allV, allE, chunks
}

func head(t *testing.T, c *s3.Client, bucket, key string) dataset.Object {
	t.Helper()
	obj, err := dataset.Head(t.Context(), c, bucket, key, "")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func gz(t *testing.T, data string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(data))
	w.Close()
	return b.Bytes()
}

func zst(t *testing.T, data string) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll([]byte(data), nil)
}

type row struct {
	ID   int64   `parquet:"id"`
	Name string  `parquet:"name"`
	Temp float64 `parquet:"temp"`
	OK   bool    `parquet:"ok"`
}

func parquetFile(t *testing.T, groups, perGroup int) ([]byte, []string) {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewGenericWriter[row](&b)
	var want []string
	for g := range groups {
		var rows []row
		for i := range perGroup {
			id := int64(g*perGroup + i)
			rows = append(rows, row{ID: id, Name: fmt.Sprintf("n %d", id), Temp: float64(id) / 2, OK: id%2 == 0})
			want = append(want, fmt.Sprintf(`{"id":%d,"name":"n %d","temp":%v,"ok":%v}`, id, id, float64(id)/2, id%2 == 0))
		}
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), want
}

func TestFormats(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	jsonl := "{\"a\":1}\n{\"a\":2}\r\n\n{\"a\":\"three\"}\n" + `{"a":"` + strings.Repeat("long", 40) + `"}` + "\n{\"a\":5}"
	jsonlWant := []string{`{"a":1}`, `{"a":2}`, `{"a":"three"}`, `{"a":"` + strings.Repeat("long", 40) + `"}`, `{"a":5}`}
	pq, pqWant := parquetFile(t, 3, 4)
	tests := []struct {
		name     string
		key      string
		body     []byte
		encoding string
		opts     dataset.PlanOptions
		want     []string
		chunks   int
	}{
		{name: "jsonl in small chunks", key: "in/a.jsonl", body: []byte(jsonl), opts: dataset.PlanOptions{ChunkSize: 16}, want: jsonlWant, chunks: (len(jsonl) + 15) / 16},
		{name: "jsonl one chunk", key: "in/b.ndjson", body: []byte(jsonl), want: jsonlWant, chunks: 1},
		{name: "text", key: "t.txt", body: []byte("one\ntwo  \r\n\nthree"), opts: dataset.PlanOptions{ChunkSize: 4}, want: []string{"one", "two  ", "three"}, chunks: 5},
		{name: "gzip jsonl", key: "g.jsonl.gz", body: gz(t, jsonl), opts: dataset.PlanOptions{ChunkSize: 16}, want: jsonlWant, chunks: 1},
		{name: "zstd jsonl", key: "z.jsonl.zst", body: zst(t, jsonl), opts: dataset.PlanOptions{ChunkSize: 16}, want: jsonlWant, chunks: 1},
		{name: "gzip by Content-Encoding", key: "e.jsonl", body: gz(t, jsonl), encoding: "gzip", want: jsonlWant, chunks: 1},
		{
			name: "csv chunked", key: "c.csv", body: []byte("id,name\n1,ann\r\n2,\"bo, b\"\n3,\"say \"\"hi\"\"\"\n"),
			opts: dataset.PlanOptions{ChunkSize: 8, CSV: dataset.CSVOptions{NoQuotedNewlines: true}},
			want: []string{`{"id":"1","name":"ann"}`, `{"id":"2","name":"bo, b"}`, `{"id":"3","name":"say \"hi\""}`}, chunks: 5,
		},
		{
			name: "csv quoted newline read whole", key: "q.csv", body: []byte("id,note\n1,\"two\nlines\"\n2,plain\n"),
			opts: dataset.PlanOptions{ChunkSize: 8},
			want: []string{`{"id":"1","note":"two\nlines"}`, `{"id":"2","note":"plain"}`}, chunks: 1,
		},
		{name: "tsv", key: "t.tsv", body: []byte("a\tb\n1\t2\n"), want: []string{`{"a":"1","b":"2"}`}, chunks: 1},
		{
			name: "csv without header", key: "n.csv", body: []byte("1;x\n2;y\n"),
			opts: dataset.PlanOptions{CSV: dataset.CSVOptions{NoHeader: true, Delimiter: ';', Columns: []string{"id", "v"}}},
			want: []string{`{"id":"1","v":"x"}`, `{"id":"2","v":"y"}`}, chunks: 1,
		},
		{
			name: "csv without header or names", key: "u.csv", body: []byte("1,x\n2,y,z\n"),
			opts: dataset.PlanOptions{CSV: dataset.CSVOptions{NoHeader: true}},
			want: []string{`{"c0":"1","c1":"x"}`, `{"c0":"2","c1":"y","c2":"z"}`}, chunks: 1,
		},
		{name: "gzip csv", key: "c.csv.gz", body: gz(t, "h\nv1\nv2\n"), want: []string{`{"h":"v1"}`, `{"h":"v2"}`}, chunks: 1},
		{name: "parquet row groups", key: "p.parquet", body: pq, want: pqWant, chunks: 3},
		{name: "parquet two groups a chunk", key: "p2.parquet", body: pq, opts: dataset.PlanOptions{RowGroupsPerChunk: 2}, want: pqWant, chunks: 2},
		{name: "format override", key: "data.bin", body: []byte("x\ny\n"), opts: dataset.PlanOptions{Format: dataset.FormatText}, want: []string{"x", "y"}, chunks: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, c, bucket, tt.key, tt.body, tt.encoding)
			got, errs, chunks := readAll(t, c, head(t, c, bucket, tt.key), tt.opts)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if len(chunks) != tt.chunks {
				t.Errorf("%d chunks, want %d", len(chunks), tt.chunks)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangedObject(t *testing.T) {
	c := localaws.FakeS3(t)
	t.Run("etag pin", func(t *testing.T) {
		bucket := newBucket(t, c, false)
		put(t, c, bucket, "k.jsonl", []byte("{\"v\":1}\n"), "")
		obj := head(t, c, bucket, "k.jsonl")
		// An unversioned bucket on S3 reports no version; gofakes3 reports
		// one anyway, so drop it to pin by ETag alone.
		obj.VersionID = ""
		chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		put(t, c, bucket, "k.jsonl", []byte("{\"v\":2}\n"), "")
		for _, err := range records.Read(t.Context(), c, chunks[0], records.Options{}) {
			if !errors.Is(err, dataset.ErrChanged) || !strings.Contains(err.Error(), "s3://"+bucket+"/k.jsonl") {
				t.Fatalf("err = %v, want ErrChanged naming the object", err)
			}
			return
		}
		t.Fatal("read a record of a changed object")
	})
	t.Run("version pin", func(t *testing.T) {
		bucket := newBucket(t, c, true)
		put(t, c, bucket, "k.jsonl", []byte("{\"v\":1}\n"), "")
		obj := head(t, c, bucket, "k.jsonl")
		if obj.VersionID == "" {
			t.Fatal("no version id on a versioned bucket")
		}
		put(t, c, bucket, "k.jsonl", []byte("{\"v\":2}\n{\"v\":3}\n"), "")
		got, errs, _ := readAll(t, c, obj, dataset.PlanOptions{})
		if len(errs) > 0 || !cmp.Equal(got, []string{`{"v":1}`}) {
			t.Errorf("read %v %v, want the planned version's record", got, errs)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		bucket := newBucket(t, c, false)
		put(t, c, bucket, "gone.jsonl", []byte("{}\n"), "")
		obj := head(t, c, bucket, "gone.jsonl")
		if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("gone.jsonl")}); err != nil {
			t.Fatal(err)
		}
		_, errs, _ := readAll(t, c, obj, dataset.PlanOptions{})
		if len(errs) != 1 || !errors.Is(errs[0], dataset.ErrNotFound) {
			t.Errorf("errors %v, want ErrNotFound", errs)
		}
	})
}

func TestMalformed(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	t.Run("bad gzip", func(t *testing.T) {
		put(t, c, bucket, "bad.jsonl.gz", []byte("this is not gzip at all"), "")
		_, errs, _ := readAll(t, c, head(t, c, bucket, "bad.jsonl.gz"), dataset.PlanOptions{})
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "gzip") || !strings.Contains(errs[0].Error(), "bad.jsonl.gz") {
			t.Errorf("errors %v, want one gzip error naming the object", errs)
		}
	})
	t.Run("truncated gzip", func(t *testing.T) {
		full := gz(t, strings.Repeat("{\"a\":1}\n", 1000))
		put(t, c, bucket, "trunc.jsonl.gz", full[:len(full)/2], "")
		got, errs, _ := readAll(t, c, head(t, c, bucket, "trunc.jsonl.gz"), dataset.PlanOptions{})
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "offset") {
			t.Errorf("errors %v after %d records, want one error with an offset", errs, len(got))
		}
	})
	t.Run("truncated parquet", func(t *testing.T) {
		pq, _ := parquetFile(t, 2, 10)
		put(t, c, bucket, "trunc.parquet", pq[:len(pq)-20], "")
		_, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), head(t, c, bucket, "trunc.parquet"))
		if err == nil || !strings.Contains(err.Error(), "trunc.parquet") {
			t.Errorf("plan: %v, want an error naming the object", err)
		}
	})
	t.Run("jsonl line that is not JSON", func(t *testing.T) {
		// A byte order mark first, a line that is not JSON, a JSON value
		// that is not an object, and a blank line.
		// The last line holds a raw control character in a string, which
		// JSON does not allow.
		body := "\xef\xbb\xbf{\"a\":1}\nvalue: 2, not json\n[3]\n\n{\"a\":\n{\"a\":5}\n{\"c\":\"\x0e\"}\n"
		for _, opts := range []dataset.PlanOptions{{}, {ChunkSize: 7}} {
			put(t, c, bucket, "mixed.jsonl", []byte(body), "")
			got, errs, _ := readAll(t, c, head(t, c, bucket, "mixed.jsonl"), opts)
			if diff := cmp.Diff([]string{`{"a":1}`, `[3]`, `{"a":5}`}, got); diff != "" {
				t.Errorf("chunk size %d: records (-want +got):\n%s", opts.ChunkSize, diff)
			}
			var offsets []int64
			for _, err := range errs {
				var re *records.RecordError
				if !errors.As(err, &re) || !errors.Is(err, records.ErrNotJSON) {
					t.Fatalf("error %v is not a RecordError wrapping ErrNotJSON", err)
				}
				offsets = append(offsets, re.Offset)
			}
			if !cmp.Equal(offsets, []int64{11, 35, 49}) {
				t.Errorf("chunk size %d: bad records at %v, want offsets [11 35 49]: %v", opts.ChunkSize, offsets, errs)
			}
		}
	})
	t.Run("csv quote that does not end", func(t *testing.T) {
		// A stray quote opens the first field of line 3, and no quote ends
		// it: that line is one bad record, and the rows after it are
		// read, whole or in chunks.
		put(t, c, bucket, "quote.csv", []byte("n\na2\n\"unterminated\nb3\nc4\n"), "")
		for _, opts := range []dataset.PlanOptions{{}, {ChunkSize: 4, CSV: dataset.CSVOptions{NoQuotedNewlines: true}}} {
			got, errs, _ := readAll(t, c, head(t, c, bucket, "quote.csv"), opts)
			if diff := cmp.Diff([]string{`{"n":"a2"}`, `{"n":"b3"}`, `{"n":"c4"}`}, got); diff != "" {
				t.Errorf("chunk size %d: records (-want +got):\n%s", opts.ChunkSize, diff)
			}
			var re *records.RecordError
			if len(errs) != 1 || !errors.As(errs[0], &re) || !errors.Is(errs[0], csv.ErrQuote) || re.Offset != 5 {
				t.Errorf("chunk size %d: errors %v; want one RecordError wrapping csv.ErrQuote at offset 5", opts.ChunkSize, errs)
			}
		}
	})
	t.Run("csv wrong column count", func(t *testing.T) {
		for _, opts := range []dataset.PlanOptions{{}, {ChunkSize: 5, CSV: dataset.CSVOptions{NoQuotedNewlines: true}}} {
			put(t, c, bucket, "cols.csv", []byte("a,b\n1,2\n3\n4,5,6\n7,8\n"), "")
			got, errs, _ := readAll(t, c, head(t, c, bucket, "cols.csv"), opts)
			if diff := cmp.Diff([]string{`{"a":"1","b":"2"}`, `{"a":"7","b":"8"}`}, got); diff != "" {
				t.Errorf("chunk size %d: records (-want +got):\n%s", opts.ChunkSize, diff)
			}
			var lines []int64
			for _, err := range errs {
				var re *records.RecordError
				if !errors.As(err, &re) {
					t.Fatalf("error %v is not a RecordError", err)
				}
				lines = append(lines, re.Line)
			}
			// Line numbers are known when a chunk starts at the beginning.
			if opts.ChunkSize == 0 && !cmp.Equal(lines, []int64{3, 4}) {
				t.Errorf("bad rows on lines %v, want [3 4]: %v", lines, errs)
			}
			if len(errs) != 2 {
				t.Errorf("%d errors, want 2: %v", len(errs), errs)
			}
		}
	})
}
