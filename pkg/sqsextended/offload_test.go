package sqsextended_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// recordingS3 records every PutObject and answers with err. The embedded
// interface is nil: any other call panics.
type recordingS3 struct {
	sqsextended.OffloadAPI
	err error

	mu     sync.Mutex
	puts   []*s3.PutObjectInput
	bodies []string
}

func (r *recordingS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	data, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.puts = append(r.puts, in)
	r.bodies = append(r.bodies, string(data))
	if r.err != nil {
		return nil, r.err
	}
	return &s3.PutObjectOutput{}, nil
}

// ignoreSmithy skips the SDK's unexported marker field.
var ignoreSmithy = cmpopts.IgnoreUnexported(sqstypes.MessageAttributeValue{})

func strAttr(v string) sqstypes.MessageAttributeValue {
	return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func newTestOffloader(t *testing.T, client sqsextended.OffloadAPI, opts sqsextended.OffloaderOptions) *sqsextended.Offloader {
	t.Helper()
	o, err := sqsextended.NewOffloader(client, opts)
	if err != nil {
		t.Fatalf("NewOffloader: %v", err)
	}
	return o
}

// The object key of record "r1" under prefix "p/": p/ + sha256("r1") in
// hex + "/" + the sha256 of the body in hex (r1Key), 131 bytes.
const r1KeyStart = "p/82f3e9c695dc6b8d1b11818d5701919e286de8d47f7c3eb3100c485f79e57828/"

func r1Key(body string) string {
	sum := sha256.Sum256([]byte(body))
	return r1KeyStart + hex.EncodeToString(sum[:])
}

// r1Pointer is the pointer body of record "r1" with body in bucket "b"
// under prefix "p/", 217 bytes.
func r1Pointer(body string) string {
	return `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"` + r1Key(body) + `"}]`
}

// TestOffloadSizeRule checks the inline-or-offload decision at the limit and
// the size of the pointer message, worked out by hand: the pointer body
// (217 bytes) plus "ExtendedPayloadSize" (19) + "Number" (6) + the digits
// of the payload size, plus the entry's own attributes ("source" +
// "String" + "orders.jsonl" = 24).
func TestOffloadSizeRule(t *testing.T) {
	if n := len(r1Pointer("x")); n != 217 {
		t.Fatalf("the test's pointer is %d bytes, want 217", n)
	}
	const limit = 1024
	withSource := map[string]sqstypes.MessageAttributeValue{"source": strAttr("orders.jsonl")}
	cases := []struct {
		name        string
		body        string
		attrs       map[string]sqstypes.MessageAttributeValue
		offload     bool
		pointerSize int
	}{
		{name: "limit minus one", body: strings.Repeat("x", limit-1)},
		{name: "at the limit", body: strings.Repeat("x", limit)},
		{name: "limit plus one", body: strings.Repeat("x", limit+1), offload: true, pointerSize: 217 + 19 + 6 + 4},
		{name: "attributes: limit minus one", body: strings.Repeat("x", limit-24-1), attrs: withSource},
		{name: "attributes: at the limit", body: strings.Repeat("x", limit-24), attrs: withSource},
		{name: "attributes: limit plus one", body: strings.Repeat("x", limit-24+1), attrs: withSource, offload: true, pointerSize: 217 + 24 + 19 + 6 + 4},
		{name: "UTF-8: 512 two-byte characters are 1024 bytes", body: strings.Repeat("é", 512)},
		{name: "UTF-8: 342 characters, 1025 bytes", body: strings.Repeat("€", 341) + "é", offload: true, pointerSize: 217 + 19 + 6 + 4},
		{name: "large payload: seven digits", body: strings.Repeat("y", 5<<20), offload: true, pointerSize: 217 + 19 + 6 + 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingS3{}
			o := newTestOffloader(t, rec, sqsextended.OffloaderOptions{Bucket: "b", Prefix: "p/", MaxMessageSize: limit})
			in := sqsbatch.Entry{ID: "e1", Body: c.body, Attributes: c.attrs, GroupID: "g", DeduplicationID: "d"}
			out, offloaded, err := o.Entry(context.Background(), "r1", in)
			if err != nil {
				t.Fatalf("Entry: %v", err)
			}
			if offloaded != c.offload {
				t.Fatalf("offloaded = %v, want %v (entry size %d, limit %d)", offloaded, c.offload, in.Size(), limit)
			}
			if !c.offload {
				if diff := cmp.Diff(in, out, ignoreSmithy); diff != "" {
					t.Errorf("inline entry changed (-in +out):\n%s", diff)
				}
				if len(rec.puts) != 0 {
					t.Errorf("%d PutObject calls for an inline entry", len(rec.puts))
				}
				return
			}
			if want := r1Pointer(c.body); out.Body != want {
				t.Errorf("body = %s, want %s", out.Body, want)
			}
			if got := out.Size(); got != c.pointerSize {
				t.Errorf("pointer message is %d bytes, want %d", got, c.pointerSize)
			}
			size := out.Attributes[sqsextended.SizeAttribute]
			if aws.ToString(size.DataType) != "Number" || aws.ToString(size.StringValue) != itoa(len(c.body)) {
				t.Errorf("%s = %s %s, want Number %d", sqsextended.SizeAttribute, aws.ToString(size.DataType), aws.ToString(size.StringValue), len(c.body))
			}
			if len(out.Attributes) != len(c.attrs)+1 {
				t.Errorf("pointer has %d attributes, want %d", len(out.Attributes), len(c.attrs)+1)
			}
			for k, v := range c.attrs {
				if diff := cmp.Diff(v, out.Attributes[k], ignoreSmithy); diff != "" {
					t.Errorf("attribute %s changed:\n%s", k, diff)
				}
			}
			if out.ID != "e1" || out.GroupID != "g" || out.DeduplicationID != "d" {
				t.Errorf("ID, GroupID, DeduplicationID = %q %q %q; want kept", out.ID, out.GroupID, out.DeduplicationID)
			}
			if _, ok := in.Attributes[sqsextended.SizeAttribute]; ok {
				t.Error("Entry added the size attribute to the caller's map")
			}
			if len(rec.puts) != 1 {
				t.Fatalf("%d PutObject calls, want 1", len(rec.puts))
			}
			put := rec.puts[0]
			if aws.ToString(put.Bucket) != "b" || aws.ToString(put.Key) != r1Key(c.body) {
				t.Errorf("PutObject to %s/%s, want b/%s", aws.ToString(put.Bucket), aws.ToString(put.Key), r1Key(c.body))
			}
			if aws.ToString(put.IfNoneMatch) != "*" {
				t.Errorf("PutObject If-None-Match = %q, want * (never rewrite an object)", aws.ToString(put.IfNoneMatch))
			}
			if put.ServerSideEncryption != "" || put.SSEKMSKeyId != nil {
				t.Errorf("SSE = %q key %v, want none named (the bucket's default)", put.ServerSideEncryption, put.SSEKMSKeyId)
			}
			if rec.bodies[0] != c.body || aws.ToInt64(put.ContentLength) != int64(len(c.body)) {
				t.Errorf("PutObject wrote %d bytes (ContentLength %d), want the %d-byte body", len(rec.bodies[0]), aws.ToInt64(put.ContentLength), len(c.body))
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

func TestOffloadAlwaysAndKMS(t *testing.T) {
	rec := &recordingS3{}
	o := newTestOffloader(t, rec, sqsextended.OffloaderOptions{Bucket: "b", Prefix: "p/", Mode: sqsextended.ModeAlways, MaxMessageSize: 1024, KMSKeyID: "alias/offload"})
	out, offloaded, err := o.Entry(context.Background(), "r1", sqsbatch.Entry{Body: "ab"})
	if err != nil || !offloaded {
		t.Fatalf("Entry = %v, %v; want offloaded", offloaded, err)
	}
	if out.Body != r1Pointer("ab") {
		t.Errorf("body = %s", out.Body)
	}
	put := rec.puts[0]
	if put.ServerSideEncryption != s3types.ServerSideEncryptionAwsKms || aws.ToString(put.SSEKMSKeyId) != "alias/offload" {
		t.Errorf("SSE = %q key %q, want aws:kms alias/offload", put.ServerSideEncryption, aws.ToString(put.SSEKMSKeyId))
	}
}

func TestOffloadRefuses(t *testing.T) {
	ten := map[string]sqstypes.MessageAttributeValue{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		ten[k] = strAttr("v")
	}
	nine := map[string]sqstypes.MessageAttributeValue{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		nine[k] = strAttr("v")
	}
	big := strings.Repeat("x", 2000)
	cases := []struct {
		name    string
		id      string
		entry   sqsbatch.Entry
		mode    sqsextended.Mode
		inline  bool // nine attributes: offloaded fine
		contain string
	}{
		{name: "no id", entry: sqsbatch.Entry{Body: "x"}, contain: "no id"},
		{name: "reserved attribute", id: "r", entry: sqsbatch.Entry{Body: "x", Attributes: map[string]sqstypes.MessageAttributeValue{sqsextended.SizeAttribute: strAttr("1")}}, contain: "ExtendedPayloadSize is reserved"},
		{name: "legacy reserved attribute", id: "r", entry: sqsbatch.Entry{Body: big, Attributes: map[string]sqstypes.MessageAttributeValue{sqsextended.LegacySizeAttribute: strAttr("1")}}, contain: "SQSLargePayloadSize is reserved"},
		{name: "ten attributes", id: "r", entry: sqsbatch.Entry{Body: big, Attributes: ten}, contain: "10 message attributes"},
		{name: "empty body, always", id: "r", entry: sqsbatch.Entry{}, mode: sqsextended.ModeAlways, contain: "body is empty"},
		{name: "attributes leave no room for the pointer", id: "r", entry: sqsbatch.Entry{Body: big, Attributes: map[string]sqstypes.MessageAttributeValue{"a": strAttr(strings.Repeat("v", 900))}}, contain: "pointer message would be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingS3{}
			o := newTestOffloader(t, rec, sqsextended.OffloaderOptions{Bucket: "b", MaxMessageSize: 1024, Mode: c.mode})
			out, offloaded, err := o.Entry(context.Background(), c.id, c.entry)
			var ie *sqsextended.InvalidEntryError
			if !errors.As(err, &ie) {
				t.Fatalf("Entry = %v, %v; want an *InvalidEntryError", offloaded, err)
			}
			if !strings.Contains(err.Error(), c.contain) {
				t.Errorf("error %q does not say %q", err, c.contain)
			}
			if offloaded || out.Body != "" || len(rec.puts) != 0 {
				t.Errorf("offloaded=%v body=%q puts=%d; want nothing", offloaded, out.Body, len(rec.puts))
			}
		})
	}
	// Nine attributes leave room for the size attribute.
	rec := &recordingS3{}
	o := newTestOffloader(t, rec, sqsextended.OffloaderOptions{Bucket: "b", MaxMessageSize: 1024})
	out, offloaded, err := o.Entry(context.Background(), "r", sqsbatch.Entry{Body: big, Attributes: nine})
	if err != nil || !offloaded || len(out.Attributes) != 10 {
		t.Errorf("nine attributes: offloaded=%v attributes=%d err=%v; want offloaded with 10", offloaded, len(out.Attributes), err)
	}
}

func TestOffloadPutFailure(t *testing.T) {
	boom := errors.New("connection reset")
	rec := &recordingS3{err: boom}
	o := newTestOffloader(t, rec, sqsextended.OffloaderOptions{Bucket: "b", MaxMessageSize: 1024})
	out, offloaded, err := o.Entry(context.Background(), "r", sqsbatch.Entry{ID: "e", Body: strings.Repeat("x", 2000)})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap %v", err, boom)
	}
	var ie *sqsextended.InvalidEntryError
	if errors.As(err, &ie) {
		t.Errorf("an S3 failure is reported as an invalid entry: %v", err)
	}
	if offloaded || out.Body != "" || out.Attributes != nil {
		t.Errorf("got offloaded=%v entry %+v; want no pointer", offloaded, out)
	}
}

func TestOffloadKeys(t *testing.T) {
	o := newTestOffloader(t, &recordingS3{}, sqsextended.OffloaderOptions{Bucket: "b", Prefix: "p/", MaxMessageSize: 1024})
	const body = "payload"
	// sha256("payload"), as sha256sum prints it.
	const want = r1KeyStart + "239f59ed55e737c77147cf55ad0c1b030b6d7ee748a7426952f9b852d5a935e5"
	if got := o.Key("r1", body); got != want {
		t.Errorf("Key(r1, payload) = %s, want %s", got, want)
	}
	if o.Key("r1", body) == o.Key("r2", body) || o.Key("", body) == o.Key(" ", body) {
		t.Error("different ids share a key")
	}
	if o.Key("r1", body) == o.Key("r1", body+" ") {
		t.Error("different bodies of one record share a key")
	}
	if got := o.Pointer("r1", body); got != (sqsextended.Pointer{Bucket: "b", Key: want}) {
		t.Errorf("Pointer(r1, payload) = %+v", got)
	}
	if n := len(o.Key("r1", body)) - len("p/"); n != 1024-sqsextended.MaxPrefixLen {
		t.Errorf("keys are the prefix and %d bytes; MaxPrefixLen leaves %d", n, 1024-sqsextended.MaxPrefixLen)
	}
}

func TestNewOffloaderChecks(t *testing.T) {
	good := sqsextended.OffloaderOptions{Bucket: "b", Prefix: "a-b_c/d.e/", MaxMessageSize: 1024}
	if _, err := sqsextended.NewOffloader(&recordingS3{}, good); err != nil {
		t.Fatalf("NewOffloader(%+v): %v", good, err)
	}
	cases := []struct {
		name    string
		client  sqsextended.OffloadAPI
		edit    func(*sqsextended.OffloaderOptions)
		contain string
	}{
		{"no client", nil, func(*sqsextended.OffloaderOptions) {}, "no S3 client"},
		{"no bucket", &recordingS3{}, func(o *sqsextended.OffloaderOptions) { o.Bucket = "" }, "no bucket"},
		{"prefix with '='", &recordingS3{}, func(o *sqsextended.OffloaderOptions) { o.Prefix = "date=1/" }, `"=" at byte 4`},
		{"prefix too long", &recordingS3{}, func(o *sqsextended.OffloaderOptions) { o.Prefix = strings.Repeat("p", sqsextended.MaxPrefixLen+1) }, "896 bytes"},
		{"unknown mode", &recordingS3{}, func(o *sqsextended.OffloaderOptions) { o.Mode = "sometimes" }, `mode "sometimes"`},
		{"no message size", &recordingS3{}, func(o *sqsextended.OffloaderOptions) { o.MaxMessageSize = 0 }, "MaxMessageSize is not set"},
	}
	for _, c := range cases {
		opts := good
		c.edit(&opts)
		_, err := sqsextended.NewOffloader(c.client, opts)
		if err == nil || !strings.Contains(err.Error(), c.contain) {
			t.Errorf("%s: err = %v, want one saying %q", c.name, err, c.contain)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]sqsextended.Mode{"": "", "large": sqsextended.ModeLarge, " ALWAYS ": sqsextended.ModeAlways} {
		if got, err := sqsextended.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := sqsextended.ParseMode("never"); err == nil {
		t.Error("ParseMode(never) accepted")
	}
}
