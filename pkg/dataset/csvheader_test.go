package dataset_test

import (
	"bytes"
	"compress/gzip"
	"slices"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// TestPlanCSVHeaderByteOrderMark plans CSV objects that Excel saved as
// "CSV UTF-8", with a byte order mark first: the first column's name is
// without it in every chunk's header, plain or compressed, and when the
// name is quoted. An object read whole has its header read with its
// records (package records' TestByteOrderMark holds its names): its
// chunk says so.
func TestPlanCSVHeaderByteOrderMark(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "bom")
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte("\ufeffid,name\n1,ann\n"))
	zw.Close()
	tests := []struct {
		name string
		key  string
		body []byte
		opts dataset.PlanOptions
		want []string
	}{
		{name: "plain", key: "a.csv", body: []byte("\ufeffid,name\r\n1,ann\r\n"), want: []string{"id", "name"}},
		{
			name: "in chunks", key: "b.csv", body: []byte("\ufeffid,name\n1,ann\n2,bob\n3,cy\n"),
			opts: dataset.PlanOptions{ChunkSize: 8, CSV: dataset.CSVOptions{NoQuotedNewlines: true}}, want: []string{"id", "name"},
		},
		{name: "quoted names", key: "q.csv", body: []byte("\ufeff\"id\",\"full name\"\n1,ann\n"), want: []string{"id", "full name"}},
		{name: "gzip", key: "g.csv.gz", body: zipped.Bytes(), want: []string{"id", "name"}},
		{name: "tsv", key: "t.tsv", body: []byte("\ufeffid\tname\n1\tann\n"), want: []string{"id", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, c, b, tt.key, tt.body)
			obj, err := dataset.Head(t.Context(), c, b, tt.key, "")
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := dataset.NewPlanner(c, tt.opts).Plan(t.Context(), obj)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if tt.opts.ChunkSize > 0 && len(chunks) < 2 {
				t.Fatalf("%d chunks, want several", len(chunks))
			}
			for _, ch := range chunks {
				if !tt.opts.CSV.NoQuotedNewlines {
					if ch.CSV == nil || !ch.CSV.HeaderFirst || len(ch.CSV.Header) > 0 {
						t.Errorf("chunk %d: CSV %+v, want the header read with the records", ch.Index, ch.CSV)
					}
					continue
				}
				if ch.CSV == nil || !slices.Equal(ch.CSV.Header, tt.want) || !ch.CSV.SkipFirstLine {
					t.Errorf("chunk %d: CSV %+v, want header %q", ch.Index, ch.CSV, tt.want)
				}
			}
		})
	}
}
