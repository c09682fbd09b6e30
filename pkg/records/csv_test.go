package records

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/pkg/csvrecord"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// csvItem is what a CSV read yields at one offset: a row as JSON, or a bad
// record with its cause and message.
type csvItem struct {
	Off  int64
	Line int64
	JSON string
	Bad  string // the cause of a bad record: see cause
	Msg  string
}

// cause names the sentinel a bad record's error wraps.
func cause(err error) string {
	switch {
	case errors.Is(err, csv.ErrQuote):
		return "quote"
	case errors.Is(err, csv.ErrBareQuote):
		return "bare quote"
	case errors.Is(err, ErrTooLong):
		return "too long"
	}
	return "other"
}

// readCSVChunks reads data as its chunks of step bytes would be read, each
// from the bytes a ranged GET returns (step <= 0: the whole object as one
// stream), and returns what the chunks yield, in order. Any error other
// than a RecordError fails the test.
func readCSVChunks(t testing.TB, data string, desc *dataset.CSV, step int64, maxRecord int) []csvItem {
	t.Helper()
	size := int64(len(data))
	base := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "k.csv", Size: size}, Format: dataset.FormatCSV, CSV: desc}
	var out []csvItem
	read := func(c dataset.Chunk, src io.Reader, start, end int64) {
		readCSV(src, c, start, end, maxRecord, func(r Record, err error) bool {
			var re *RecordError
			switch {
			case err == nil:
				out = append(out, csvItem{Off: r.Offset, Line: r.Line, JSON: string(r.Value)})
			case errors.As(err, &re):
				out = append(out, csvItem{Off: re.Offset, Line: re.Line, Bad: cause(re.Err), Msg: re.Err.Error()})
			default:
				t.Fatalf("chunk [%d,%d): %v", start, end, err)
			}
			return true
		})
	}
	if step <= 0 {
		base.Count, base.End = 1, size
		read(base, strings.NewReader(data), 0, endless)
		return out
	}
	n := int((size + step - 1) / step)
	for i := range n {
		c := base
		c.Index, c.Count = i, n
		c.Start = int64(i) * step
		c.End = min(c.Start+step, size)
		read(c, strings.NewReader(data[max(c.Start-1, 0):]), c.Start, c.End)
	}
	return out
}

