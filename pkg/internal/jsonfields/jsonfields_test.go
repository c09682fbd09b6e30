package jsonfields

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEach(t *testing.T) {
	obj := []byte(` { "a" : 1 , "b\"c":{"x":[1,"]}"]} ,"d":"s\"t","e":[{},[]],"f":true, "g":null,"h":-1.5e3 } `)
	var keys, values []string
	Each(obj, func(k, v []byte) bool {
		keys = append(keys, string(k))
		values = append(values, string(v))
		return true
	})
	wantKeys := []string{`"a"`, `"b\"c"`, `"d"`, `"e"`, `"f"`, `"g"`, `"h"`}
	wantValues := []string{`1`, `{"x":[1,"]}"]}`, `"s\"t"`, `[{},[]]`, `true`, `null`, `-1.5e3`}
	if len(keys) != len(wantKeys) {
		t.Fatalf("keys %q; want %q", keys, wantKeys)
	}
	for i := range keys {
		if keys[i] != wantKeys[i] || values[i] != wantValues[i] {
			t.Errorf("field %d: %s = %s; want %s = %s", i, keys[i], values[i], wantKeys[i], wantValues[i])
		}
	}
	if !KeyIs([]byte(keys[1]), `b"c`) || KeyIs([]byte(keys[1]), "z") {
		t.Errorf(`KeyIs(%s) does not read the escaped key b"c`, keys[1])
	}
	for _, notObj := range []string{`[1]`, `"s"`, `1`, `null`, `{}`} {
		Each([]byte(notObj), func(k, v []byte) bool { t.Errorf("Each(%s) yielded %s", notObj, k); return true })
	}
}

func TestUnquote(t *testing.T) {
	for raw, want := range map[string]string{`"plain"`: "plain", `"a\"b"`: `a"b`, `"\u00e9\n"`: "é\n", `""`: ""} {
		if got, ok := Unquote([]byte(raw)); !ok || got != want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`1`, `null`, `{}`} {
		if _, ok := Unquote([]byte(raw)); ok {
			t.Errorf("Unquote(%s) took a value that is not a string", raw)
		}
	}
}

// FuzzEach checks Each against encoding/json on every valid object: the
// same fields, with the same raw values (the last of a repeated key wins in
// both).
func FuzzEach(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":[1,2,{"c":"}"}]},"d":"\\\""}`, ` {} `, `{"\u0061":"x","a":2}`, `[{"a":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(obj, &want) != nil {
			Each(obj, func(k, v []byte) bool {
				t.Fatalf("Each(%s) yielded a field of a value that is not an object", obj)
				return false
			})
			return
		}
		got := map[string]string{}
		Each(obj, func(k, v []byte) bool {
			key, ok := Unquote(k)
			if !ok {
				t.Fatalf("key %s of %s does not unquote", k, obj)
			}
			got[key] = string(v)
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("Each(%s): %d fields; encoding/json finds %d", obj, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != string(v) {
				t.Fatalf("Each(%s): %q = %s; encoding/json says %s", obj, k, got[k], v)
			}
		}
	})
}

// FuzzValid checks Valid against json.Valid.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `"x"`, `{"a":"\u0000"}`, "{\"a\":\"\x01\"}", "\"\x0e\\b\"", `1e5`, `-0`, `01`, " {}\t", `{"a":1,}`, "\"\xff\"", ``, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v; json.Valid says %v", b, got, want)
		}
	})
}

// TestValidDeep checks nesting around encoding/json's limit of 10,000
// levels, and far past it, where a recursive check would run out of stack.
func TestValidDeep(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	for _, n := range []int{10000, 10001, 2_000_000} {
		if got, want := Valid(nest(n)), json.Valid(nest(n)); got != want {
			t.Errorf("Valid of %d levels = %v; json.Valid says %v", n, got, want)
		}
	}
}
