package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// checkKeys walks data, valid JSON that decoded into a value of type t,
// and refuses the first key that appears twice in its object, or that is
// not the name of a field of t's struct at that place but is one in
// another case.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	// Numbers are kept as written: one too large for a float64 decodes
	// into a json.Number or a raw value, and must not fail here.
	dec.UseNumber()
	return walk(dec, t, "")
}

// walk reads one value from dec, of Go type t (nil when unknown: then
// only keys given twice are refused), at path in the input.
func walk(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	t = deref(t)
	if t == rawMessageType {
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			return skip(dec)
		}
		return nil
	}
	switch tok {
	case json.Delim('{'):
		return object(dec, t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && !custom(t) && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	return nil
}

// object reads the members of an object whose '{' has been read.
func object(dec *json.Decoder, t reflect.Type, path string) error {
	var (
		fields map[string]reflect.Type
		elem   reflect.Type
	)
	if t != nil && !custom(t) {
		switch t.Kind() {
		case reflect.Struct:
			fields = structFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		key := tok.(string)
		at := key
		if path != "" {
			at = path + "." + key
		}
		if seen[key] {
			return fmt.Errorf("duplicate field %q: a field may appear only once", at)
		}
		seen[key] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						near := name
						if path != "" {
							near = path + "." + name
						}
						return fmt.Errorf("unknown field %q (field names are case-sensitive: did you mean %q?)", at, near)
					}
				}
			}
			vt = ft
		}
		if err := walk(dec, vt, at); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// skip reads the rest of an object or array whose opening has been read.
func skip(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// custom reports whether t decodes itself: its fields are then its own
// business, and only keys given twice are refused.
func custom(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// structFields returns the JSON names of the fields encoding/json fills
// in struct t, with their types, the fields of embedded structs included.
// A name is the shallowest field's, as encoding/json takes it.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	level := []reflect.Type{t}
	for len(level) > 0 {
		var next []reflect.Type
		found := map[string]reflect.Type{}
		for _, st := range level {
			for i := range st.NumField() {
				f := st.Field(i)
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if f.Anonymous && name == "" {
					if et := deref(f.Type); et.Kind() == reflect.Struct {
						next = append(next, et)
						continue
					}
				}
				if !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				if _, ok := out[name]; !ok {
					found[name] = f.Type
				}
			}
		}
		for name, ft := range found {
			out[name] = ft
		}
		level = next
	}
	return out
}
