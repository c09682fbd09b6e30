package dataset_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		key  string
		f    dataset.Format
		comp dataset.Compression
	}{
		{"a/b.jsonl", dataset.FormatJSONL, ""},
		{"a/b.NDJSON", dataset.FormatJSONL, ""},
		{"x.json.gz", dataset.FormatJSONL, dataset.CompressionGzip},
		{"x.csv.zst", dataset.FormatCSV, dataset.CompressionZstd},
		{"x.tsv", dataset.FormatCSV, ""},
		{"logs/app.log", dataset.FormatText, ""},
		{"part-0.parquet", dataset.FormatParquet, ""},
		{"noext", dataset.FormatAuto, ""},
		{"dir.csv/file", dataset.FormatAuto, ""},
	}
	for _, tt := range tests {
		f, c := dataset.Detect(tt.key)
		if f != tt.f || c != tt.comp {
			t.Errorf("Detect(%q) = %q, %q; want %q, %q", tt.key, f, c, tt.f, tt.comp)
		}
	}
	if _, err := dataset.ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) did not fail")
	}
}

func TestSourceValidate(t *testing.T) {
	bad := []dataset.Source{
		{Key: "k"},
		{Bucket: "b", Key: "k", Prefix: "p/"},
		{Bucket: "b", Prefix: "p/", Glob: "[bad"},
	}
	for _, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", s)
		}
	}
	if err := (dataset.Source{Manifest: "s3://m/manifest.csv"}).Validate(); err != nil {
		t.Errorf("manifest source: %v", err)
	}
}

func TestPlanRanges(t *testing.T) {
	c := localaws.FakeS3(t)
	p := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: 10})
	// Its one GET, before it is cut into ranges, is of its first byte, for
	// its Content-Encoding.
	put(t, c, newBucket(t, c, "plan"), "k.jsonl", bytes.Repeat([]byte("{}\n"), 9)[:25])
	obj, err := dataset.Head(t.Context(), c, "plan", "k.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := p.Plan(t.Context(), obj)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int64
	for _, ch := range chunks {
		got = append(got, [2]int64{ch.Start, ch.End})
		if ch.Count != 3 || ch.Format != dataset.FormatJSONL {
			t.Errorf("chunk %+v: want count 3, jsonl", ch)
		}
	}
	if want := [][2]int64{{0, 10}, {10, 20}, {20, 25}}; !cmp.Equal(got, want) {
		t.Errorf("ranges %v, want %v", got, want)
	}
	if chunks[0].ID() == chunks[1].ID() || chunks[0].ID() != chunks[0].ID() || len(chunks[0].ID()) != 32 {
		t.Errorf("chunk ids %q %q: want 32 characters, distinct, stable", chunks[0].ID(), chunks[1].ID())
	}
	if empty, err := p.Plan(t.Context(), dataset.Object{Bucket: "b", Key: "e.jsonl"}); err != nil || len(empty) != 0 {
		t.Errorf("empty object: %v, %v; want no chunks", empty, err)
	}
	if _, err := p.Plan(t.Context(), dataset.Object{Bucket: "b", Key: "noext", Size: 1}); !errors.Is(err, dataset.ErrUnknownFormat) {
		t.Errorf("unknown format: %v", err)
	}
}

func TestChunkJSON(t *testing.T) {
	ch := dataset.Chunk{
		Object: dataset.Object{Bucket: "my-data-lake-bucket", Key: "exports/date=2024-01-01/region=eu west/part-00042-1f2e3d4c.csv", Size: 1 << 40,
			ETag: "d41d8cd98f00b204e9800998ecf8427e-1024", VersionID: "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo"},
		Index: 1000, Count: 131072, Start: 1000 << 23, End: 1001 << 23, Format: dataset.FormatCSV,
		CSV: &dataset.CSV{Header: []string{"id", "ts", "user", "amount", "currency", "country", "note"}, SkipFirstLine: true},
	}
	b, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 700 {
		t.Errorf("chunk JSON is %d bytes, want well under 1 KiB: %s", len(b), b)
	}
	var back dataset.Chunk
	if err := json.Unmarshal(b, &back); err != nil || !cmp.Equal(back, ch) {
		t.Errorf("round trip: %v\n%s", err, cmp.Diff(ch, back))
	}
}

