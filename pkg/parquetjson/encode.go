package parquetjson

import (
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Options configures an Encoder. The zero value is the documented mapping.
type Options struct {
	// BinaryAsString writes BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY columns
	// that have no logical type as JSON strings, as Spark's
	// spark.sql.parquet.binaryAsString reads files of writers that left
	// text unannotated (older Impala, Hive and Drill); a value that is
	// not valid UTF-8 is then refused. False writes them in base64.
	BinaryAsString bool
}

// ErrInvalidUTF8 is wrapped by the error of a text value (a STRING, ENUM
// or JSON column, or bytes with Options.BinaryAsString) that is not valid
// UTF-8: no JSON string can carry its bytes.
var ErrInvalidUTF8 = errors.New("text is not valid UTF-8")

// ErrDuplicateKey is wrapped by the error of a map that holds one key
// twice: a JSON object with the key twice keeps one value in every reader.
var ErrDuplicateKey = errors.New("map holds a key twice")

// ErrLevels is wrapped by the error of a row whose repetition and
// definition levels do not fit the schema.
var ErrLevels = errors.New("levels do not fit the schema")

// ValueError is a row that the mapping cannot write: Column says which
// column's value.
type ValueError struct {
	Column string
	Err    error
}

func (e *ValueError) Error() string { return fmt.Sprintf("column %s: %v", e.Column, e.Err) }

// Unwrap returns the underlying error.
func (e *ValueError) Unwrap() error { return e.Err }

// Encoder writes the rows of one Parquet schema as JSON objects. It is not
// safe for concurrent use.
type Encoder struct {
	root    *node
	columns int
	// row[i] is the values of column i in the row being written; pos[i]
	// the next one to write.
	row  [][]parquet.Value
	pos  []int
	keys map[string]struct{}
	key  []byte
}

// NewEncoder returns an Encoder for the schema of a file's footer
// (parquet.File.Metadata().Schema).
func NewEncoder(schema []format.SchemaElement, opts Options) (*Encoder, error) {
	root, n, err := buildSchema(schema, opts)
	if err != nil {
		return nil, err
	}
	return &Encoder{root: root, columns: n, row: make([][]parquet.Value, n), pos: make([]int, n)}, nil
}

// Columns returns the number of leaf columns of the schema.
func (e *Encoder) Columns() int { return e.columns }

// Append appends row, the values of one row of every column in column
// order (as parquet.Row holds them), as a JSON object. On error dst is
// returned as it was given.
func (e *Encoder) Append(dst []byte, row parquet.Row) ([]byte, error) {
	for i := range e.row {
		e.row[i], e.pos[i] = e.row[i][:0], 0
	}
	for start := 0; start < len(row); {
		c := row[start].Column()
		end := start + 1
		for end < len(row) && row[end].Column() == c {
			end++
		}
		if c < 0 || c >= e.columns || len(e.row[c]) > 0 {
			return dst, fmt.Errorf("%w: values of column %d out of order", ErrLevels, c)
		}
		e.row[c] = row[start:end]
		start = end
	}
	return e.appendRow(dst)
}

// AppendColumns is Append for a row given as the values of each column:
// columns[i] holds column i's.
func (e *Encoder) AppendColumns(dst []byte, columns [][]parquet.Value) ([]byte, error) {
	if len(columns) != e.columns {
		return dst, fmt.Errorf("%w: %d columns, the schema has %d", ErrLevels, len(columns), e.columns)
	}
	for i := range e.row {
		e.row[i], e.pos[i] = columns[i], 0
	}
	return e.appendRow(dst)
}

func (e *Encoder) appendRow(dst []byte) ([]byte, error) {
	for i, vs := range e.row {
		if len(vs) == 0 {
			return dst, fmt.Errorf("%w: no value of column %d", ErrLevels, i)
		}
	}
	out, err := e.object(dst, e.root)
	if err != nil {
		return dst, err
	}
	for i, vs := range e.row {
		if e.pos[i] != len(vs) {
			return dst, fmt.Errorf("%w: %d values of column %d left", ErrLevels, len(vs)-e.pos[i], i)
		}
	}
	return out, nil
}

// peek returns the next value of column c.
func (e *Encoder) peek(c int) (parquet.Value, bool) {
	if e.pos[c] >= len(e.row[c]) {
		return parquet.Value{}, false
	}
	return e.row[c][e.pos[c]], true
}

// skip steps over the one value each column of n holds where n is absent.
func (e *Encoder) skip(n *node) {
	for c := n.first; c < n.end; c++ {
		e.pos[c]++
	}
}

// present reports whether n (whose parent is present) has a value at the
// current position.
func (e *Encoder) present(n *node) (bool, error) {
	v, ok := e.peek(n.first)
	if !ok {
		return false, &ValueError{Column: n.path, Err: fmt.Errorf("%w: a value is missing", ErrLevels)}
	}
	return v.DefinitionLevel() >= n.def, nil
}

// field writes the value of field n: a list of its values when it is
// repeated (a repeated field outside a LIST or MAP group is a list).
func (e *Encoder) field(b []byte, n *node) ([]byte, error) {
	if n.repetition == format.Repeated {
		return e.list(b, n, n)
	}
	return e.value(b, n)
}

// value writes one value of n, not as a list even when n is repeated:
// null where n is absent.
func (e *Encoder) value(b []byte, n *node) ([]byte, error) {
	ok, err := e.present(n)
	if err != nil {
		return b, err
	}
	if !ok {
		e.skip(n)
		return append(b, "null"...), nil
	}
	return e.element(b, n)
}

// element writes the value of n, which is present: a column's value, or
// a group's as its shape says.
func (e *Encoder) element(b []byte, n *node) ([]byte, error) {
	switch n.shape {
	case shapeLeaf:
		v, _ := e.peek(n.first)
		e.pos[n.first]++
		b, err := appendValue(b, &n.leaf, v)
		if err != nil {
			return b, &ValueError{Column: n.path, Err: err}
		}
		return b, nil
	case shapeList:
		return e.list(b, n.elem, elementOf(n, n.elem))
	case shapeMap:
		return e.mapObject(b, n.elem)
	case shapeKeys:
		return e.list(b, n.elem, n.elem.children[0])
	}
	return e.object(b, n)
}

// object writes group n's fields as a JSON object.
func (e *Encoder) object(b []byte, n *node) ([]byte, error) {
	b = append(b, '{')
	for i, c := range n.children {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, []byte(c.name))
		b = append(b, ':')
		var err error
		if b, err = e.field(b, c); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// list writes the values of the repeated field r as a JSON array, each
// element written from elem (r itself, or r's one field).
func (e *Encoder) list(b []byte, r, elem *node) ([]byte, error) {
	ok, err := e.present(r)
	if err != nil {
		return b, err
	}
	if !ok {
		e.skip(r)
		return append(b, "[]"...), nil
	}
	b = append(b, '[')
	for first := true; ; first = false {
		if !first {
			b = append(b, ',')
		}
		if elem == r {
			b, err = e.element(b, r)
		} else {
			b, err = e.value(b, elem)
		}
		if err != nil {
			return b, err
		}
		if v, ok := e.peek(r.first); !ok || v.RepetitionLevel() < r.rep {
			return append(b, ']'), nil
		}
	}
}

// mapObject writes the entries of the repeated key_value group kv as a
// JSON object: each key as its JSON string, or, for a key that is not a
// string, the JSON text of its value as the string (1 as "1").
func (e *Encoder) mapObject(b []byte, kv *node) ([]byte, error) {
	ok, err := e.present(kv)
	if err != nil {
		return b, err
	}
	if !ok {
		e.skip(kv)
		return append(b, "{}"...), nil
	}
	clear(e.keys)
	if e.keys == nil {
		e.keys = map[string]struct{}{}
	}
	key, val := kv.children[0], kv.children[1]
	b = append(b, '{')
	for first := true; ; first = false {
		if !first {
			b = append(b, ',')
		}
		if e.key, err = e.value(e.key[:0], key); err != nil {
			return b, err
		}
		if _, dup := e.keys[string(e.key)]; dup {
			return b, &ValueError{Column: kv.path, Err: fmt.Errorf("%w: %s", ErrDuplicateKey, e.key)}
		}
		e.keys[string(e.key)] = struct{}{}
		if len(e.key) > 0 && e.key[0] == '"' {
			b = append(b, e.key...)
		} else {
			b = appendString(b, e.key)
		}
		b = append(b, ':')
		if b, err = e.field(b, val); err != nil {
			return b, err
		}
		if v, ok := e.peek(kv.first); !ok || v.RepetitionLevel() < kv.rep {
			return append(b, '}'), nil
		}
	}
}