func TestCSVBadRows(t *testing.T) {
	header := &dataset.CSV{Header: []string{"a", "b"}, SkipFirstLine: true}
	row := func(off, line int64, a, b string) csvItem {
		return csvItem{Off: off, Line: line, JSON: `{"a":"` + a + `","b":"` + b + `"}`}
	}
	bad := func(off, line int64, cause string) csvItem { return csvItem{Off: off, Line: line, Bad: cause} }
	tests := []struct {
		name string
		data string
		max  int
		want []csvItem
		// chunked is true when a read in chunks yields the same.
		chunked bool
		msg     string // in the bad record's message
	}{
		{
			name: "bare quote in a field", data: "a,b\n1,x\"y\n2,z\n",
			want:    []csvItem{bad(4, 2, "bare quote"), row(10, 3, "2", "z")},
			chunked: true, msg: `CSV bare " in non-quoted-field (column 4)`,
		},
		{
			// The quote opens a field that never ends: without the rule,
			// it would swallow every line after it.
			name: "quote that opens a field and never ends", data: "a,b\n1,\"x\n2,y\n3,z\n",
			want:    []csvItem{bad(4, 2, "quote"), row(9, 3, "2", "y"), row(13, 4, "3", "z")},
			chunked: true, msg: "the quoted field that opens at column 3 does not end before the end of the object",
		},
		{
			// Read whole, the field runs over line 3 and breaks on line 4;
			// the record is line 2 alone, and lines 3 and 4 are rows.
			name: "quote that opens a field and breaks later", data: "a,b\n1,\"x\n2,y\n3,\"z\"q\n4,w\n",
			want:    []csvItem{bad(4, 2, "quote"), row(9, 3, "2", "y"), bad(13, 4, "quote"), row(20, 5, "4", "w")},
			chunked: true, msg: "line 4, column 3, in the record that starts on line 2",
		},
		{
			name: "text after a closing quote", data: "a,b\n1,\"x\"y\n2,z\n",
			want:    []csvItem{bad(4, 2, "quote"), row(11, 3, "2", "z")},
			chunked: true, msg: "(column 5)",
		},
		{
			name: "quoted newlines, delimiters and quotes", data: "a,b\r\n1,\"x\r\n\r\ny, \"\"z\"\"\"\r\n2,\"\"\r\n",
			want: []csvItem{row(5, 2, "1", `x\r\n\r\ny, \"z\"`), row(24, 5, "2", "")},
		},
		{
			name: "blank and white space lines are not rows", data: "a,b\n\n  \n1,2\n\t\r\n3,4",
			want:    []csvItem{row(8, 4, "1", "2"), row(15, 6, "3", "4")},
			chunked: true,
		},
		{
			// Over the limit, the open field stops at the limit: its line
			// is the bad record, and the lines it held are rows.
			name: "quoted field over the size limit", data: "a,b\n1,\"x\n2,y\n3,z\n4,w\n", max: 8,
			want: []csvItem{bad(4, 2, "too long"), row(9, 3, "2", "y"), row(13, 4, "3", "z"), row(17, 5, "4", "w")},
			msg:  "the quoted field that opens at column 3 does not end within it",
		},
		{
			name: "a line over the size limit", data: "a,b\n1,2\n" + strings.Repeat("x", 20) + "\n3,4\n", max: 8,
			want:    []csvItem{row(4, 2, "1", "2"), bad(8, 3, "too long"), row(29, 4, "3", "4")},
			chunked: true,
		},
		{
			name: "byte order mark before a quoted header", data: "\ufeff\"a\",b\n1,2\n",
			want:    []csvItem{row(9, 2, "1", "2")},
			chunked: true,
		},
		{
			name: "wrong number of fields", data: "a,b\n1\n\"x\ny\",2,3\n4,5\n",
			want: []csvItem{bad(4, 2, "other"), bad(6, 3, "other"), row(16, 5, "4", "5")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			steps := []int64{0}
			if tt.chunked {
				steps = append(steps, 1, 2, 3, 5, 8, 64)
			}
			for _, step := range steps {
				got := readCSVChunks(t, tt.data, header, step, max)
				for i := range got {
					if step > 0 && got[i].Line == 0 && i < len(tt.want) {
						got[i].Line = tt.want[i].Line // unknown in a later chunk
					}
				}
				if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(csvItem{}, "Msg")); diff != "" {
					t.Errorf("chunks of %d (-want +got):\n%s", step, diff)
				}
				if tt.msg != "" && step == 0 {
					var msgs []string
					for _, it := range got {
						if it.Bad != "" {
							msgs = append(msgs, it.Msg)
						}
					}
					if len(msgs) == 0 || !strings.Contains(msgs[0], tt.msg) {
						t.Errorf("messages %q, want the first to say %q", msgs, tt.msg)
					}
				}
			}
		})
	}
}

