package parquetjson

import (
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// node is a field of the file's schema, with what the encoder needs to
// write its values.
type node struct {
	name string
	// path is the dotted path from the root, for error messages.
	path       string
	repetition format.FieldRepetitionType
	// def and rep are the node's maximum definition and repetition
	// levels: a value of one of its leaves with a definition level below
	// def says that the node is absent (null, or an empty list for a
	// repeated node) at that position.
	def, rep int
	// first and end bound the leaf columns under the node: [first, end).
	first, end int
	children   []*node
	// shape is how a group is written; a leaf's is shapeLeaf.
	shape shape
	// elem is the node a LIST's elements are written from, or a MAP's
	// key_value group.
	elem *node
	// leaf holds how a leaf's values are written.
	leaf leafType
}

// shape is how a node's value is written.
type shape uint8

const (
	shapeLeaf   shape = iota
	shapeObject       // a group: an object of its fields
	shapeList         // a LIST group: an array of its elements
	shapeMap          // a MAP group: an object of its entries
	shapeKeys         // a MAP group whose entries have no value: an array of keys
)

// errSchema is wrapped by the error of a schema the encoder cannot read.
var errSchema = errors.New("parquetjson: schema")

// buildSchema makes the tree of the flattened schema elements, as a file's
// footer lists them: depth first, each group followed by its children.
func buildSchema(elems []format.SchemaElement, opts Options) (*node, int, error) {
	if len(elems) == 0 {
		return nil, 0, fmt.Errorf("%w: no root element", errSchema)
	}
	b := &builder{elems: elems, opts: opts}
	root := &node{name: elems[0].Name, repetition: format.Required, shape: shapeObject}
	b.pos = 1
	n := int(elems[0].NumChildren.V)
	if err := b.children(root, n); err != nil {
		return nil, 0, err
	}
	if b.pos != len(elems) {
		return nil, 0, fmt.Errorf("%w: %d elements after the root's %d fields", errSchema, len(elems)-b.pos, n)
	}
	root.end = b.leaves
	return root, b.leaves, nil
}

type builder struct {
	elems  []format.SchemaElement
	opts   Options
	pos    int
	leaves int
}

func (b *builder) children(parent *node, n int) error {
	for range n {
		if b.pos >= len(b.elems) {
			return fmt.Errorf("%w: %s has fewer fields than it says", errSchema, parent.name)
		}
		c, err := b.node(parent)
		if err != nil {
			return err
		}
		parent.children = append(parent.children, c)
	}
	return nil
}

func (b *builder) node(parent *node) (*node, error) {
	e := &b.elems[b.pos]
	b.pos++
	n := &node{
		name:       e.Name,
		repetition: format.Required,
		def:        parent.def,
		rep:        parent.rep,
		first:      b.leaves,
	}
	if parent.path == "" {
		n.path = e.Name
	} else {
		n.path = parent.path + "." + e.Name
	}
	if e.RepetitionType.Valid {
		n.repetition = e.RepetitionType.V
	}
	switch n.repetition {
	case format.Optional:
		n.def++
	case format.Repeated:
		n.def++
		n.rep++
	}
	if !e.NumChildren.Valid || e.Type.Valid && e.NumChildren.V == 0 {
		lt, err := leafTypeOf(e, b.opts)
		if err != nil {
			return nil, fmt.Errorf("%w: column %s: %w", errSchema, n.path, err)
		}
		n.leaf = lt
		b.leaves++
		n.end = b.leaves
		return n, nil
	}
	if err := b.children(n, int(e.NumChildren.V)); err != nil {
		return nil, err
	}
	n.end = b.leaves
	if n.end == n.first {
		return nil, fmt.Errorf("%w: group %s has no column", errSchema, n.path)
	}
	n.shape = shapeObject
	switch {
	case isList(e):
		if el := listElement(n); el != nil {
			n.shape, n.elem = shapeList, el
		}
	case isMap(e):
		if kv := mapEntries(n); kv != nil {
			n.shape, n.elem = shapeMap, kv
			if len(kv.children) == 1 {
				n.shape = shapeKeys
			}
		}
	}
	return n, nil
}

func isList(e *format.SchemaElement) bool {
	_, ok := e.LogicalType.Value.(*format.ListType)
	return ok || e.ConvertedType.Valid && e.ConvertedType.V == deprecated.List
}

func isMap(e *format.SchemaElement) bool {
	_, ok := e.LogicalType.Value.(*format.MapType)
	return ok || e.ConvertedType.Valid && (e.ConvertedType.V == deprecated.Map || e.ConvertedType.V == deprecated.MapKeyValue)
}

// listElement returns the repeated field of a LIST group, whose values are
// the list's elements, or nil when the group is not shaped as a list (it
// is then written as an object, as it is laid out). Which node an element
// is written from follows the backward-compatibility rules of the Parquet
// format's LogicalTypes.md; see elementOf.
func listElement(list *node) *node {
	if len(list.children) != 1 || list.children[0].repetition != format.Repeated {
		return nil
	}
	return list.children[0]
}

// elementOf returns the node whose value is one element of list, given
// its repeated field r: r itself when it is a column, a group of more than
// one field, or a one-field group named "array" or "<list>_tuple" (as
// older writers laid out a list of records); else r's one field (the
// standard three-level list, and the two-level lists of other writers).
func elementOf(list, r *node) *node {
	if r.shape == shapeLeaf || len(r.children) != 1 || r.name == "array" || r.name == list.name+"_tuple" {
		return r
	}
	return r.children[0]
}

// mapEntries returns the repeated key_value group of a MAP group, or nil
// when the group is not shaped as a map.
func mapEntries(m *node) *node {
	if len(m.children) != 1 {
		return nil
	}
	kv := m.children[0]
	if kv.repetition != format.Repeated || kv.shape == shapeLeaf || len(kv.children) > 2 {
		return nil
	}
	if kv.children[0].repetition == format.Repeated {
		return nil
	}
	return kv
}
