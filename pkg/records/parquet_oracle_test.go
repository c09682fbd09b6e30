package records_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/parquetoracle"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/parquetjson"
	"github.com/s3sqs/s3sqs/pkg/records"
)

// The codecs and encodings of the oracle's matrix. LZ4 (codec 5) is not
// read by parquet-go: it must be refused by name at planning.
var (
	oracleCodecs    = []string{"UNCOMPRESSED", "SNAPPY", "GZIP", "BROTLI", "ZSTD", "LZ4_RAW", "LZ4"}
	oracleEncodings = []string{"RLE_DICTIONARY", "PLAIN", "RLE", "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"}
)

// TestParquetOracle writes the oracle's table of every type arrow-rs
// writes (signed and unsigned integers at their extremes, FLOAT16, FLOAT
// and DOUBLE with NaN, the infinities and -0, text that needs escaping,
// bytes that are not UTF-8, fixed bytes, decimals of 9, 18 and 38 digits,
// dates, times and timestamps in every unit, local and UTC, nested lists,
// structs and maps, a null in each) with arrow-rs once per codec, encoding
// and data page version, and compares each row s3sqs reads with what
// arrow-rs reads from the same file.
func TestParquetOracle(t *testing.T) {
	dir := t.TempDir()
	var variants []parquetoracle.Variant
	for _, codec := range oracleCodecs {
		for _, version := range []int{1, 2} {
			for _, enc := range oracleEncodings {
				v := parquetoracle.Variant{Name: fmt.Sprintf("%s-v%d-%s", codec, version, enc), Compression: codec, Version: version}
				if enc == "RLE_DICTIONARY" {
					v.Dictionary = true
				} else {
					v.Encoding = enc
				}
				variants = append(variants, v)
			}
		}
	}
	// Pages of a row or two, so that rows and lists cross pages.
	variants = append(variants,
		parquetoracle.Variant{Name: "ZSTD-v1-small-pages", Compression: "ZSTD", Version: 1, Dictionary: true, PageBytes: 64, BatchRows: 1},
		parquetoracle.Variant{Name: "SNAPPY-v2-small-pages", Compression: "SNAPPY", Version: 2, PageBytes: 64, BatchRows: 1})
	parquetoracle.Write(t, dir, variants)

	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	files := make([]string, len(variants))
	for i, v := range variants {
		files[i] = filepath.Join(dir, v.Name+".parquet")
	}
	cells := map[string]string{}
	for i, want := range parquetoracle.Read(t, files...) {
		cells[variants[i].Name] = compareWithOracle(t, c, bucket, want)
	}
	logMatrix(t, variants, cells)
}

// compareWithOracle reads the file the oracle read with s3sqs and returns
// the matrix cell: "pass", or "refused by name" for a file s3sqs refuses
// with ErrUnsupported, naming its codec, and the oracle reads. Any other
// difference fails the test.
func compareWithOracle(t *testing.T, c *s3.Client, bucket string, want parquetoracle.File) string {
	t.Helper()
	body, err := os.ReadFile(want.File)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Base(want.File)
	put(t, c, bucket, key, body, "")
	obj := head(t, c, bucket, key)
	if want.Error != "" {
		t.Errorf("%s: the oracle cannot read it: %s", key, want.Error)
		return "oracle refused"
	}
	if _, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), obj); err != nil {
		if !errors.Is(err, dataset.ErrUnsupported) {
			t.Errorf("%s: planning: %v", key, err)
			return "fail"
		}
		if !strings.Contains(err.Error(), "LZ4") {
			t.Errorf("%s: refused without naming its codec: %v", key, err)
		}
		return "refused by name (LZ4)"
	}
	got, errs, _ := readAll(t, c, obj, dataset.PlanOptions{})
	for _, err := range errs {
		t.Errorf("%s: %v", key, err)
	}
	if len(got) != len(want.Rows) {
		t.Errorf("%s: %d rows, the oracle %d", key, len(got), len(want.Rows))
		return "fail"
	}
	for i := range got {
		if d := parquetoracle.Diff(got[i], want.Rows[i]); d != "" {
			t.Errorf("%s: row %d: %s\n got: %s\nwant: %s", key, i, d, got[i], want.Rows[i])
			return "fail"
		}
	}
	return "pass"
}

