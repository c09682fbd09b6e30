// Package strictjson decodes JSON inputs strictly (unknown fields, wrong
// types, trailing data, a key given twice and a field's name in another
// case are refused) and says what is wrong in the input's own words: JSON
// field paths and kinds, never Go type names.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Decode decodes one JSON value into v, refusing unknown fields, trailing
// data, a key that appears twice in one object and a key that names a
// field in another case, and rewrites the decoder's errors to name fields
// as the JSON writes them. encoding/json would take the last of two keys
// and match "Prefix" to the field "prefix"; either can send another
// dataset than the one the writer meant, so both are refused, in nested
// objects too. The values of json.RawMessage fields are left to whoever
// decodes them. On an error, v may hold part of the input.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err, v)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return checkKeys(data, reflect.TypeOf(v))
}

// describeJSONError turns encoding/json's errors into words about the
// input, not about Go types.
func describeJSONError(err error, v any) error {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	switch {
	case errors.As(err, &te):
		field := jsonPath(te.Field)
		if field == "" {
			return fmt.Errorf("%s is not an object", withArticle(te.Value))
		}
		return fmt.Errorf("%s: %s is not allowed here; want %s", field, withArticle(te.Value), kindOf(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("not JSON: %v (at byte %d)", se, se.Offset)
	case errors.Is(err, io.EOF):
		return errors.New("empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not JSON: it ends too soon")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		msg := "unknown field " + name
		if near := nearestField(strings.Trim(name, `"`), reflect.TypeOf(v)); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return errors.New(msg)
	}
	return err
}

// jsonPath drops the Go names of embedded structs from a decoder's field
// path ("Overrides.Mapping.groupIdField" → "groupIdField").
func jsonPath(field string) string {
	var parts []string
	for p := range strings.SplitSeq(field, ".") {
		if p != "" && !(p[0] >= 'A' && p[0] <= 'Z') {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ".")
}

// kindOf names what a Go type accepts, in JSON's words.
func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	}
	return t.Kind().String()
}

// Kind names the JSON kind of a value, for an UnmarshalTypeError.
func Kind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == 'n':
		return "null"
	}
	return "value"
}

// nearestField returns the JSON field of t (a struct, or a pointer to one,
// embedded structs included) closest to name, when one is close enough to
// be a typo.
func nearestField(name string, t reflect.Type) string {
	best, bestDist := "", 3
	for _, f := range jsonFields(t) {
		if d := levenshtein.ComputeDistance(strings.ToLower(name), strings.ToLower(f)); d < bestDist {
			best, bestDist = f, d
		}
	}
	return best
}

func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			out = append(out, jsonFields(f.Type)...)
		case tag != "" && tag != "-":
			out = append(out, tag)
		}
	}
	return out
}

// withArticle puts "a" or "an" before the decoder's name of a JSON value
// ("array", "number 1e12").
func withArticle(v string) string {
	if v != "" && strings.ContainsRune("aeiou", rune(v[0])) {
		return "an " + v
	}
	return "a " + v
}
