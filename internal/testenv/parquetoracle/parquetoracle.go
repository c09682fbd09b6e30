// Package parquetoracle runs the Parquet oracle of the conformance tests:
// tools/localaws/parquet-oracle.mjs, which reads and writes Parquet with
// arrow-rs (built for node as parquet-wasm) and writes each row it reads
// by s3sqs's documented mapping (docs/formats.md), so that what s3sqs
// sends can be compared, value by value, with what an independent reader
// reads from the same file.
//
// `make test` installs it with the stand-ins (tools/with-local-aws), which
// export where node and the script are. A test that needs it and finds
// neither fails with a message saying so; `go test -short` skips it.
package parquetoracle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os/exec"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// Environment variables set by tools/with-local-aws.
const (
	EnvNode   = "S3SQS_NODE"
	EnvOracle = "S3SQS_PARQUET_ORACLE"
)

// Variant is one way of writing the oracle's conformance table.
type Variant struct {
	Name string `json:"name"`
	// Compression is a Parquet codec's name: UNCOMPRESSED, SNAPPY, GZIP,
	// BROTLI, LZ4, ZSTD, LZ4_RAW.
	Compression string `json:"compression"`
	// Encoding is applied to every column whose physical type takes it
	// (with Dictionary off): PLAIN, RLE, DELTA_BINARY_PACKED,
	// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT.
	Encoding   string `json:"encoding,omitempty"`
	Dictionary bool   `json:"dictionary"`
	// Version is the data page version, 1 or 2.
	Version int `json:"version"`
	// PageBytes bounds a data page; small values make many pages.
	PageBytes int `json:"pageBytes,omitempty"`
	// BatchRows is how many rows the writer takes at a time; a page ends
	// only between batches, so 1 with a small PageBytes makes a page a row.
	BatchRows int `json:"batchRows,omitempty"`
}

// File is what the oracle read from one file: its rows as JSON texts, or
// the error arrow-rs refused it with.
type File struct {
	File  string   `json:"file"`
	Rows  []string `json:"rows"`
	Error string   `json:"error"`
}

func command(tb testing.TB, args ...string) *exec.Cmd {
	tb.Helper()
	node := localaws.Endpoint(tb, EnvNode)
	script := localaws.Endpoint(tb, EnvOracle)
	return exec.CommandContext(tb.Context(), node, append([]string{"--no-warnings", script}, args...)...)
}

// Write writes the conformance table with arrow-rs once per variant, as
// dir/NAME.parquet.
func Write(tb testing.TB, dir string, variants []Variant) {
	tb.Helper()
	spec, err := json.Marshal(variants)
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := command(tb, "write", dir, string(spec)).CombinedOutput(); err != nil {
		tb.Fatalf("parquet oracle write: %v\n%s", err, out)
	}
}

// Read reads files with arrow-rs.
func Read(tb testing.TB, files ...string) []File {
	tb.Helper()
	cmd := command(tb, append([]string{"read"}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("parquet oracle read: %v\n%s", err, stderr.String())
	}
	var res []File
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var f File
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			tb.Fatalf("parquet oracle read: %v", err)
		}
		res = append(res, f)
	}
	if len(res) != len(files) {
		tb.Fatalf("parquet oracle read %d of %d files\n%s", len(res), len(files), stderr.String())
	}
	return res
}

// Diff compares two JSON texts by value and returns where they differ, or
// "" when they are the same: objects with the same keys in the same
// order, arrays of the same elements, equal strings, and numbers that are
// equal as exact decimals, or, when one has a fraction or exponent, as
// the same float64 (the oracle writes a float32 as the shortest text that
// reads back as the same float32, which Go's shortest may differ from in
// its digits, not its value).
func Diff(got, want string) string {
	g, err := decode(got)
	if err != nil {
		return fmt.Sprintf("got is not JSON: %v", err)
	}
	w, err := decode(want)
	if err != nil {
		return fmt.Sprintf("want is not JSON: %v", err)
	}
	return diff("", g, w)
}

// object keeps the order of an object's keys, which a map loses.
type object struct {
	keys []string
	vals []any
}

func decode(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("text after the value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k.(string)), append(o.vals, v)
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for d.More() {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return tok, nil
}

func diff(path string, g, w any) string {
	switch w := w.(type) {
	case *object:
		g, ok := g.(*object)
		if !ok {
			return fmt.Sprintf("%s: got %s, want an object", path, show(g))
		}
		if strings.Join(g.keys, ",") != strings.Join(w.keys, ",") {
			return fmt.Sprintf("%s: got keys %q, want %q", path, g.keys, w.keys)
		}
		for i := range w.keys {
			if d := diff(path+"."+w.keys[i], g.vals[i], w.vals[i]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := g.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %s, want %s", path, show(g), show(w))
		}
		for i := range w {
			if d := diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); d != "" {
				return d
			}
		}
		return ""
	case json.Number:
		g, ok := g.(json.Number)
		if !ok || !sameNumber(g, w) {
			return fmt.Sprintf("%s: got %s, want %s", path, show(g), w)
		}
		return ""
	}
	if g != w {
		return fmt.Sprintf("%s: got %s, want %s", path, show(g), show(w))
	}
	return ""
}

func sameNumber(a, b json.Number) bool {
	ra, ok1 := new(big.Rat).SetString(string(a))
	rb, ok2 := new(big.Rat).SetString(string(b))
	if ok1 && ok2 && ra.Cmp(rb) == 0 {
		return true
	}
	if !strings.ContainsAny(string(a)+string(b), ".eE") {
		return false // integers: exact only
	}
	fa, err1 := a.Float64()
	fb, err2 := b.Float64()
	return err1 == nil && err2 == nil && fa == fb
}

func show(v any) string {
	switch v := v.(type) {
	case *object:
		return fmt.Sprintf("object %q", v.keys)
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
