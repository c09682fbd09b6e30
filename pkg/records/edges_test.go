package records_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
)

// at is a record, or a bad record (Value ""), at its offset.
type at struct {
	Offset int64
	Value  string
}

// readOffsets plans obj and reads its chunks one after another, returning
// every record and bad record at its offset; any other error fails the
// test.
func readOffsets(t *testing.T, c *s3.Client, obj dataset.Object, opts dataset.PlanOptions) ([]at, []dataset.Chunk) {
	t.Helper()
	chunks, err := dataset.NewPlanner(c, opts).Plan(t.Context(), obj)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var out []at
	for _, ch := range chunks {
		for r, err := range records.Read(t.Context(), c, ch, records.Options{}) {
			var re *records.RecordError
			switch {
			case err == nil:
				out = append(out, at{r.Offset, string(r.Value)})
			case errors.As(err, &re):
				out = append(out, at{Offset: re.Offset})
			default:
				t.Fatalf("chunk %d: %v", ch.Index, err)
			}
		}
	}
	return out, chunks
}

// TestByteOrderMark reads objects that start with a UTF-8 byte order mark,
// as Excel and other Windows tools write them, in every line format, whole
// and in chunks, plain and compressed (by name and by Content-Encoding):
// the mark is in no record, nor in a CSV column's name, and the first
// record is at offset 0 however the object is read.
func TestByteOrderMark(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	const bom = "\ufeff"
	csvBody := bom + "id,name\r\n1,ann\r\n2,\"bo, b\"\r\n"
	csvWant := []at{{12, `{"id":"1","name":"ann"}`}, {19, `{"id":"2","name":"bo, b"}`}}
	jsonl := bom + `{"a":1}` + "\n" + `{"a":2}` + "\n"
	jsonlWant := []at{{0, `{"a":1}`}, {11, `{"a":2}`}}
	split := dataset.CSVOptions{NoQuotedNewlines: true}
	tests := []struct {
		name     string
		key      string
		body     []byte
		encoding string
		opts     dataset.PlanOptions
		want     []at
	}{
		{name: "jsonl", key: "a.jsonl", body: []byte(jsonl), want: jsonlWant},
		{name: "jsonl in chunks", key: "a.jsonl", body: []byte(jsonl), opts: dataset.PlanOptions{ChunkSize: 2}, want: jsonlWant},
		{name: "jsonl zstd", key: "a.jsonl.zst", body: zst(t, jsonl), want: jsonlWant},
		{name: "text", key: "t.txt", body: []byte(bom + "one\ntwo\n"), want: []at{{0, "one"}, {7, "two"}}},
		{name: "text in chunks", key: "t.txt", body: []byte(bom + "one\ntwo\n"), opts: dataset.PlanOptions{ChunkSize: 1}, want: []at{{0, "one"}, {7, "two"}}},
		{name: "text by Content-Encoding", key: "e.txt", body: gz(t, bom+"one\ntwo\n"), encoding: "gzip", want: []at{{0, "one"}, {7, "two"}}},
		{name: "a line that is only the mark", key: "m.jsonl", body: []byte(bom + "\n" + `{"a":1}` + "\n"), want: []at{{4, `{"a":1}`}}},
		{name: "csv", key: "c.csv", body: []byte(csvBody), want: csvWant},
		{name: "csv in chunks", key: "c.csv", body: []byte(csvBody), opts: dataset.PlanOptions{ChunkSize: 3, CSV: split}, want: csvWant},
		{name: "csv gzip", key: "c.csv.gz", body: gz(t, csvBody), want: csvWant},
		{
			// Excel quotes a header name that holds a delimiter: the
			// quote follows the mark.
			name: "csv quoted header", key: "q.csv", body: []byte(bom + "\"id\",\"a, b\"\n1,2\n"),
			want: []at{{15, `{"id":"1","a, b":"2"}`}},
		},
		{
			name: "csv quoted header in chunks", key: "q.csv", body: []byte(bom + "\"id\",\"a, b\"\n1,2\n"),
			opts: dataset.PlanOptions{ChunkSize: 4, CSV: split}, want: []at{{15, `{"id":"1","a, b":"2"}`}},
		},
		{
			name: "csv without header", key: "n.csv", body: []byte(bom + "\"1\",x\n2,y\n"),
			opts: dataset.PlanOptions{CSV: dataset.CSVOptions{NoHeader: true, Columns: []string{"id", "v"}}},
			want: []at{{0, `{"id":"1","v":"x"}`}, {9, `{"id":"2","v":"y"}`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, c, bucket, tt.key, tt.body, tt.encoding)
			got, chunks := readOffsets(t, c, head(t, c, bucket, tt.key), tt.opts)
			if tt.opts.ChunkSize > 0 && len(chunks) < 2 {
				t.Fatalf("%d chunks, want several", len(chunks))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			for _, ch := range chunks {
				if ch.CSV != nil && len(ch.CSV.Header) > 0 && strings.HasPrefix(ch.CSV.Header[0], bom) {
					t.Errorf("chunk %d: header %q keeps the mark", ch.Index, ch.CSV.Header)
				}
			}
		})
	}
}

// TestCSVStrayQuotesWholeAndChunked reads a CSV with every kind of stray
// quote whole and in chunks of many sizes: the bad lines and the rows are
// the same, at the same offsets (so the same record ids), and every line
// is one of them.
func TestCSVStrayQuotesWholeAndChunked(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	var b strings.Builder
	b.WriteString("\ufeffid,note\n")
	var want []at
	for i := range 30 {
		off := int64(b.Len())
		switch i % 5 {
		case 1:
			fmt.Fprintf(&b, "%d,say \"hi\n", i) // a bare quote
			want = append(want, at{Offset: off})
		case 2:
			fmt.Fprintf(&b, "%d,\"never ends\r\n", i) // a quote that opens a field
			want = append(want, at{Offset: off})
		case 3:
			fmt.Fprintf(&b, "%d,\"closed\"then more\n", i) // text after the closing quote
			want = append(want, at{Offset: off})
		default:
			fmt.Fprintf(&b, "%d,\"fine, \"\"quoted\"\"\"\n", i)
			want = append(want, at{off, fmt.Sprintf(`{"id":"%d","note":"fine, \"quoted\""}`, i)})
		}
	}
	put(t, c, bucket, "stray.csv", []byte(b.String()), "")
	obj := head(t, c, bucket, "stray.csv")
	for _, size := range []int64{0, 1, 7, 64, 1000} {
		opts := dataset.PlanOptions{ChunkSize: size, CSV: dataset.CSVOptions{NoQuotedNewlines: size > 0}}
		got, chunks := readOffsets(t, c, obj, opts)
		if size > 0 && size < obj.Size && len(chunks) < 2 {
			t.Fatalf("chunk size %d: %d chunks", size, len(chunks))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("chunk size %d (-want +got):\n%s", size, diff)
		}
	}
}

// TestCSVAsWritten plans and reads the CSV files that lost or refused
// records before: each row arrives whole, every byte as written.
func TestCSVAsWritten(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	tests := []struct {
		name, key, data string
		opts            dataset.PlanOptions
		want            []string
	}{
		{name: "a header that repeats a name", key: "dup.csv", data: "id,name,id,\n1,ann,2,x\n",
			want: []string{`{"id":"1","name":"ann","id_2":"2","c3":"x"}`}},
		{name: "lines that end in CR alone (old Excel for Mac)", key: "mac.csv", data: "id,name\r1,ann\r2,bob\r",
			want: []string{`{"id":"1","name":"ann"}`, `{"id":"2","name":"bob"}`}},
		{name: "CR alone, split at line ends", key: "mac-split.csv", data: "id,name\r1,ann\r2,bob\r3,cy\r",
			opts: dataset.PlanOptions{ChunkSize: 8, CSV: dataset.CSVOptions{NoQuotedNewlines: true}},
			want: []string{`{"id":"1","name":"ann"}`, `{"id":"2","name":"bob"}`, `{"id":"3","name":"cy"}`}},
		{name: "a .tsv holds quotes as written", key: "t.tsv", data: "id\tdesc\n1\t15\" screen\n2\t\"quoted\"\n",
			want: []string{`{"id":"1","desc":"15\" screen"}`, `{"id":"2","desc":"\"quoted\""}`}},
		{name: "CRLF in a quoted field is kept", key: "crlf.csv", data: "id,note\r\n1,\"a\r\nb\"\r\n",
			want: []string{`{"id":"1","note":"a\r\nb"}`}},
		{name: "a header with a quoted newline", key: "h.csv", data: "id,\"full\nname\"\n1,ann\n",
			want: []string{`{"id":"1","full\nname":"ann"}`}},
		{name: "a backslash escape", key: "esc.csv", data: "id,q\n1,\"say \\\"hi\\\"\"\n",
			opts: dataset.PlanOptions{CSV: dataset.CSVOptions{Escape: '\\'}},
			want: []string{`{"id":"1","q":"say \"hi\""}`}},
		{name: "semicolons and single quotes", key: "eu.csv", data: "id;amount\n1;'1,5'\n",
			opts: dataset.PlanOptions{CSV: dataset.CSVOptions{Delimiter: ';', Quote: '\''}},
			want: []string{`{"id":"1","amount":"1,5"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, c, bucket, tt.key, []byte(tt.data), "")
			got, errs, _ := readAll(t, c, head(t, c, bucket, tt.key), tt.opts)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}
