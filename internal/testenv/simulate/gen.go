package simulate

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// Outcomes a record must end in, besides delivery.
const (
	// CodeUnreadable is the failure code of a record the reader cannot
	// read (bad JSON, a ragged or badly quoted CSV row).
	CodeUnreadable = "UnreadableRecord"
	// CodeTooLarge is the failure code of a record over the queue's
	// message size limit (without offload).
	CodeTooLarge = "MessageTooLarge"
	// CodeInvalidChars is the failure code of a record with characters
	// SQS refuses.
	CodeInvalidChars = "InvalidCharacters"
	// failUnread marks a record after the end of a truncated compressed
	// stream: the unread range it is in must be on the failure output, at
	// an offset at or before it, whatever the code.
	failUnread = "(unread range)"
)

// Record is one generated record and what must become of it.
type Record struct {
	// Token is unique in the scenario and appears in the record, so that a
	// delivered body names its record.
	Token string
	// Offset is the record's byte offset in the object's (decompressed)
	// stream.
	Offset int64
	// Body is the message body record mode must send: the JSON Lines line,
	// the text line, or (CSV) the row as a JSON object, compared as JSON.
	Body []byte
	// Fail is the failure code the record must end with on the failure
	// output; "" means it must be delivered.
	Fail string
	// Either means the record is near the size limit: delivered, or on
	// the failure output as too large, are both right.
	Either bool
	// BlankAt, when above zero, is where empty lines before the record
	// start: a CSV reader of the whole object reports the record there.
	BlankAt int64
	// Class names the kind of data, for the summary.
	Class string
}

// Object is one generated object: its key, stored bytes and records.
type Object struct {
	Key      string
	Format   string // jsonl, csv, text
	Encoding string // Content-Encoding
	Data     []byte // as stored
	Records  []Record
	// Features lists what the object exercises, for the summary.
	Features []string
}

// Classes of data that can be turned off (Off), e.g. while a row of
// issue 24 is unfixed.
var Classes = []string{
	"bom", "crlf", "gzip-name", "gzip-encoding", "quoted-newline", "bare-quote", "ragged",
	"empty", "multibyte", "near-limit", "over-limit", "bad-json", "invalid-chars", "no-final-newline", "empty-lines", "old-notification", "parquet", "truncated-gzip",
	"cr-lines", "tsv", "dup-header",
}

// gen makes the data of one scenario.
type gen struct {
	rng     *rand.Rand
	off     map[string]bool
	maxSize int // the target queue's MaximumMessageSize
	tokens  int
	prefix  string
}

func (g *gen) on(class string, p float64) bool {
	// Drawn whether or not the class is off, so that turning one off
	// leaves the rest of the scenario as it was.
	x := g.rng.Float64()
	return !g.off[class] && x < p
}

func (g *gen) token() string {
	g.tokens++
	return fmt.Sprintf("%sr%d", g.prefix, g.tokens)
}

var multibyte = []string{"é", "ß", "中文", "日本語", "🙂", "Ω≈ç√", "ñandú", "\u00a0", "קוד", "€"}

// text returns n bytes or so of filler, with multi-byte characters when mb.
func (g *gen) text(n int, mb bool) string {
	var b strings.Builder
	for b.Len() < n {
		switch {
		case mb && g.rng.IntN(6) == 0:
			b.WriteString(multibyte[g.rng.IntN(len(multibyte))])
		case g.rng.IntN(8) == 0:
			b.WriteByte(' ')
		default:
			b.WriteByte(byte('a' + g.rng.IntN(26)))
		}
	}
	return b.String()
}

// size picks a record's filler size and whether it is near or over the
// limit: over by far, or within the band where the attributes decide.
func (g *gen) size(big bool) (n int, class string) {
	if big {
		switch {
		case g.on("over-limit", 0.5):
			return g.maxSize + 100 + g.rng.IntN(600), "over-limit"
		case g.on("near-limit", 1):
			return g.maxSize - 450 + g.rng.IntN(500), "near-limit"
		}
	}
	return 5 + g.rng.IntN(150), "plain"
}