// checkCSV checks the framing of data read as a CSV with no header:
//   - every non-blank line is the first line of exactly one row or bad
//     record, or a later line of one row whose quoted field holds a
//     newline: nothing is dropped or read twice;
//   - when encoding/csv reads data without an error, the rows are the ones
//     it reads, on its lines (the offsets where those lines start);
//   - when no row holds a newline, a read in chunks of any size yields the
//     same rows and bad records at the same offsets.
//
// A byte order mark and lines of only white space, which encoding/csv
// reads as a field and package records does not, are left out of the
// comparison with encoding/csv.
func checkCSV(t *testing.T, data string, maxRecord int) {
	t.Helper()
	desc := &dataset.CSV{}
	whole := readCSVChunks(t, data, desc, 0, maxRecord)

	type line struct {
		off       int64
		text, eol string
	}
	var lines []line
	for off := 0; off < len(data); {
		end := strings.IndexAny(data[off:], "\r\n")
		eol := ""
		if end < 0 {
			end = len(data) - off
		} else if eol = data[off+end : off+end+1]; eol == "\r" && strings.HasPrefix(data[off+end:], "\r\n") {
			eol = "\r\n"
		}
		text := data[off : off+end]
		if off == 0 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		lines = append(lines, line{int64(off), text, eol})
		off += end + len(eol)
	}
	covered := make([]int, len(lines))
	multiLine := false
	for i, it := range whole {
		if it.Line < 1 || int(it.Line) > len(lines) || lines[it.Line-1].off != it.Off {
			t.Fatalf("item %d %+v is not at the start of its line", i, it)
		}
		if i > 0 && it.Off <= whole[i-1].Off {
			t.Fatalf("item %d %+v does not follow %+v", i, it, whole[i-1])
		}
		n := int(it.Line - 1)
		covered[n]++
		if it.Bad != "" {
			continue
		}
		// A row's later lines, as far as its quoted field runs.
		p := csvrecord.Parser{Dialect: csvrecord.Dialect{Comma: []byte{','}, Quote: '"'}}
		if _, err := p.Add([]byte(lines[n].text), nil, it.Line); err != nil {
			t.Fatalf("row %+v does not parse: %v", it, err)
		}
		for p.Open() {
			multiLine = true
			n++
			if n >= len(lines) {
				t.Fatalf("row %+v runs past the end", it)
			}
			covered[n]++
			if _, err := p.Add([]byte(lines[n].text), []byte(lines[n-1].eol), int64(n+1)); err != nil {
				t.Fatalf("row %+v does not parse: %v", it, err)
			}
		}
	}
	for i, l := range lines {
		blank := strings.TrimSpace(l.text) == ""
		if covered[i] > 1 || covered[i] == 0 && !blank {
			t.Fatalf("line %d %q read %d times; read %+v", i+1, l.text, covered[i], whole)
		}
	}

	// encoding/csv ends lines at "\n" only and reads "\r\n" in a quoted
	// field as "\n"; TestCSVDialects holds those to Python's csv module.
	if maxRecord >= len(data) && !strings.HasPrefix(data, "\ufeff") && !whiteLine(data) && !strings.Contains(data, "\r") {
		cr := csv.NewReader(strings.NewReader(data))
		cr.FieldsPerRecord = -1
		var want []csvItem
		failed := false
		for {
			fields, err := cr.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				failed = true
				break
			}
			l, _ := cr.FieldPos(0)
			b := []byte{'{'}
			for i, f := range fields {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, dataset.ColumnName(i))
				b = append(b, ':')
				b = appendString(b, f)
			}
			want = append(want, csvItem{Off: lines[l-1].off, Line: int64(l), JSON: string(append(b, '}'))})
		}
		if !failed {
			if diff := cmp.Diff(want, whole); diff != "" {
				t.Fatalf("rows of %q unlike encoding/csv's (-want +got):\n%s", data, diff)
			}
		} else if !slicesContainsBad(whole) {
			t.Fatalf("encoding/csv fails on %q, and no record is bad: %+v", data, whole)
		}
	}

	if multiLine {
		return
	}
	for _, step := range []int64{1, 2, 3, 5, 8, 64} {
		got := readCSVChunks(t, data, desc, step, maxRecord)
		if len(got) != len(whole) {
			t.Fatalf("chunks of %d read %+v, whole %+v", step, got, whole)
		}
		for i := range got {
			g, w := got[i], whole[i]
			if g.Off != w.Off || g.JSON != w.JSON || (g.Bad == "") != (w.Bad == "") || g.Line != 0 && g.Line != w.Line {
				t.Fatalf("data %q, chunks of %d: item %d is %+v, whole %+v", data, step, i, g, w)
			}
		}
	}
}

// whiteLine reports whether a line of data holds only white space (not
// none).
func whiteLine(data string) bool {
	for l := range strings.Lines(data) {
		// As a line is read: without its "\n", and one "\r" before it.
		l = strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
		if l != "" && strings.TrimSpace(l) == "" {
			return true
		}
	}
	return false
}

func slicesContainsBad(items []csvItem) bool {
	for _, it := range items {
		if it.Bad != "" {
			return true
		}
	}
	return false
}

// randomCSV writes rows of the fields CSV writers produce and the mistakes
// they make: quoted delimiters, newlines and quotes, bare quotes, quotes
// that open a field and never end, text after a closing quote, blank
// lines, CRLF, a byte order mark.
func randomCSV(r *rand.Rand) string {
	tokens := []string{"x", "", "12", `"a,b"`, "\"l1\nl2\"", "\"c1\r\nc2\"", `"q""q"`, `""`, `a"b`, `"open`, `"c"d`, "\"\n", " ", "é"}
	var b strings.Builder
	if r.IntN(6) == 0 {
		b.WriteString("\ufeff")
	}
	for range r.IntN(10) {
		switch r.IntN(8) {
		case 0:
		case 1:
			b.WriteString("  ")
		default:
			for i := range 1 + r.IntN(3) {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(tokens[r.IntN(len(tokens))])
			}
		}
		if r.IntN(3) == 0 {
			b.WriteString("\r\n")
		} else {
			b.WriteString("\n")
		}
	}
	if r.IntN(3) == 0 {
		b.WriteString("tail,\"t\"")
	}
	return b.String()
}