func newBucket(t *testing.T, c *s3.Client, name string) string {
	t.Helper()
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return name
}

func put(t *testing.T, c *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func keysOf(t *testing.T, c *s3.Client, src dataset.Source) []string {
	t.Helper()
	var keys []string
	for o, err := range dataset.Objects(t.Context(), c, src) {
		if err != nil {
			t.Fatalf("objects: %v", err)
		}
		if o.Size == 0 || o.ETag == "" {
			t.Errorf("object %+v is not pinned", o)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func TestListPrefix(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "lake")
	for _, k := range []string{
		"t/date=2024-01-01/part-0.jsonl", "t/date=2024-01-01/part-1.jsonl.gz", "t/date=2024-01-02/part 0+x.jsonl",
		"t/_SUCCESS", "t/date=2024-01-01/.part-0.jsonl.crc", "t/_temporary/0/x.jsonl", "t/date=2024-01-02/_committed_1",
		"t/notes.txt", "other/x.jsonl",
	} {
		put(t, c, b, k, []byte("{}\n"))
	}
	tests := []struct {
		name string
		src  dataset.Source
		want []string
	}{
		{"skips hidden", dataset.Source{Bucket: b, Prefix: "t/"}, []string{
			"t/_temporary/0/x.jsonl", "t/date=2024-01-01/part-0.jsonl", "t/date=2024-01-01/part-1.jsonl.gz", "t/date=2024-01-02/part 0+x.jsonl", "t/notes.txt"}},
		{"suffix", dataset.Source{Bucket: b, Prefix: "t/", Suffix: ".jsonl"}, []string{
			"t/_temporary/0/x.jsonl", "t/date=2024-01-01/part-0.jsonl", "t/date=2024-01-02/part 0+x.jsonl"}},
		{"glob", dataset.Source{Bucket: b, Prefix: "t/", Glob: "t/date=*/*.jsonl*"}, []string{
			"t/date=2024-01-01/part-0.jsonl", "t/date=2024-01-01/part-1.jsonl.gz", "t/date=2024-01-02/part 0+x.jsonl"}},
		{"include hidden", dataset.Source{Bucket: b, Prefix: "t/date=2024-01-02/", IncludeHidden: true}, []string{
			"t/date=2024-01-02/_committed_1", "t/date=2024-01-02/part 0+x.jsonl"}},
		{"keys", dataset.Source{Bucket: b, Keys: []string{"other/x.jsonl", "t/notes.txt"}}, []string{"other/x.jsonl", "t/notes.txt"}},
		{"one key", dataset.Source{Bucket: b, Key: "t/_SUCCESS"}, []string{"t/_SUCCESS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, keysOf(t, c, tt.src)); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing key", func(t *testing.T) {
		var errs []error
		for _, err := range dataset.Objects(t.Context(), c, dataset.Source{Bucket: b, Keys: []string{"t/notes.txt", "nope.jsonl"}}) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "s3://lake/nope.jsonl") {
			t.Errorf("errors %v, want one naming s3://lake/nope.jsonl", errs)
		}
	})
}

func TestListPages(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "many")
	var want []string
	for i := range 1203 {
		k := fmt.Sprintf("p/%05d.jsonl", i)
		put(t, c, b, k, []byte("{}\n"))
		want = append(want, k)
	}
	if diff := cmp.Diff(want, keysOf(t, c, dataset.Source{Bucket: b, Prefix: "p/"})); diff != "" {
		t.Errorf("keys over several pages (-want +got):\n%s", diff)
	}
}

func TestManifests(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "data")
	m := newBucket(t, c, "manifests")
	keys := []string{"in/a b.jsonl", "in/c+d=e.jsonl", "in/ünï.jsonl", "in/_hidden.jsonl"}
	for _, k := range keys {
		put(t, c, b, k, []byte("{\"k\":1}\n"))
	}
	enc := func(k string) string { return url.QueryEscape(k) }
	t.Run("batch operations csv", func(t *testing.T) {
		var csv strings.Builder
		for _, k := range keys[:3] {
			fmt.Fprintf(&csv, "data,%s\n", enc(k))
		}
		put(t, c, m, "jobs/manifest.csv", []byte(csv.String()))
		got := keysOf(t, c, dataset.Source{Manifest: "s3://manifests/jobs/manifest.csv"})
		if diff := cmp.Diff(keys[:3], got); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
	})
	t.Run("inventory", func(t *testing.T) {
		var rows strings.Builder
		for i, k := range keys {
			fmt.Fprintf(&rows, "\"data\",\"%s\",\"\",\"true\",\"false\",\"8\",\"etag%d\"\n", enc(k), i)
		}
		fmt.Fprintf(&rows, "\"data\",\"%s\",\"v1\",\"false\",\"false\",\"8\",\"old\"\n", enc("in/a b.jsonl"))
		fmt.Fprintf(&rows, "\"data\",\"%s\",\"v2\",\"true\",\"true\",\"0\",\"\"\n", enc("in/deleted.jsonl"))
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write([]byte(rows.String()))
		w.Close()
		put(t, c, m, "inv/data/1.csv.gz", gz.Bytes())
		manifest := `{"sourceBucket":"data","destinationBucket":"arn:aws:s3:::manifests","version":"2016-11-30",
			"fileFormat":"CSV","fileSchema":"Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, ETag",
			"files":[{"key":"inv/data/1.csv.gz","size":1,"MD5checksum":"x"}]}`
		put(t, c, m, "inv/2024-01-01T00-00Z/manifest.json", []byte(manifest))
		var got []dataset.Object
		for o, err := range dataset.Objects(t.Context(), c, dataset.Source{Manifest: "s3://manifests/inv/2024-01-01T00-00Z/manifest.json"}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, o)
		}
		want := []dataset.Object{
			{Bucket: "data", Key: keys[0], Size: 8, ETag: "etag0"},
			{Bucket: "data", Key: keys[1], Size: 8, ETag: "etag1"},
			{Bucket: "data", Key: keys[2], Size: 8, ETag: "etag2"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
	})
	t.Run("batch operations csv naming a missing object", func(t *testing.T) {
		put(t, c, m, "jobs/gone.csv", []byte("data,"+enc(keys[0])+"\ndata,in/gone.jsonl\ndata,"+enc(keys[1])+"\n"))
		var got []string
		var missing []error
		for l, err := range dataset.List(t.Context(), c, dataset.Source{Manifest: "s3://manifests/jobs/gone.csv"}, dataset.Cursor{}, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if l.Err != nil {
				missing = append(missing, l.Err)
				continue
			}
			got = append(got, l.Key)
		}
		if !slices.Equal(got, keys[:2]) || len(missing) != 1 || !errors.Is(missing[0], dataset.ErrNotFound) || !strings.Contains(missing[0].Error(), "in/gone.jsonl") {
			t.Errorf("listed %q, missing %v: want the two objects and the missing one named, the listing going on", got, missing)
		}
		var errs []error
		for _, err := range dataset.Objects(t.Context(), c, dataset.Source{Manifest: "s3://manifests/jobs/gone.csv"}) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) != 1 || !errors.Is(errs[0], dataset.ErrNotFound) {
			t.Errorf("Objects: %v, want the missing object as its error", errs)
		}
	})
	t.Run("bad manifest", func(t *testing.T) {
		put(t, c, m, "bad.csv", []byte("data\n"))
		var errs []error
		for _, err := range dataset.Objects(t.Context(), c, dataset.Source{Manifest: "s3://manifests/bad.csv"}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), "line 1") {
			t.Errorf("errors %v, want one naming line 1", errs)
		}
	})
}

// listInSteps lists src a few objects at a time, each step resuming from
// the cursor of the last object the step before took, as planning steps
// do, and returns the keys in order and the number of steps.
func listInSteps(t *testing.T, c *s3.Client, src dataset.Source, per int) (keys []string, steps int) {
	t.Helper()
	var at dataset.Cursor
	for steps = 1; ; steps++ {
		n := 0
		for l, err := range dataset.List(t.Context(), c, src, at, dataset.ListOptions{PinConcurrency: 3}) {
			if err != nil {
				t.Fatalf("step %d from %+v: %v", steps, at, err)
			}
			if l.Mark() {
				at = l.Next
				continue
			}
			if l.Size < 0 || l.ETag == "" {
				t.Errorf("object %+v is not pinned", l.Object)
			}
			keys = append(keys, l.Key)
			at = l.Next
			if n++; n == per {
				break
			}
		}
		if n < per {
			return keys, steps
		}
		if steps > 1000 {
			t.Fatal("listing does not end")
		}
	}
}

func TestListResumes(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "steps")
	m := newBucket(t, c, "steps-manifests")
	var all []string
	for i := range 23 {
		k := fmt.Sprintf("p/%02d %s.jsonl", i, []string{"a", "ü+", "b=c"}[i%3])
		put(t, c, b, k, []byte("{}\n"))
		all = append(all, k)
	}
	put(t, c, b, "p/_SUCCESS", nil)
	var batchCSV strings.Builder
	for _, k := range all {
		fmt.Fprintf(&batchCSV, "steps,%s\r\n", url.QueryEscape(k))
	}
	put(t, c, m, "job.csv", []byte(batchCSV.String()))
	var files []string
	for f := 0; f*10 < len(all); f++ {
		var rows strings.Builder
		for _, k := range all[f*10 : min(f*10+10, len(all))] {
			fmt.Fprintf(&rows, "\"steps\",\"%s\",\"false\"\n", url.QueryEscape(k))
		}
		fmt.Fprintf(&rows, "\"steps\",\"%s\",\"true\"\n", url.QueryEscape(fmt.Sprintf("p/deleted-%d.jsonl", f)))
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write([]byte(rows.String()))
		w.Close()
		key := fmt.Sprintf("inv/data/%d.csv.gz", f)
		put(t, c, m, key, gz.Bytes())
		files = append(files, fmt.Sprintf(`{"key":%q}`, key))
	}
	put(t, c, m, "inv/manifest.json", []byte(`{"destinationBucket":"arn:aws:s3:::steps-manifests","fileFormat":"CSV",
		"fileSchema":"Bucket, Key, IsDeleteMarker","files":[`+strings.Join(files, ",")+`]}`))

	for _, tt := range []struct {
		name string
		src  dataset.Source
	}{
		{"prefix", dataset.Source{Bucket: b, Prefix: "p/"}},
		{"keys", dataset.Source{Bucket: b, Keys: all}},
		{"batch operations manifest", dataset.Source{Manifest: "s3://steps-manifests/job.csv"}},
		{"inventory", dataset.Source{Manifest: "s3://steps-manifests/inv/manifest.json"}},
	} {
		for _, per := range []int{1, 4, 10, 23} {
			t.Run(fmt.Sprintf("%s/%d per step", tt.name, per), func(t *testing.T) {
				got, steps := listInSteps(t, c, tt.src, per)
				if diff := cmp.Diff(all, got); diff != "" {
					t.Errorf("keys over %d steps (-want +got):\n%s", steps, diff)
				}
				if want := len(all)/per + 1; steps != want {
					t.Errorf("%d steps, want %d", steps, want)
				}
			})
		}
	}

	t.Run("marks move the cursor past keys left out", func(t *testing.T) {
		// A page of keys a source leaves out, then one it keeps: a step
		// that ends after the first page still moves its cursor on, and
		// each key left out is counted by its filter.
		hb := newBucket(t, c, "steps-hidden")
		for i := range 1100 {
			put(t, c, hb, fmt.Sprintf("p/_tmp-%04d.jsonl", i), nil)
		}
		put(t, c, hb, "p/z.jsonl", []byte("{}\n"))
		var got []dataset.Listed
		for l, err := range dataset.List(t.Context(), c, dataset.Source{Bucket: hb, Prefix: "p/"}, dataset.Cursor{}, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l)
		}
		if len(got) != 1101 || got[1100].Key != "p/z.jsonl" {
			t.Fatalf("listing of %d: want a mark for each of the 1100 hidden keys, then p/z.jsonl", len(got))
		}
		for i, l := range got[:1100] {
			key := fmt.Sprintf("p/_tmp-%04d.jsonl", i)
			if !l.Mark() || l.Next.After != key || len(l.Filtered) != 1 || l.Filtered[0].Key != key || l.Filtered[0].By != dataset.FilterHidden {
				t.Fatalf("listing[%d] = %+v: want the mark of %s, left out as hidden", i, l, key)
			}
		}
		var keys []string
		for o, err := range dataset.Objects(t.Context(), c, dataset.Source{Bucket: hb, Prefix: "p/"}) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		if !slices.Equal(keys, []string{"p/z.jsonl"}) {
			t.Errorf("Objects yielded %q: marks are not objects", keys)
		}
		var batch strings.Builder
		for i := range 2500 {
			fmt.Fprintf(&batch, "steps,%s\n", url.QueryEscape(fmt.Sprintf("p/_skip-%d.jsonl", i)))
		}
		put(t, c, m, "hidden.csv", []byte(batch.String()))
		marks := 0
		var last dataset.Cursor
		for l, err := range dataset.List(t.Context(), c, dataset.Source{Manifest: "s3://steps-manifests/hidden.csv"}, dataset.Cursor{}, dataset.ListOptions{}) {
			if err != nil || !l.Mark() || len(l.Filtered) != 1 || l.Filtered[0].By != dataset.FilterHidden {
				t.Fatalf("manifest of keys left out: %+v %v", l, err)
			}
			marks++
			last = l.Next
		}
		if marks != 2500 || last.Offset != int64(batch.Len()) {
			t.Errorf("%d marks, last at %+v; want 2500, the last at the end (%d)", marks, last, batch.Len())
		}
	})

	t.Run("manifest replaced between steps", func(t *testing.T) {
		src := dataset.Source{Manifest: "s3://steps-manifests/job2.csv"}
		put(t, c, m, "job2.csv", []byte(batchCSV.String()))
		var at dataset.Cursor
		for l, err := range dataset.List(t.Context(), c, src, at, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			at = l.Next
			break
		}
		put(t, c, m, "job2.csv", []byte("steps,other.jsonl\n"+batchCSV.String()))
		var errs []error
		for _, err := range dataset.List(t.Context(), c, src, at, dataset.ListOptions{}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], dataset.ErrChanged) {
			t.Errorf("resuming a replaced manifest: %v, want one error wrapping ErrChanged", errs)
		}
	})
}

// TestPlanWideCSVHeader plans a CSV object split at line ends whose
// header line is longer than a read buffer (3,000 columns, about 35 KiB):
// the whole header is read.
func TestPlanWideCSVHeader(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "wide")
	cols := make([]string, 3000)
	for i := range cols {
		cols[i] = fmt.Sprintf("column_%04d", i)
	}
	put(t, c, b, "w.csv", []byte(strings.Join(cols, ",")+"\n"+strings.Repeat("1,", 2999)+"1\n"))
	obj, err := dataset.Head(t.Context(), c, b, "w.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{CSV: dataset.CSVOptions{NoQuotedNewlines: true}}).Plan(t.Context(), obj)
	if err != nil || len(chunks) != 1 || chunks[0].CSV == nil {
		t.Fatalf("plan: %v %+v", err, chunks)
	}
	if h := chunks[0].CSV.Header; !slices.Equal(h, cols) {
		t.Errorf("header of %d columns, want %d (last %q)", len(h), len(cols), h[len(h)-1])
	}
}
