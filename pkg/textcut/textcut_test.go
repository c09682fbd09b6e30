package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", -1, ""},
		{"aé", 2, "a"},  // é is 2 bytes: not cut in half
		{"a€b", 3, "a"}, // € is 3 bytes
		{"a€b", 4, "a€"},
		{"€", 1, ""},
	} {
		got := Prefix(tc.s, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Prefix(%q, %d) = %q; want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