// object makes one object of a random format.
func (g *gen) object(i int) Object {
	formats := []string{"jsonl", "csv", "text", "parquet"}
	o := Object{Format: formats[g.rng.IntN(len(formats))]}
	if o.Format == "parquet" && g.off["parquet"] {
		o.Format = "jsonl"
	}
	if o.Format == "parquet" {
		return g.parquet(i)
	}
	n := 1 + g.rng.IntN(30)
	if g.on("empty", 0.05) {
		n = 0
		o.Features = append(o.Features, "empty")
	}
	feat := func(class string, p float64) bool {
		if g.on(class, p) {
			o.Features = append(o.Features, class)
			return true
		}
		return false
	}
	bom := feat("bom", 0.06)
	crlf := feat("crlf", 0.2)
	mb := feat("multibyte", 0.3)
	// Records near or over the limit: a few, in some objects.
	big := g.rng.Float64() < 0.15
	bigLeft := 1 + g.rng.IntN(3)
	emptyLines := feat("empty-lines", 0.08)
	noFinal := feat("no-final-newline", 0.2)
	nl := "\n"
	if crlf {
		nl = "\r\n"
	}
	// CSV's dialects: lines that end in CR alone (Excel for Mac), tab-
	// separated values (no quoting), a header that names a column twice.
	if o.Format == "csv" && feat("cr-lines", 0.1) {
		nl = "\r"
	}
	tsv := o.Format == "csv" && feat("tsv", 0.15)
	dupHeader := o.Format == "csv" && feat("dup-header", 0.15)
	var buf bytes.Buffer
	if bom {
		buf.WriteString("\ufeff")
	}
	blankAt := int64(-1)
	add := func(r Record, line string) {
		r.Offset = int64(buf.Len())
		if bom && r.Offset == 3 {
			// The first record's line starts at the object's start, its
			// byte order mark included (package records).
			r.Offset = 0
		}
		if blankAt >= 0 {
			r.BlankAt, blankAt = blankAt, -1
		}
		o.Records = append(o.Records, r)
		buf.WriteString(line)
		buf.WriteString(nl)
		if emptyLines && g.rng.IntN(5) == 0 {
			blankAt = int64(buf.Len())
			buf.WriteString(nl)
		}
	}
	switch o.Format {
	case "jsonl":
		for j := range n {
			tok := g.token()
			size, class := g.size(big && g.rng.IntN(3) == 0 && bigLeft > 0)
			if class != "plain" {
				bigLeft--
			}
			if g.on("bad-json", 0.03) {
				line := fmt.Sprintf(`{"id":%q,"s":"%s`, tok, g.text(size, false))
				add(Record{Token: tok, Fail: CodeUnreadable, Class: "bad-json"}, line)
				continue
			}
			b, _ := json.Marshal(map[string]any{"id": tok, "n": j, "s": g.text(size, mb)})
			r := Record{Token: tok, Body: b, Class: class}
			g.limit(&r, len(b))
			add(r, string(b))
		}
	case "text":
		for range n {
			tok := g.token()
			size, class := g.size(big && g.rng.IntN(3) == 0 && bigLeft > 0)
			if class != "plain" {
				bigLeft--
			}
			line := tok + " " + strings.TrimSpace(g.text(size, mb))
			r := Record{Token: tok, Body: []byte(line), Class: class}
			if g.on("invalid-chars", 0.02) {
				line = tok + " bell\x07" + g.text(10, false)
				r = Record{Token: tok, Body: []byte(line), Fail: CodeInvalidChars, Class: "invalid-chars"}
			} else {
				g.limit(&r, len(line))
			}
			add(r, line)
		}
	case "csv":
		delim, quote := ",", csvQuote
		if tsv {
			delim, quote = "\t", func(s string) string { return s }
		}
		header := "id" + delim + "name" + delim + "note"
		if dupHeader {
			header += delim + "name"
		}
		buf.WriteString(header + nl)
		for range n {
			tok := g.token()
			size, class := g.size(big && g.rng.IntN(3) == 0 && bigLeft > 0)
			if class != "plain" {
				bigLeft--
			}
			name, note := g.text(3+g.rng.IntN(12), mb), strings.TrimSpace(g.text(size, mb))
			switch {
			case g.on("ragged", 0.03):
				add(Record{Token: tok, Fail: CodeUnreadable, Class: "ragged"}, tok+delim+quote(name))
				continue
			case g.on("bare-quote", 0.03) && !tsv:
				add(Record{Token: tok, Fail: CodeUnreadable, Class: "bare-quote"}, tok+delim+`na"me`+delim+note)
				continue
			case g.on("quoted-newline", 0.05) && !tsv:
				// The line end inside the quotes is the file's, kept as
				// written.
				name = name + nl + "second line, with \"quotes\""
				class = "quoted-newline"
			case g.rng.IntN(4) == 0:
				// Quoted in CSV; as written in TSV, quotes and all.
				name += `, "and" more`
			}
			fields := map[string]string{"id": tok, "name": name, "note": note}
			line := tok + delim + quote(name) + delim + quote(note)
			if dupHeader {
				fields["name_2"] = "x"
				line += delim + "x"
			}
			b, _ := json.Marshal(fields)
			r := Record{Token: tok, Body: b, Class: class}
			g.limit(&r, len(b))
			add(r, line)
		}
	}
	data := buf.Bytes()
	if noFinal {
		data = bytes.TrimSuffix(data, []byte(nl))
	}
	if n == 0 {
		data = nil
		o.Records = nil
	}
	ext := map[string]string{"jsonl": ".jsonl", "csv": ".csv", "text": ".txt"}[o.Format]
	if tsv {
		ext = ".tsv"
	}
	o.Key = fmt.Sprintf("data/%s/part-%03d%s", o.Format, i, ext)
	if g.rng.IntN(8) == 0 {
		o.Key = fmt.Sprintf("data/%s/dir é/part %03d%s", o.Format, i, ext)
	}
	switch {
	case len(data) > 0 && feat("gzip-name", 0.12):
		o.Key += ".gz"
		data = gzipped(data)
		if cut := g.rng.IntN(len(data)); feat("truncated-gzip", 0.15) {
			data = data[:max(cut, 10)]
			g.truncated(&o, data)
		}
	case len(data) > 0 && feat("gzip-encoding", 0.08):
		o.Encoding = "gzip"
		data = gzipped(data)
	}
	o.Data = data
	return o
}

