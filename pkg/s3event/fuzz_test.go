package s3event_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// FuzzParse checks that any body either parses or fails with one of the
// package's error types, never panics, and that what it returns is
// consistent.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)), false)
	}
	f.Add([]byte(`{"Type":"Notification","Message":"{\"Records\":[{\"eventSource\":\"aws:s3\"}]}"}`), true)
	f.Add([]byte(`{"source":"aws.s3","detail-type":"Object Created","time":1.5,"detail":{"bucket":{"name":"b"},"object":{"key":"%"}}}`), true)

	f.Fuzz(func(t *testing.T, body []byte, raw bool) {
		n, err := s3event.Options{EventBridgeKeysRaw: raw}.Parse(body)
		if err != nil {
			var me *s3event.MalformedError
			var ue *s3event.UnrecognizedError
			if !errors.As(err, &me) && !errors.As(err, &ue) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if n != nil {
				t.Fatalf("Notification %+v with error %v", n, err)
			}
			_ = err.Error()
			return
		}
		if n == nil {
			t.Fatal("nil Notification and nil error")
		}
		if n.Route == s3event.RouteUnknown {
			t.Errorf("Route is unknown")
		}
		if n.TestEvent && (len(n.Objects) > 0 || len(n.Failed) > 0) {
			t.Errorf("test event with objects or failures: %+v", n)
		}
		for _, o := range n.Objects {
			if o.Route != n.Route {
				t.Errorf("object route %v, notification route %v", o.Route, n.Route)
			}
			if o.Bucket == "" || o.Key == "" || o.RawKey == "" || o.Size < 0 {
				t.Errorf("incomplete object %+v", o)
			}
			if !utf8.ValidString(o.Key) {
				t.Errorf("key %q is not UTF-8", o.Key)
			}
			if o.Deletion != s3event.IsDeletion(o.EventName) {
				t.Errorf("Deletion %v for %q", o.Deletion, o.EventName)
			}
			_ = o.Partitions()
		}
		for _, re := range n.Failed {
			_ = re.Error()
		}
		// The filter must cope with whatever Parse accepts.
		s3event.Filter{Options: s3event.Options{EventBridgeKeysRaw: raw}, SortByTime: true}.Apply(
			[]s3event.Message{{ID: "1", Body: string(body)}, {ID: "2", Body: string(body)}})
	})
}

// FuzzKeyRoundTrip checks that a key encoded as S3 encodes it decodes back
// to itself, through EncodeKey, through url.QueryEscape (moto's encoding,
// which also escapes "/") and through a whole notification.
func FuzzKeyRoundTrip(f *testing.F) {
	for _, k := range []string{
		"red flower.jpg", "c++/lib+x.so", "dt=2024-01-01/a b+c%d&e=f/ünï €.csv", "100%25 done", "folder/sub/",
		"a&b=c/q?x#y;z:@$,!'()~*.txt", "日本語/\t\n\"", "%", "+", " ", "%2B",
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if !utf8.ValidString(key) || key == "" {
			return // S3 keys are non-empty UTF-8
		}
		for _, enc := range []struct {
			name string
			fn   func(string) string
		}{{"EncodeKey", s3event.EncodeKey}, {"url.QueryEscape", url.QueryEscape}} {
			raw := enc.fn(key)
			got, err := s3event.DecodeKey(raw)
			if err != nil || got != key {
				t.Fatalf("DecodeKey(%s(%q)) = %q, %v", enc.name, key, got, err)
			}

			body, err := json.Marshal(map[string]any{"Records": []any{map[string]any{
				"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
				"s3": map[string]any{"bucket": map[string]any{"name": "b"}, "object": map[string]any{"key": raw}},
			}}})
			if err != nil {
				t.Fatal(err)
			}
			n, err := s3event.Parse(body)
			if err != nil || len(n.Objects) != 1 || n.Objects[0].Key != key || n.Objects[0].RawKey != raw {
				t.Fatalf("Parse of a record with key %q (%s of %q) = %+v, %v", raw, enc.name, key, n, err)
			}
		}
	})
}