// TestCSVRandom is the property test run on every `make test`: checkCSV on
// random CSV with random mistakes, with the default limit and a small one.
func TestCSVRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 600 {
		data := randomCSV(r)
		checkCSV(t, data, 1<<20)
		checkCSV(t, data, 12)
	}
}

// FuzzCSV runs checkCSV on any input.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"\ufeffid,name\n1,ann\n",
		"\ufeff\"id\",\"name\"\r\n1,\"a, b\"\r\n",
		"\ufeff\n1,2\n",
		"1,ab\"c,2\n3,4\n",
		"1,\"open\n2,x\n3,y\n",
		"1,\"x\ny\",2\n3,\"z\"q\n4\n",
		"\"a\"\"b\",\"\"\n,\n",
		"a\rb,c\r\n\r\n  \n\"d\r\n",
		"0000\n\r\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCSV(t, string(data), 1<<20)
		checkCSV(t, string(data), 16)
	})
}

// TestCSVBadDelimiter reads with a delimiter that cannot delimit CSV
// fields: one error, no records.
func TestCSVBadDelimiter(t *testing.T) {
	c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "k.csv", Size: 4}, Count: 1, End: 4, Format: dataset.FormatCSV,
		CSV: &dataset.CSV{Delimiter: `"`}}
	var errs []error
	readCSV(strings.NewReader("a\"b\n"), c, 0, endless, 1<<20, func(r Record, err error) bool {
		errs = append(errs, err)
		return true
	})
	if len(errs) != 1 || !errors.Is(errs[0], csvrecord.ErrDialect) || !strings.Contains(errs[0].Error(), `delimited by "\""`) {
		t.Errorf("yields %v, want one error about the delimiter", errs)
	}
}

// csvDialect is a dialect of TestCSVDialects: quote 0 is no quoting,
// escape 0 a quote doubled.
type csvDialect struct {
	delim         string
	quote, escape byte
}

// writeDialectCSV writes a random CSV file in d, as a writer of that
// dialect would: a header that repeats a name, leaves one empty or, when
// fields can be quoted, holds a line end; fields that hold the delimiter,
// the quote, the escape and line ends of every kind (quoted), and text
// that needs no quoting; lines that end in "\n", "\r\n", "\r", or a mix.
// It returns the file and whether a quoted field holds a line end.
func writeDialectCSV(r *rand.Rand, d csvDialect) (string, bool) {
	eols := [][]string{{"\n"}, {"\r\n"}, {"\r"}, {"\n", "\r\n", "\r"}}[r.IntN(4)]
	names := []string{"id", "name", "id", "", "a b", "é", "name"}
	tokens := []string{"x", "", "12", "é 漢", "a b", " lead", d.delim, "1" + d.delim + "2", `15" screen`, "it's", "\\", "l1\nl2", "c1\r\nc2", "m1\rm2", "\r\n"}
	if d.quote != 0 {
		names = append(names, "two\nlines", "q"+string(d.quote)+"q")
	}
	multi := false
	field := func(s string) string {
		if d.quote == 0 {
			return s
		}
		needs := strings.ContainsAny(s, d.delim+"\r\n"+string(d.quote)) || d.escape != 0 && strings.IndexByte(s, d.escape) >= 0
		if !needs && r.IntN(4) > 0 {
			return s
		}
		multi = multi || strings.ContainsAny(s, "\r\n")
		q := string(d.quote)
		if d.escape != 0 {
			s = strings.ReplaceAll(s, string(d.escape), string(d.escape)+string(d.escape))
			s = strings.ReplaceAll(s, q, string(d.escape)+q)
		} else {
			s = strings.ReplaceAll(s, q, q+q)
		}
		return q + s + q
	}
	usable := func(s string) bool {
		// Without quoting a field cannot hold the delimiter or a line end.
		return d.quote != 0 || !strings.ContainsAny(s, d.delim+"\r\n")
	}
	pick := func(from []string) string {
		for {
			if s := from[r.IntN(len(from))]; usable(s) {
				return s
			}
		}
	}
	cols := 2 + r.IntN(3)
	var b strings.Builder
	line := func(fields []string) {
		blank := true
		for _, f := range fields {
			blank = blank && strings.TrimSpace(f) == ""
		}
		if blank {
			// A line of white space is not a row, to records; Python's
			// csv reads it as one.
			fields[0] = "x"
		}
		for i, f := range fields {
			if i > 0 {
				b.WriteString(d.delim)
			}
			b.WriteString(field(f))
		}
		b.WriteString(eols[r.IntN(len(eols))])
	}
	header := make([]string, cols)
	for i := range header {
		header[i] = pick(names)
	}
	line(header)
	for range r.IntN(7) {
		row := make([]string, cols)
		for i := range row {
			row[i] = pick(tokens)
		}
		line(row)
	}
	return b.String(), multi
}