// limit marks a record whose body is near or over the queue's limit.
func (g *gen) limit(r *Record, body int) {
	switch {
	case body > g.maxSize:
		r.Fail, r.Class = CodeTooLarge, "over-limit"
	case body > g.maxSize-500:
		r.Either, r.Class = true, "near-limit"
	}
}

func csvQuote(s string) string {
	if strings.ContainsAny(s, ",\"\r\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

func gzipped(b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	w.Close()
	return z.Bytes()
}

// parquetRow is a generated Parquet row: the types whose values the
// mapping of docs/formats.md must carry exactly.
type parquetRow struct {
	ID string    `parquet:"id"`
	N  int64     `parquet:"n"`
	S  string    `parquet:"s"`
	U  uint64    `parquet:"u"`
	B  []byte    `parquet:"b"`
	F  float64   `parquet:"f"`
	T  time.Time `parquet:"t,timestamp(microsecond)"`
	L  []int32   `parquet:"l,list"`
}

// body is the row as the mapping writes it, written here by hand: u with
// every digit (past 2^63 too), b in base64, f's NaN as "NaN", t in RFC 3339
// with microseconds, l as an array.
func (r parquetRow) body() []byte {
	f := strconv.FormatFloat(r.F, 'g', -1, 64)
	if math.IsNaN(r.F) {
		f = `"NaN"`
	}
	l := make([]string, len(r.L))
	for i, v := range r.L {
		l[i] = strconv.Itoa(int(v))
	}
	id, _ := json.Marshal(r.ID)
	str, _ := json.Marshal(r.S)
	return fmt.Appendf(nil, `{"id":%s,"n":%d,"s":%s,"u":%d,"b":"%s","f":%s,"t":"%s","l":[%s]}`,
		id, r.N, str, r.U, base64.StdEncoding.EncodeToString(r.B), f, r.T.UTC().Format("2006-01-02T15:04:05.000000Z"), strings.Join(l, ","))
}

// parquet makes a Parquet object of a few row groups; its records are the
// rows as JSON objects, at offsets that are their row numbers.
func (g *gen) parquet(i int) Object {
	o := Object{Format: "parquet", Key: fmt.Sprintf("data/parquet/part-%03d.parquet", i)}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[parquetRow](&buf)
	mb := g.on("multibyte", 0.3)
	row := int64(0)
	for range 1 + g.rng.IntN(4) {
		var rows []parquetRow
		for range 1 + g.rng.IntN(10) {
			r := parquetRow{ID: g.token(), N: row, S: g.text(5+g.rng.IntN(100), mb),
				U: g.rng.Uint64(), B: []byte(g.text(g.rng.IntN(8), mb)), F: g.rng.NormFloat64() * 1e6,
				T: time.UnixMicro(g.rng.Int64N(1 << 52)), L: make([]int32, g.rng.IntN(4))}
			if len(r.B) > 0 {
				r.B[0] ^= 0x80 // not UTF-8, most often
			}
			if g.rng.IntN(10) == 0 {
				r.F = math.NaN()
			}
			for j := range r.L {
				r.L[j] = g.rng.Int32()
			}
			rows = append(rows, r)
			b := r.body()
			rec := Record{Token: r.ID, Offset: row, Body: b, Class: "parquet"}
			g.limit(&rec, len(b))
			o.Records = append(o.Records, rec)
			row++
		}
		if _, err := w.Write(rows); err != nil {
			panic(err)
		}
		if err := w.Flush(); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	o.Data = buf.Bytes()
	o.Features = append(o.Features, "parquet")
	return o
}

// truncated marks the records of o that a reader of its cut gzip stream
// data cannot read: those that do not end, newline included, in the bytes
// that still decompress. They must be on the failure output as an unread
// range; the rest must be delivered.
func (g *gen) truncated(o *Object, data []byte) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	n := 0
	if err == nil {
		b, _ := io.ReadAll(zr)
		n = len(b)
	}
	for i := range o.Records {
		r := &o.Records[i]
		end := int64(n) + 1 // unknown: the stream ended
		if i+1 < len(o.Records) {
			end = o.Records[i+1].Offset
		}
		if end > int64(n) {
			r.Fail, r.Either, r.Class = failUnread, false, "truncated-gzip"
		}
	}
}
