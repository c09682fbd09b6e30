package dataset_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// inventoryNodes are the Parquet columns of an S3 Inventory report up to
// is_multipart_uploaded, with the names, types and repetitions of the
// fileSchema in AWS's example manifest.json (Amazon S3 User Guide,
// "Locating your inventory list"). The example spells the string and
// timestamp annotations UTF8 and TIMESTAMP_MILLIS, the older names of
// STRING and TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS).
var inventoryNodes = map[string]parquet.Node{
	"bucket":                parquet.String(),
	"key":                   parquet.String(),
	"version_id":            parquet.Optional(parquet.String()),
	"is_latest":             parquet.Optional(parquet.Leaf(parquet.BooleanType)),
	"is_delete_marker":      parquet.Optional(parquet.Leaf(parquet.BooleanType)),
	"size":                  parquet.Optional(parquet.Leaf(parquet.Int64Type)),
	"last_modified_date":    parquet.Optional(parquet.Timestamp(parquet.Millisecond)),
	"e_tag":                 parquet.Optional(parquet.String()),
	"storage_class":         parquet.Optional(parquet.String()),
	"is_multipart_uploaded": parquet.Optional(parquet.Leaf(parquet.BooleanType)),
}

// inventorySchema is the schema of a report with the columns named.
func inventorySchema(t *testing.T, names ...string) *parquet.Schema {
	t.Helper()
	g := parquet.Group{}
	for _, n := range names {
		if inventoryNodes[n] == nil {
			t.Fatalf("no inventory column %q", n)
		}
		g[n] = inventoryNodes[n]
	}
	return parquet.NewSchema("s3.inventory", g)
}

// allVersionsRow is a row of a report that lists all versions.
type allVersionsRow struct {
	Bucket              string     `parquet:"bucket"`
	Key                 string     `parquet:"key"`
	VersionID           *string    `parquet:"version_id,optional"`
	IsLatest            *bool      `parquet:"is_latest,optional"`
	IsDeleteMarker      *bool      `parquet:"is_delete_marker,optional"`
	Size                *int64     `parquet:"size,optional"`
	LastModifiedDate    *time.Time `parquet:"last_modified_date,optional,timestamp(millisecond)"`
	ETag                *string    `parquet:"e_tag,optional"`
	StorageClass        *string    `parquet:"storage_class,optional"`
	IsMultipartUploaded *bool      `parquet:"is_multipart_uploaded,optional"`
}

var allVersionsColumns = []string{"bucket", "key", "version_id", "is_latest", "is_delete_marker", "size",
	"last_modified_date", "e_tag", "storage_class", "is_multipart_uploaded"}

// currentRow is a row of a report of current versions only, configured
// without the Size field: S3 then writes no version_id, is_latest,
// is_delete_marker or size column.
type currentRow struct {
	Bucket           string     `parquet:"bucket"`
	Key              string     `parquet:"key"`
	LastModifiedDate *time.Time `parquet:"last_modified_date,optional,timestamp(millisecond)"`
	ETag             *string    `parquet:"e_tag,optional"`
	StorageClass     *string    `parquet:"storage_class,optional"`
}

var currentColumns = []string{"bucket", "key", "last_modified_date", "e_tag", "storage_class"}

// writeParquet writes rows with schema as S3 Inventory does (Snappy), a
// few rows per row group so that a data file has several. A nil schema is
// T's.
func writeParquet[T any](t *testing.T, schema *parquet.Schema, rows []T, rowsPerGroup int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(rowsPerGroup)}
	if schema != nil {
		opts = append(opts, schema)
	}
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// putInventory writes an S3 Inventory report, manifest.json and data
// files, into bucket m under prefix, and returns the manifest's s3:// URI.
func putInventory(t *testing.T, c *s3.Client, m, prefix, format, fileSchema string, files [][]byte) string {
	t.Helper()
	var entries []string
	for i, body := range files {
		key := fmt.Sprintf("%s/data/%d.%s", prefix, i, strings.ToLower(format))
		put(t, c, m, key, body)
		entries = append(entries, fmt.Sprintf(`{"key":%q,"size":%d,"MD5checksum":"x"}`, key, len(body)))
	}
	manifest := fmt.Sprintf(`{"sourceBucket":"inv-data","destinationBucket":"arn:aws:s3:::%s","version":"2016-11-30",
		"creationTimestamp":"1514944800000","fileFormat":%q,"fileSchema":%q,"files":[%s]}`, m, format, fileSchema, strings.Join(entries, ","))
	key := prefix + "/2024-01-01T00-00Z/manifest.json"
	put(t, c, m, key, []byte(manifest))
	return "s3://" + m + "/" + key
}