// logMatrix logs the matrix: a line per encoding, a column per codec and
// page version.
func logMatrix(t *testing.T, variants []parquetoracle.Variant, cells map[string]string) {
	var b strings.Builder
	b.WriteString("\n| encoding |")
	for _, codec := range oracleCodecs {
		fmt.Fprintf(&b, " %s v1 | %s v2 |", codec, codec)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 2*len(oracleCodecs)) + "\n")
	for _, enc := range oracleEncodings {
		fmt.Fprintf(&b, "| %s |", enc)
		for _, codec := range oracleCodecs {
			for _, version := range []int{1, 2} {
				fmt.Fprintf(&b, " %s |", cells[fmt.Sprintf("%s-v%d-%s", codec, version, enc)])
			}
		}
		b.WriteString("\n")
	}
	for _, v := range variants[len(oracleCodecs)*2*len(oracleEncodings):] {
		fmt.Fprintf(&b, "%s: %s\n", v.Name, cells[v.Name])
	}
	t.Log(b.String())
}

// annotated is a schema node with its logical or converted type set by
// hand, for the layouts that parquet-go's own nodes do not write: the
// legacy lists and maps of older writers, FLOAT16.
type annotated struct {
	parquet.Node
	typ parquet.Type
}

func (a annotated) Type() parquet.Type { return a.typ }

type annotatedType struct {
	parquet.Type
	lt *format.LogicalType
	ct *deprecated.ConvertedType
}

func (t annotatedType) LogicalType() *format.LogicalType         { return t.lt }
func (t annotatedType) ConvertedType() *deprecated.ConvertedType { return t.ct }

func withConverted(n parquet.Node, ct deprecated.ConvertedType) parquet.Node {
	return annotated{n, annotatedType{Type: n.Type(), ct: &ct}}
}

func withLogical(n parquet.Node, lt format.LogicalTypeValue, ct *deprecated.ConvertedType) parquet.Node {
	return annotated{n, annotatedType{Type: n.Type(), lt: &format.LogicalType{Value: lt}, ct: ct}}
}

