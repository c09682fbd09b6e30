package s3event_test

import (
	"net/url"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

func TestDecodeKey(t *testing.T) {
	tests := []struct {
		raw     string
		want    string
		wantErr bool
	}{
		{raw: "red+flower.jpg", want: "red flower.jpg"},
		{raw: "c%2B%2B", want: "c++"},
		{raw: "a%3D1/b%3Dx+y/", want: "a=1/b=x y/"},
		{raw: "a%3D1%2Fb", want: "a=1/b"}, // moto encodes "/"
		{raw: "100%25", want: "100%"},
		{raw: "%C3%BCn%C3%AF", want: "ünï"},
		{raw: "ünï", want: "ünï"},
		{raw: "a%20b", want: "a b"},
		{raw: "%zz", wantErr: true},
		{raw: "abc%", wantErr: true},
		{raw: "abc%4", wantErr: true},
		{raw: "%FF", wantErr: true}, // not UTF-8
	}
	for _, tt := range tests {
		got, err := s3event.DecodeKey(tt.raw)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q, error %v", tt.raw, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestEncodeKey(t *testing.T) {
	tests := map[string]string{
		"red flower.jpg":          "red+flower.jpg",
		"c++":                     "c%2B%2B",
		"dt=2024-01-01/a b/":      "dt%3D2024-01-01/a+b/",
		"100%":                    "100%25",
		"ünï":                     "%C3%BCn%C3%AF",
		"a&b?c#d~e*f_g-h.i":       "a%26b%3Fc%23d%7Ee*f_g-h.i",
		"":                        "",
		"(1) copy":                "%281%29+copy",
		"tab\tnewline\nquote\"'!": "tab%09newline%0Aquote%22%27%21",
	}
	for key, want := range tests {
		if got := s3event.EncodeKey(key); got != want {
			t.Errorf("EncodeKey(%q) = %q, want %q", key, got, want)
		}
		if back, err := s3event.DecodeKey(s3event.EncodeKey(key)); err != nil || back != key {
			t.Errorf("DecodeKey(EncodeKey(%q)) = %q, %v", key, back, err)
		}
		if back, err := url.QueryUnescape(s3event.EncodeKey(key)); err != nil || back != key {
			t.Errorf("url.QueryUnescape(EncodeKey(%q)) = %q, %v", key, back, err)
		}
	}
}

func TestCompareSequencers(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0055AED6DCD90281E5", "0055AED6DCD90281E5", 0},
		{"0055AED6DCD90281E5", "0055AED6DCD90281E6", -1},
		{"0055AED6DCD90281E6", "0055AED6DCD90281E5", 1},
		{"0055aed6dcd90281e5", "0055AED6DCD90281E5", 0},
		{"0055aed6dcd90281e6", "0055AED6DCD90281E5", 1},
		// Right-padding: "1" is "10" next to "10", and "1" < "11".
		{"1", "10", 0},
		{"1", "11", -1},
		{"617f08299329d189", "617f08299329d18900", 0},
		{"617f08299329d189", "617f08299329d18901", -1},
		// Padding, not numeric value, decides: "9" becomes "90", which is
		// after "10".
		{"9", "10", 1},
		{"A", "9", 1},
		{"", "", 0},
		{"", "00", 0},
		{"", "01", -1},
	}
	for _, tt := range tests {
		if got := s3event.CompareSequencers(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareSequencers(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := s3event.CompareSequencers(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareSequencers(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestIsDeletion(t *testing.T) {
	for name, want := range map[string]bool{
		"ObjectRemoved:Delete": true, "s3:ObjectRemoved:DeleteMarkerCreated": true,
		"LifecycleExpiration:Delete": true, "ObjectCreated:Put": false, "ObjectRestore:Delete": false, "": false,
	} {
		if got := s3event.IsDeletion(name); got != want {
			t.Errorf("IsDeletion(%q) = %v, want %v", name, got, want)
		}
	}
}