func listAll(t *testing.T, client dataset.ListAPI, manifest string) ([]dataset.Object, error) {
	t.Helper()
	var got []dataset.Object
	for l, err := range dataset.List(t.Context(), client, dataset.Source{Manifest: manifest}, dataset.Cursor{}, dataset.ListOptions{}) {
		if err != nil {
			return got, err
		}
		if !l.Mark() {
			got = append(got, l.Object)
		}
	}
	return got, nil
}

func TestParquetInventory(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "inv-data")
	m := newBucket(t, c, "inv-manifests")
	// Keys as S3 Inventory writes them in Parquet: not URL-encoded. "%41"
	// would read as "A" if they were decoded.
	var keys []string
	body := map[string][]byte{}
	for i := range 23 {
		k := fmt.Sprintf("p/%02d %s.jsonl", i, []string{"a b", "ü+ñ", "b=c+d", "%41"}[i%4])
		keys = append(keys, k)
		body[k] = []byte(strings.Repeat("{}\n", i+1))
		put(t, c, b, k, body[k])
	}
	put(t, c, b, "p/_SUCCESS", nil)
	str := func(s string) *string { return &s }
	yes, no := true, false
	modified := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

	versionedSchema := inventorySchema(t, allVersionsColumns...)
	// All versions, with sizes: per key an old version first (every third
	// key), a delete marker of another key (every fourth), then the key's
	// latest version; and _SUCCESS, which listing skips.
	var versioned []dataset.Object
	var files [][]byte
	for f, part := range [][]string{keys[:12], keys[12:]} {
		var rows []allVersionsRow
		if f == 0 {
			rows = append(rows, allVersionsRow{Bucket: b, Key: "p/_SUCCESS", VersionID: str("s"), IsLatest: &yes, IsDeleteMarker: &no, Size: new(int64), ETag: str("e")})
		}
		for _, k := range part {
			i := len(versioned)
			size := int64(len(body[k]))
			if i%3 == 0 {
				old := size + 100
				rows = append(rows, allVersionsRow{Bucket: b, Key: k, VersionID: str(fmt.Sprintf("old-%d", i)), IsLatest: &no, IsDeleteMarker: &no,
					Size: &old, LastModifiedDate: &modified, ETag: str("old"), StorageClass: str("STANDARD"), IsMultipartUploaded: &no})
			}
			if i%4 == 1 {
				rows = append(rows, allVersionsRow{Bucket: b, Key: fmt.Sprintf("p/deleted-%d.jsonl", i), VersionID: str(fmt.Sprintf("dm-%d", i)),
					IsLatest: &yes, IsDeleteMarker: &yes, LastModifiedDate: &modified})
			}
			o := dataset.Object{Bucket: b, Key: k, Size: size, ETag: fmt.Sprintf("etag-%d", i), VersionID: fmt.Sprintf("v-%d", i)}
			rows = append(rows, allVersionsRow{Bucket: b, Key: k, VersionID: &o.VersionID, IsLatest: &yes, IsDeleteMarker: &no,
				Size: &o.Size, LastModifiedDate: &modified, ETag: &o.ETag, StorageClass: str("STANDARD"), IsMultipartUploaded: &no})
			versioned = append(versioned, o)
		}
		files = append(files, writeParquet(t, versionedSchema, rows, 3))
	}
	allVersions := putInventory(t, c, m, "versions", "Parquet", versionedSchema.String(), files)
	versionedFile := files[0]

	// Current versions only, without the Size field: List pins with
	// HeadObject.
	var current []dataset.Object
	files = nil
	for _, part := range [][]string{keys[:5], keys[5:17], keys[17:]} {
		var rows []currentRow
		for _, k := range part {
			rows = append(rows, currentRow{Bucket: b, Key: k, LastModifiedDate: &modified, StorageClass: str("STANDARD")})
			current = append(current, dataset.Object{Bucket: b, Key: k, Size: int64(len(body[k]))})
		}
		files = append(files, writeParquet(t, inventorySchema(t, currentColumns...), rows, 4))
	}
	currentOnly := putInventory(t, c, m, "current", "PARQUET", inventorySchema(t, currentColumns...).String(), files)

	t.Run("file schema", func(t *testing.T) {
		f, err := parquet.OpenFile(bytes.NewReader(versionedFile), int64(len(versionedFile)))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(strings.Fields(f.Schema().String()), " ")
		for _, decl := range []string{"message s3.inventory {", "required binary key (STRING);", "optional int64 size",
			"optional boolean is_delete_marker;", "optional int64 last_modified_date (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS));"} {
			if !strings.Contains(got, decl) {
				t.Errorf("schema %s has no %q", got, decl)
			}
		}
	})
	t.Run("all versions at once", func(t *testing.T) {
		got, err := listAll(t, c, allVersions)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(versioned, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
	})
	t.Run("current versions without size at once", func(t *testing.T) {
		got, err := listAll(t, c, currentOnly)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i].ETag == "" {
				t.Errorf("%s: not pinned by HeadObject", got[i].Key)
			}
			got[i].ETag, got[i].VersionID = "", "" // as HeadObject answered
		}
		if diff := cmp.Diff(current, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
	})
	for name, manifest := range map[string]string{"all versions": allVersions, "current versions": currentOnly} {
		for _, per := range []int{1, 4, 10, 23} {
			t.Run(fmt.Sprintf("%s/%d per step", name, per), func(t *testing.T) {
				got, steps := listInSteps(t, c, dataset.Source{Manifest: manifest}, per)
				if diff := cmp.Diff(keys, got); diff != "" {
					t.Errorf("keys over %d steps (-want +got):\n%s", steps, diff)
				}
				if want := len(keys)/per + 1; steps != want {
					t.Errorf("%d steps, want %d", steps, want)
				}
			})
		}
	}

	t.Run("resuming skips row groups unread", func(t *testing.T) {
		// One data file of 10 row groups: listing it from its last rows
		// reads the manifest, the footer and the last row group, not the
		// 9 before.
		var rows []allVersionsRow
		for i := range 1000 {
			k, size := fmt.Sprintf("q/%04d-%s.jsonl", i, strings.Repeat("x", 40)), int64(i)
			rows = append(rows, allVersionsRow{Bucket: b, Key: k, VersionID: str(fmt.Sprintf("version-%d-%s", i, strings.Repeat("v", 30))),
				IsLatest: &yes, IsDeleteMarker: &no, Size: &size, ETag: str(fmt.Sprintf("%032d", i)), StorageClass: str("STANDARD")})
		}
		data := writeParquet(t, versionedSchema, rows, 100)
		one := putInventory(t, c, m, "one", "Parquet", versionedSchema.String(), [][]byte{data})
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		groups := f.Metadata().RowGroups
		lastGroup := groups[len(groups)-1].Columns[0].MetaData.DataPageOffset
		rc := &rangeRecorder{Client: c}
		all, err := listAll(t, rc, one)
		if err != nil || len(all) != len(rows) || len(groups) != 10 {
			t.Fatalf("%d objects in %d row groups, %v; want %d in 10", len(all), len(groups), err, len(rows))
		}
		if first := rc.take(); first[0] >= lastGroup {
			t.Fatalf("from the start, the first data read is at %d, after the last row group (%d)", first[0], lastGroup)
		}
		var got []string
		for l, err := range dataset.List(t.Context(), rc, dataset.Source{Manifest: one}, dataset.Cursor{Offset: 950}, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l.Key)
		}
		if len(got) != 50 || got[0] != rows[950].Key || got[49] != rows[999].Key {
			t.Errorf("from row 950: %d keys, want 50 from %q", len(got), rows[950].Key)
		}
		if starts := rc.take(); starts[0] < lastGroup {
			t.Errorf("from row 950, data was read at %v; want nothing before the last row group (%d)", starts, lastGroup)
		}
	})
}

