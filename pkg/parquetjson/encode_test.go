package parquetjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"sort"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/s3sqs/s3sqs/pkg/parquetjson"
)

// roundTrip writes rows of schema with parquet-go, reads the file back and
// returns each row as the Encoder writes it (or its error, as "error: ").
func roundTrip(t *testing.T, schema *parquet.Schema, opts parquetjson.Options, rows ...parquet.Row) []string {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewWriter(&b, schema)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := parquetjson.NewEncoder(f.Metadata().Schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.RowGroups() {
		r := g.Rows()
		buf := make([]parquet.Row, 1)
		for {
			n, err := r.ReadRows(buf)
			if n == 1 {
				js, err := enc.Append(nil, buf[0])
				if err != nil {
					out = append(out, "error: "+err.Error())
				} else {
					out = append(out, string(js))
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
	return out
}

// one is a row of a single optional column: the value, or null.
func one(v any) parquet.Row {
	if v == nil {
		return parquet.Row{parquet.Value{}.Level(0, 0, 0)}
	}
	return parquet.Row{parquet.ValueOf(v).Level(0, 1, 0)}
}

func column(node parquet.Node) *parquet.Schema {
	return parquet.NewSchema("t", parquet.Group{"v": parquet.Optional(node)})
}

type annotated struct {
	parquet.Node
	typ parquet.Type
}

func (a annotated) Type() parquet.Type { return a.typ }

type annotatedType struct {
	parquet.Type
	lt *format.LogicalType
}

func (t annotatedType) LogicalType() *format.LogicalType         { return t.lt }
func (t annotatedType) ConvertedType() *deprecated.ConvertedType { return nil }

func float16Node() parquet.Node {
	n := parquet.Leaf(parquet.FixedLenByteArrayType(2))
	return annotated{n, annotatedType{n.Type(), &format.LogicalType{Value: &format.Float16Type{}}}}
}

// TestValues holds each type to the value the issue found lost and to the
// documented form (docs/formats.md).
func TestValues(t *testing.T) {
	spark := deprecated.Int96{0, 0, 2460312} // 2024-01-02T00:00:00Z, as Spark writes it
	// 9999-12-31T03:00:00Z: past what 64-bit nanoseconds hold (2262), which
	// Spark reads from microseconds.
	threeHours := uint64(3 * 3600e9)
	far := deprecated.Int96{uint32(threeHours), uint32(threeHours >> 32), 2440588 + 2932896}
	tests := []struct {
		name string
		node parquet.Node
		opts parquetjson.Options
		vals []any
		want []string
	}{
		{"INT96 timestamps", parquet.Leaf(parquet.Int96Type), parquetjson.Options{}, []any{spark, far, nil},
			[]string{`"2024-01-02T00:00:00.000000000Z"`, `"9999-12-31T03:00:00.000000000Z"`, `null`}},
		{"UINT_64", parquet.Uint(64), parquetjson.Options{}, []any{uint64(1) << 63, ^uint64(0)},
			[]string{`9223372036854775808`, `18446744073709551615`}},
		{"DECIMAL(18,2) as INT64", parquet.Decimal(2, 18, parquet.Int64Type), parquetjson.Options{}, []any{int64(900719925474099312), int64(-5), int64(0)},
			[]string{`"9007199254740993.12"`, `"-0.05"`, `"0.00"`}},
		{"DECIMAL(38,10) as FIXED", parquet.Decimal(10, 38, parquet.FixedLenByteArrayType(16)), parquetjson.Options{},
			[]any{append(bytes.Repeat([]byte{0}, 15), 1), bytes.Repeat([]byte{0xff}, 16)},
			[]string{`"0.0000000001"`, `"-0.0000000001"`}},
		{"BINARY without annotation", parquet.Leaf(parquet.ByteArrayType), parquetjson.Options{}, []any{[]byte{0xff, 0xfe, 0x00, 0x80}, []byte("ok")},
			[]string{`"//4AgA=="`, `"b2s="`}},
		{"BINARY as string", parquet.Leaf(parquet.ByteArrayType), parquetjson.Options{BinaryAsString: true}, []any{[]byte("15\" screen"), []byte{0xff}},
			[]string{`"15\" screen"`, `error: column v: text is not valid UTF-8`}},
		{"STRING not UTF-8", parquet.String(), parquetjson.Options{}, []any{[]byte{0xc3, 0x28}, "\u2028é"},
			[]string{`error: column v: text is not valid UTF-8`, `"\u2028é"`}},
		{"NaN and infinities", parquet.Leaf(parquet.DoubleType), parquetjson.Options{}, []any{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e21, 1e-7},
			[]string{`"NaN"`, `"Infinity"`, `"-Infinity"`, `-0`, `1e+21`, `1e-7`}},
		{"FLOAT", parquet.Leaf(parquet.FloatType), parquetjson.Options{}, []any{float32(0.1), float32(math.NaN())},
			[]string{`0.1`, `"NaN"`}},
		{"FLOAT16", float16Node(), parquetjson.Options{}, []any{[]byte{0x00, 0x3c}, []byte{0x01, 0x00}, []byte{0x00, 0x7e}},
			[]string{`1`, `5.9604645e-8`, `"NaN"`}},
		{"TIMESTAMP millis UTC", parquet.Timestamp(parquet.Millisecond), parquetjson.Options{}, []any{int64(1704153600123), int64(-1)},
			[]string{`"2024-01-02T00:00:00.123Z"`, `"1969-12-31T23:59:59.999Z"`}},
		{"TIMESTAMP micros", parquet.Timestamp(parquet.Microsecond), parquetjson.Options{}, []any{int64(1704153600123456)},
			[]string{`"2024-01-02T00:00:00.123456Z"`}},
		{"TIMESTAMP nanos", parquet.Timestamp(parquet.Nanosecond), parquetjson.Options{}, []any{int64(1704153600123456789)},
			[]string{`"2024-01-02T00:00:00.123456789Z"`}},
		{"DATE", parquet.Date(), parquetjson.Options{}, []any{int32(19724), int32(-719529), int32(2932897)},
			[]string{`"2024-01-02"`, `"-0001-12-31"`, `"+10000-01-01"`}},
		{"TIME millis", parquet.Time(parquet.Millisecond), parquetjson.Options{}, []any{int32(3723004)},
			[]string{`"01:02:03.004Z"`}},
		{"UUID", parquet.UUID(), parquetjson.Options{}, []any{[]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}},
			[]string{`"123e4567-e89b-12d3-a456-426614174000"`}},
		{"INTERVAL", parquet.IntervalNode(), parquetjson.Options{}, []any{[]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}},
			[]string{`{"months":1,"days":2,"milliseconds":3}`}},
		{"JSON stays text", parquet.JSON(), parquetjson.Options{}, []any{[]byte(`{"a":1}`)},
			[]string{`"{\"a\":1}"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := make([]parquet.Row, len(tt.vals))
			for i, v := range tt.vals {
				rows[i] = one(v)
			}
			got := roundTrip(t, column(tt.node), tt.opts, rows...)
			for i := range tt.want {
				want := `{"v":` + tt.want[i] + `}`
				if len(tt.want[i]) > 6 && tt.want[i][:6] == "error:" {
					want = tt.want[i]
				}
				if i >= len(got) || got[i] != want {
					t.Errorf("value %d: got %q, want %q", i, got, want)
				}
			}
		})
	}
}

// TestLegacyList holds the two-level list of old writers (as in the
// format's old_list_structure.parquet) to [[1,2],[3,4]]: the issue found
// [1,3].
func TestLegacyList(t *testing.T) {
	list := func(n parquet.Node) parquet.Node {
		return annotated{n, annotatedType{n.Type(), &format.LogicalType{Value: &format.ListType{}}}}
	}
	schema := parquet.NewSchema("t", parquet.Group{
		"a": parquet.Optional(list(parquet.Group{
			"array": parquet.Repeated(list(parquet.Group{"array": parquet.Repeated(parquet.Leaf(parquet.Int32Type))})),
		})),
	})
	row := parquet.Row{
		parquet.ValueOf(int32(1)).Level(0, 3, 0), parquet.ValueOf(int32(2)).Level(2, 3, 0),
		parquet.ValueOf(int32(3)).Level(1, 3, 0), parquet.ValueOf(int32(4)).Level(2, 3, 0),
	}
	got := roundTrip(t, schema, parquetjson.Options{}, row)
	if len(got) != 1 || got[0] != `{"a":[[1,2],[3,4]]}` {
		t.Errorf("got %q", got)
	}
}

// TestMapKeys holds a map's keys to their text, and a key written twice to
// an error: a JSON object with the key twice keeps one value.
func TestMapKeys(t *testing.T) {
	schema := parquet.NewSchema("t", parquet.Group{"m": parquet.Optional(parquet.Map(parquet.Int(32), parquet.Optional(parquet.String())))})
	kv := func(k int32, v string, rep int) (parquet.Value, parquet.Value) {
		return parquet.ValueOf(k).Level(rep, 2, 0), parquet.ValueOf(v).Level(rep, 3, 1)
	}
	k1, v1 := kv(1, "a", 0)
	k2, v2 := kv(-2, "b", 1)
	k3, v3 := kv(1, "c", 1)
	got := roundTrip(t, schema, parquetjson.Options{},
		parquet.Row{k1, k2, v1, v2},
		parquet.Row{k1, k3, v1, v3})
	if len(got) != 2 || got[0] != `{"m":{"1":"a","-2":"b"}}` || got[1] != `error: column m.key_value: map holds a key twice: 1` {
		t.Errorf("got %q", got)
	}
}

// FuzzAppend feeds the encoder of a nested schema rows of arbitrary values
// and levels: it must write JSON or return an error, never panic.
func FuzzAppend(f *testing.F) {
	schema := parquet.NewSchema("t", parquet.Group{
		"l": parquet.Optional(parquet.List(parquet.Group{"a": parquet.Optional(parquet.Int(64)), "b": parquet.Repeated(parquet.String())})),
		"m": parquet.Optional(parquet.Map(parquet.String(), parquet.Optional(parquet.Leaf(parquet.DoubleType)))),
	})
	var b bytes.Buffer
	w := parquet.NewWriter(&b, schema)
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	file, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 3, 0, 0, 0, 2, 1, 1, 0, 0, 2, 2})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		enc, err := parquetjson.NewEncoder(file.Metadata().Schema, parquetjson.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var row parquet.Row
		for i := 0; i+2 < len(data); i += 3 {
			col := int(data[i] % 4)
			rep, def := int(data[i+1]%3), int(data[i+2]%5)
			var v parquet.Value
			switch col {
			case 0:
				v = parquet.ValueOf(int64(data[i+2]))
			case 1, 2:
				v = parquet.ValueOf(string(data[i : i+2]))
			default:
				v = parquet.ValueOf(float64(data[i+1]))
			}
			row = append(row, v.Level(rep, def, col))
		}
		sort.SliceStable(row, func(i, j int) bool { return row[i].Column() < row[j].Column() })
		js, err := enc.Append(nil, row)
		if err == nil && !json.Valid(js) {
			t.Fatalf("not JSON: %s", js)
		}
	})
}