// TestCSVDialects writes random CSV files in several dialects (comma,
// semicolon, tab and pipe delimiters; double, single or no quotes; quotes
// doubled or escaped with a backslash; "\n", "\r\n" and "\r" line ends)
// and compares, row by row, what records reads with what Python's csv
// module, an independent reader, reads from the same file. The header's
// names are made unique by dataset.UniqueColumns. A file with no quoted
// line end is also read in chunks of several sizes, as a file split at
// line ends is, and must give the same rows.
func TestCSVDialects(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the CSV oracle needs python3 (part of the machine, and of the stand-ins' moto_server): %v", err)
	}
	dialects := []csvDialect{{",", '"', 0}, {";", '"', 0}, {"\t", 0, 0}, {"\t", '"', 0}, {"|", '\'', 0}, {",", '"', '\\'}}
	type file struct {
		d     csvDialect
		data  string
		multi bool
	}
	r := rand.New(rand.NewPCG(38, 14))
	dir := t.TempDir()
	var files []file
	var args []string
	for i := range 400 {
		d := dialects[i%len(dialects)]
		data, multi := writeDialectCSV(r, d)
		files = append(files, file{d, data, multi})
		path := filepath.Join(dir, fmt.Sprintf("%d.csv", i))
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		spec := map[string]any{"file": path, "delimiter": d.delim, "quote": nil, "escape": nil}
		if d.quote != 0 {
			spec["quote"] = string(d.quote)
		}
		if d.escape != 0 {
			spec["escape"] = string(d.escape)
		}
		js, _ := json.Marshal(spec)
		args = append(args, string(js))
	}
	out, err := exec.CommandContext(t.Context(), python, append([]string{filepath.Join("testdata", "csv_oracle.py")}, args...)...).Output()
	if err != nil {
		t.Fatalf("csv_oracle.py: %v", err)
	}
	answers := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(answers) != len(files) {
		t.Fatalf("%d answers for %d files", len(answers), len(files))
	}
	for i, f := range files {
		var want struct {
			Rows  [][]string
			Error string
		}
		if err := json.Unmarshal([]byte(answers[i]), &want); err != nil || want.Error != "" || len(want.Rows) == 0 {
			t.Fatalf("file %d %q: Python's csv: %v %s", i, f.data, err, want.Error)
		}
		header := dataset.UniqueColumns(want.Rows[0])
		var wantJSON []string
		for _, row := range want.Rows[1:] {
			b := []byte{'{'}
			for j, v := range row {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, header[j])
				b = append(b, ':')
				b = appendString(b, v)
			}
			wantJSON = append(wantJSON, string(append(b, '}')))
		}
		desc := &dataset.CSV{Delimiter: f.d.delim, Escape: string(rune(f.d.escape)), HeaderFirst: true}
		if f.d.escape == 0 {
			desc.Escape = ""
		}
		switch {
		case f.d.quote == 0:
			desc.NoQuotes = true
		case f.d.quote != '"':
			desc.Quote = string(f.d.quote)
		}
		check := func(step int64, desc *dataset.CSV) {
			var got []string
			for _, it := range readCSVChunks(t, f.data, desc, step, 1<<20) {
				if it.Bad != "" {
					t.Fatalf("file %d %q, chunks of %d: a bad record %+v; Python's csv reads %q", i, f.data, step, it, want.Rows)
				}
				got = append(got, it.JSON)
			}
			if diff := cmp.Diff(wantJSON, got); diff != "" {
				t.Fatalf("file %d %q, chunks of %d, dialect %+v: rows unlike Python's csv (-want +got):\n%s", i, f.data, step, f.d, diff)
			}
		}
		check(0, desc)
		if f.multi {
			continue
		}
		split := *desc
		split.HeaderFirst, split.Header, split.SkipFirstLine = false, header, true
		for _, step := range []int64{1, 3, 16} {
			check(step, &split)
		}
	}
}
