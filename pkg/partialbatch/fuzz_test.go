package partialbatch_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/partialbatch"
)

// FuzzDecode checks that Decode never panics, that it fails only with an
// *UnexpectedEventError, and that what it accepts is a non-empty batch of
// SQS records.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)))
	}
	for _, tt := range notSQS {
		f.Add([]byte(tt.payload))
	}
	f.Add([]byte(`{"Records":[{"eventSource":"aws:sqs"}],"records":[]}`))
	f.Add([]byte(`{"records":[{"EventSource":"aws:sqs","eventSource":"aws:s3"}]}`))

	f.Fuzz(func(t *testing.T, payload []byte) {
		ev, err := partialbatch.Decode(payload)
		if err != nil {
			var ue *partialbatch.UnexpectedEventError
			if !errors.As(err, &ue) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if ue.Kind == "" || ev.Records != nil {
				t.Fatalf("Kind %q, records %v", ue.Kind, ev.Records)
			}
			_ = err.Error()
			return
		}
		if len(ev.Records) == 0 {
			t.Fatal("no records and no error")
		}
		for i, r := range ev.Records {
			if r.EventSource != "aws:sqs" {
				t.Fatalf("Records[%d].eventSource %q accepted", i, r.EventSource)
			}
		}
	})
}