// legacySchema holds the layouts parquet-go's writer makes that arrow-rs
// writes differently or not at all, by field name (parquet-go orders a
// group's fields by name, and so the columns):
//
//	a_int96     optional int96, as Spark, Hive and Impala write timestamps
//	b_uuid      optional fixed_len_byte_array(16) (UUID)
//	c_json      optional binary (JSON)
//	d_bson      optional binary (BSON)
//	e_u64       optional int64 (INTEGER(64,false))
//	f_dec       optional int64 (DECIMAL(18,2)), Spark's layout for 10-18 digits
//	g_two_level optional group (LIST) { repeated int32 element }
//	h_records   optional group (LIST) { repeated group element { required int32 num; required binary str (STRING) } }
//	i_array     optional group (LIST) { repeated group array { required binary str (STRING) } }
//	j           optional group (LIST) { repeated group j_tuple { required binary str (STRING) } }
//	k_repeated  repeated int32, with no annotation
//	l_nested    optional group (LIST) { repeated group array (LIST) { repeated int32 array } }
//	m_map       optional group (MAP_KEY_VALUE) { repeated group map { required binary key (UTF8); optional int32 value } }
//	n_bin       optional binary, with no annotation
func legacySchema() *parquet.Schema {
	list := deprecated.List
	str := parquet.String()
	return parquet.NewSchema("legacy", parquet.Group{
		"a_int96": parquet.Optional(parquet.Leaf(parquet.Int96Type)),
		"b_uuid":  parquet.Optional(parquet.UUID()),
		"c_json":  parquet.Optional(parquet.JSON()),
		"d_bson":  parquet.Optional(parquet.BSON()),
		"e_u64":   parquet.Optional(parquet.Uint(64)),
		"f_dec":   parquet.Optional(parquet.Decimal(2, 18, parquet.Int64Type)),
		"g_two_level": parquet.Optional(withLogical(parquet.Group{
			"element": parquet.Repeated(parquet.Leaf(parquet.Int32Type)),
		}, &format.ListType{}, &list)),
		"h_records": parquet.Optional(withLogical(parquet.Group{
			"element": parquet.Repeated(parquet.Group{"num": parquet.Leaf(parquet.Int32Type), "str": str}),
		}, &format.ListType{}, &list)),
		"i_array": parquet.Optional(withLogical(parquet.Group{
			"array": parquet.Repeated(parquet.Group{"str": str}),
		}, &format.ListType{}, &list)),
		"j": parquet.Optional(withLogical(parquet.Group{
			"j_tuple": parquet.Repeated(parquet.Group{"str": str}),
		}, &format.ListType{}, &list)),
		"k_repeated": parquet.Repeated(parquet.Leaf(parquet.Int32Type)),
		"l_nested": parquet.Optional(withLogical(parquet.Group{
			"array": parquet.Repeated(withLogical(parquet.Group{
				"array": parquet.Repeated(parquet.Leaf(parquet.Int32Type)),
			}, &format.ListType{}, &list)),
		}, &format.ListType{}, &list)),
		"m_map": parquet.Optional(withConverted(parquet.Group{
			"map": parquet.Repeated(parquet.Group{
				"key":   withConverted(parquet.Leaf(parquet.ByteArrayType), deprecated.UTF8),
				"value": parquet.Optional(parquet.Leaf(parquet.Int32Type)),
			}),
		}, deprecated.MapKeyValue)),
		"n_bin": parquet.Optional(parquet.Leaf(parquet.ByteArrayType)),
	})
}

// lv is a value with its levels, in the column it is appended to.
type lv struct {
	v        parquet.Value
	rep, def int
}

func lvl(v any, rep, def int) lv { return lv{parquet.ValueOf(v), rep, def} }
func null(rep, def int) lv       { return lv{parquet.Value{}, rep, def} }

// legacyRows are the rows of legacySchema, each as the values of every
// column with the levels a writer of that layout gives them.
func legacyRows() []parquet.Row {
	int96 := func(days int32, nanos int64) any {
		return deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(days + 2440588)}
	}
	uuid := [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	rows := [][][]lv{
		{ // every layout with two or more elements
			{lvl(int96(19724, 0), 0, 1)},               // 2024-01-02T00:00:00Z
			{lvl(uuid[:], 0, 1)},                       //
			{lvl([]byte(`{"a":[1,"x"]}`), 0, 1)},       //
			{lvl([]byte{0x05, 0, 0, 0, 0}, 0, 1)},      //
			{lvl(uint64(1)<<63, 0, 1)},                 // 2^63
			{lvl(int64(900719925474099312), 0, 1)},     // 9007199254740993.12
			{lvl(int32(1), 0, 2), lvl(int32(2), 1, 2)}, // [1,2]
			{lvl(int32(1), 0, 2), lvl(int32(2), 1, 2)}, // h_records.num
			{lvl("a", 0, 2), lvl("b", 1, 2)},           // h_records.str
			{lvl("x", 0, 2), lvl("y", 1, 2)},           // i_array
			{lvl("p", 0, 2), lvl("q", 1, 2)},           // j
			{lvl(int32(7), 0, 1), lvl(int32(8), 1, 1)}, // k_repeated
			{lvl(int32(1), 0, 3), lvl(int32(2), 2, 3), lvl(int32(3), 1, 3), lvl(int32(4), 2, 3)}, // [[1,2],[3,4]]
			{lvl("k1", 0, 2), lvl("k2", 1, 2)},                                                   // m_map.key
			{lvl(int32(1), 0, 3), null(1, 2)},                                                    // m_map.value
			{lvl([]byte{0xff, 0xfe, 0x00, 0x80}, 0, 1)},                                          // not UTF-8
		},
		{ // nulls and empty lists
			{null(0, 0)}, {null(0, 0)}, {null(0, 0)}, {null(0, 0)}, {null(0, 0)}, {null(0, 0)},
			{null(0, 1)},               // []
			{null(0, 1)}, {null(0, 1)}, // []
			{null(0, 0)},                      // null
			{null(0, 1)},                      // []
			{null(0, 0)},                      // k_repeated: []
			{null(0, 2), lvl(int32(5), 1, 3)}, // [[],[5]]
			{null(0, 1)}, {null(0, 1)},        // {}
			{null(0, 0)},
		},
		{ // one element each, and values at the edges
			{lvl(int96(-25567, 86399999999999), 0, 1)}, // 1900-01-01T23:59:59.999999999Z, within arrow-rs's 64-bit nanoseconds
			{lvl(make([]byte, 16), 0, 1)},
			{lvl([]byte(`"\u2028"`), 0, 1)},
			{lvl([]byte{}, 0, 1)},
			{lvl(^uint64(0), 0, 1)},
			{lvl(int64(-1), 0, 1)}, // -0.01
			{lvl(int32(-2147483648), 0, 2)},
			{lvl(int32(0), 0, 2)}, {lvl("", 0, 2)},
			{lvl("é", 0, 2)},
			{lvl("漢", 0, 2)},
			{lvl(int32(9), 0, 1)},
			{null(0, 0)}, // null
			{lvl("only", 0, 2)}, {null(0, 2)},
			{lvl([]byte{}, 0, 1)},
		},
	}
	var out []parquet.Row
	for _, r := range rows {
		var row parquet.Row
		for col, vals := range r {
			for _, x := range vals {
				row = append(row, x.v.Level(x.rep, x.def, col))
			}
		}
		out = append(out, row)
	}
	return out
}

