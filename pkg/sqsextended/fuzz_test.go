package sqsextended_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// FuzzParsePointer checks that any body either parses to a pointer with a
// non-empty bucket and key or fails with a *PointerError, never panics, and
// that a parsed pointer survives Body and ParsePointer unchanged.
func FuzzParsePointer(f *testing.F) {
	for _, c := range pointerFiles {
		f.Add(readTestdata(f, c.file))
	}
	f.Add(`{"s3BucketName":"b","s3Key":"\u0000\"\\\ud83d\ude00"}`)
	f.Add(`["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3Key":"k","s3BucketName":"b","s3Key":"k2"}]`)
	f.Add(`[`)

	f.Fuzz(func(t *testing.T, body string) {
		p, err := sqsextended.ParsePointer(body)
		if err != nil {
			var pe *sqsextended.PointerError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if p != (sqsextended.Pointer{}) {
				t.Fatalf("pointer %+v with error %v", p, err)
			}
			if !utf8.ValidString(pe.Excerpt) && utf8.ValidString(body) {
				t.Fatalf("excerpt %q of a valid body is not valid UTF-8", pe.Excerpt)
			}
			_ = err.Error()
			return
		}
		if p.Bucket == "" || p.Key == "" {
			t.Fatalf("ParsePointer(%q) = %+v with an empty part", body, p)
		}
		b := p.Body()
		if !utf8.ValidString(b) {
			t.Fatalf("Body() of %+v is not valid UTF-8: %q", p, b)
		}
		again, err := sqsextended.ParsePointer(b)
		if err != nil {
			t.Fatalf("ParsePointer(Body()) of %+v: %v; body %q", p, err, b)
		}
		if again != p {
			t.Fatalf("round trip: %+v became %+v through %q", p, again, b)
		}
		if again.Body() != b {
			t.Fatalf("Body() is not stable: %q then %q", b, again.Body())
		}
	})
}