// rangeRecorder records where the ranged GETs of a Parquet data file
// start, leaving out the 4-byte header and the footer.
type rangeRecorder struct {
	*s3.Client
	mu     sync.Mutex
	starts []int64
}

func (c *rangeRecorder) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	var start, end int64
	if _, err := fmt.Sscanf(aws.ToString(in.Range), "bytes=%d-%d", &start, &end); err == nil && start > 0 {
		c.mu.Lock()
		c.starts = append(c.starts, start)
		c.mu.Unlock()
	}
	return c.Client.GetObject(ctx, in, opts...)
}

// take returns where the data reads recorded so far start, sorted, and
// forgets them. The first two reads of an opening, the footer's length
// and then the footer, are left out.
func (c *rangeRecorder) take() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	starts := c.starts
	c.starts = nil
	if len(starts) < 3 {
		return []int64{-1}
	}
	starts = starts[2:] // footer length, then footer
	slices.Sort(starts)
	return starts
}

func TestInventoryRefusals(t *testing.T) {
	c := localaws.FakeS3(t)
	b := newBucket(t, c, "inv-data")
	m := newBucket(t, c, "inv-manifests")
	put(t, c, b, "k.jsonl", []byte("{}\n"))
	good := writeParquet(t, inventorySchema(t, currentColumns...), []currentRow{{Bucket: b, Key: "k.jsonl"}}, 10)
	type noKey struct {
		Bucket string `parquet:"bucket"`
		Name   string `parquet:"name"`
	}
	type intKey struct {
		Bucket string `parquet:"bucket"`
		Key    int64  `parquet:"key"`
	}
	tests := []struct {
		name   string
		format string
		files  [][]byte
		keys   []string // listed before the error
		want   []string // in the error
		is     error
	}{
		{"ORC", "ORC", [][]byte{[]byte("ORC\x00not read")}, nil, []string{"fileFormat ORC", "CSV or Apache Parquet"}, dataset.ErrInventoryFormat},
		{"unknown format", "JSON", [][]byte{[]byte("{}")}, nil, []string{`fileFormat "JSON"`, "want CSV or Parquet"}, dataset.ErrInventoryFormat},
		{"not Parquet", "Parquet", [][]byte{good, []byte("bucket,key\ninv-data,k.jsonl\n")},
			[]string{"k.jsonl"}, []string{"s3://inv-manifests/bad/data/1.parquet", "not a readable Parquet file"}, nil},
		{"cut short", "Parquet", [][]byte{good[:len(good)/2]}, nil, []string{"s3://inv-manifests/bad/data/0.parquet", "not a readable Parquet file"}, nil},
		{"no key column", "Parquet", [][]byte{writeParquet(t, nil, []noKey{{b, "k.jsonl"}}, 10)}, nil,
			[]string{"s3://inv-manifests/bad/data/0.parquet", "no key column"}, nil},
		{"key of another type", "Parquet", [][]byte{writeParquet(t, nil, []intKey{{b, 7}}, 10)}, nil,
			[]string{"s3://inv-manifests/bad/data/0.parquet", "column key is required INT64"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := putInventory(t, c, m, "bad", tt.format, "", tt.files)
			got, err := listAll(t, c, manifest)
			var keys []string
			for _, o := range got {
				keys = append(keys, o.Key)
			}
			if diff := cmp.Diff(tt.keys, keys); diff != "" {
				t.Errorf("keys before the error (-want +got):\n%s", diff)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
}