// writeLegacy writes legacyRows with parquet-go.
func writeLegacy(t *testing.T, codec compress.Codec, version int) []byte {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewWriter(&b, legacySchema(), parquet.Compression(codec), parquet.DataPageVersion(version))
	if _, err := w.WriteRows(legacyRows()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParquetOracleLegacyLayouts writes, with parquet-go, the layouts that
// Spark, Hive, Impala and older writers make and arrow-rs does not write
// (INT96 timestamps, two-level and unannotated lists, MAP_KEY_VALUE maps,
// UUID, JSON, BSON, unsigned 64-bit, Spark's INT64 decimals, bytes that
// are not UTF-8), and compares what s3sqs reads with what arrow-rs reads.
func TestParquetOracleLegacyLayouts(t *testing.T) {
	dir := t.TempDir()
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	codecs := map[string]compress.Codec{"UNCOMPRESSED": &parquet.Uncompressed, "SNAPPY": &parquet.Snappy, "ZSTD": &parquet.Zstd, "GZIP": &parquet.Gzip}
	names := make([]string, 0, len(codecs))
	for name := range codecs {
		names = append(names, name)
	}
	sort.Strings(names)
	var files []string
	for _, name := range names {
		for _, version := range []int{1, 2} {
			file := filepath.Join(dir, fmt.Sprintf("legacy-%s-v%d.parquet", name, version))
			if err := os.WriteFile(file, writeLegacy(t, codecs[name], version), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, file)
		}
	}
	for _, want := range parquetoracle.Read(t, files...) {
		if cell := compareWithOracle(t, c, bucket, want); cell != "pass" {
			t.Errorf("%s: %s", filepath.Base(want.File), cell)
		}
	}
}

// TestParquetHugeRow reads a small file whose middle row holds 64 MiB of
// map values (one 1 KiB value, dictionary-encoded, 65,536 times): the row
// is refused as too long, on its own, and the heap live while reading it
// holds a fraction of it, where reading it whole allocated gigabytes and
// crashed. What it holds is the live heap the collector marked, sampled
// with the collector run often: the heap's objects would count garbage
// not yet swept, which on a loaded machine is the whole row's churn.
func TestParquetHugeRow(t *testing.T) {
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	put(t, c, bucket, "huge.parquet", hugeRowFile(t), "")
	obj := head(t, c, bucket, "huge.parquet")
	chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(t.Context(), obj)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("plan: %v, %d chunks", err, len(chunks))
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	// Pools keep the writer's buffers through a collection (sync.Pool's
	// victim cache): the live heap counts them until the third.
	for range 3 {
		runtime.GC()
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	base := live[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	var got []string
	for rec, err := range records.Read(t.Context(), c, chunks[0], records.Options{MaxRecordSize: 1 << 20}) {
		var re *records.RecordError
		switch {
		case errors.As(err, &re) && errors.Is(err, records.ErrTooLong):
			got = append(got, fmt.Sprintf("too long at %d", re.Offset))
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, string(rec.Value))
		}
	}
	close(done)
	wg.Wait()
	want := []string{`{"id":1,"m":{"a":"b"}}`, "too long at 1", `{"id":3,"m":{}}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range got {
			if len(got[i]) > 80 {
				got[i] = got[i][:80] + "..."
			}
		}
		t.Errorf("got %q, want %q", got, want)
	}
	if grown := int64(peak.Load()) - int64(base); grown > 16<<20 {
		t.Errorf("the live heap grew by %d MiB reading a row of 64 MiB", grown>>20)
	} else {
		t.Logf("the live heap grew by at most %.1f MiB", float64(grown)/(1<<20))
	}
}

// hugeRowFile returns the Parquet file of TestParquetHugeRow. The row it
// writes is garbage once it returns, so that the test's live heap starts
// without it.
func hugeRowFile(t *testing.T) []byte {
	t.Helper()
	type row struct {
		ID int64             `parquet:"id"`
		M  map[string]string `parquet:"m"`
	}
	value := strings.Repeat("v", 1024)
	huge := make(map[string]string, 1<<16)
	for i := range 1 << 16 {
		huge[fmt.Sprintf("k%d", i)] = value
	}
	var b bytes.Buffer
	// The values dictionary-encoded, so that the row's pages are small and
	// only its values, not its pages, could make it large in memory.
	schema := parquet.NewSchema("row", parquet.Group{
		"id": parquet.Int(64),
		"m":  parquet.Map(parquet.String(), parquet.Encoded(parquet.String(), &parquet.RLEDictionary)),
	})
	w := parquet.NewGenericWriter[row](&b, schema, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write([]row{{ID: 1, M: map[string]string{"a": "b"}}, {ID: 2, M: huge}, {ID: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 1<<20 {
		t.Fatalf("the file is %d bytes; the test wants a small one", b.Len())
	}
	return b.Bytes()
}

// TestParquetBinaryAsString plans a file with unannotated byte arrays, as
// older Impala and Hive wrote text, with and without the setting: base64
// by default, the text with it, and a value that is not UTF-8 refused by
// name with it.
func TestParquetBinaryAsString(t *testing.T) {
	type row struct {
		V []byte `parquet:"v"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[row](&b)
	if _, err := w.Write([]row{{V: []byte("15\" screen")}, {V: []byte{0xff}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c := localaws.FakeS3(t)
	bucket := newBucket(t, c, false)
	put(t, c, bucket, "bin.parquet", b.Bytes(), "")
	obj := head(t, c, bucket, "bin.parquet")
	got, errs, _ := readAll(t, c, obj, dataset.PlanOptions{})
	if len(errs) > 0 || strings.Join(got, " ") != `{"v":"MTUiIHNjcmVlbg=="} {"v":"/w=="}` {
		t.Errorf("by default: %q %v", got, errs)
	}
	got, errs, _ = readAll(t, c, obj, dataset.PlanOptions{Parquet: dataset.Parquet{BinaryAsString: true}})
	if len(errs) != 1 || !errors.Is(errs[0], parquetjson.ErrInvalidUTF8) || strings.Join(got, " ") != `{"v":"15\" screen"}` {
		t.Errorf("as strings: %q %v", got, errs)
	}
}
