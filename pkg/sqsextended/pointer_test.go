package sqsextended_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

func readTestdata(tb testing.TB, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// pointerFiles are the files of testdata/ with the pointer each holds.
// golden marks the bytes the Java client writes, which Body must
// reproduce; the sources are in testdata/README.md.
type pointerFile struct {
	file   string
	want   sqsextended.Pointer
	golden bool
}

var pointerFiles = []pointerFile{
	{"powertools-sqs-pointer.txt", sqsextended.Pointer{Bucket: "ms-extended-sqs-client", Key: "c71eb2ae-37e0-4265-8909-32f4153faddf"}, true},
	{"java-client-test-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket-name", Key: "S3Key"}, true},
	{"powertools-large-messages-spaced.txt", sqsextended.Pointer{Bucket: "bucketname", Key: "c71eb2ae-37e0-4265-8909-32f4153faddf"}, false},
	{"python-client-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket", Key: "cc562f4d-c6f3-4b0c-bf29-007a902c391f"}, false},
	{"python-client-legacy-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket", Key: "cc562f4d-c6f3-4b0c-bf29-007a902c391f"}, false},
	{"python-client-non-ascii-key.txt", sqsextended.Pointer{Bucket: "test-bucket", Key: "records/Zürich €/日本.json"}, false},
	{"java-1.0-legacy-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket-name", Key: "7f096cb3-454d-4bd8-923d-8948a300f1c1"}, false},
	{"dotnet-raol-bare-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket-name", Key: "0f8fad5bd9cb469fa16570867728950e"}, false},
	{"bare-pointer.txt", sqsextended.Pointer{Bucket: "test-bucket-name", Key: "7f096cb3-454d-4bd8-923d-8948a300f1c1"}, false},
}

func TestPointerFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(pointerFiles, func(c pointerFile) bool { return c.file == filepath.Base(f) }) {
			t.Errorf("testdata/%s has no case in pointerFiles", filepath.Base(f))
		}
	}
	for _, c := range pointerFiles {
		t.Run(c.file, func(t *testing.T) {
			body := readTestdata(t, c.file)
			got, err := sqsextended.ParsePointer(body)
			if err != nil {
				t.Fatalf("ParsePointer: %v", err)
			}
			if got != c.want {
				t.Errorf("ParsePointer = %+v, want %+v", got, c.want)
			}
			if c.golden {
				if b := c.want.Body(); b != body {
					t.Errorf("Body()\n got %s\nwant %s", b, body)
				}
			} else if again, err := sqsextended.ParsePointer(got.Body()); err != nil || again != got {
				t.Errorf("re-parsing Body() gave %+v, %v", again, err)
			}
		})
	}
}

// TestPointerBodyEscaping checks the escapes Jackson writes: only '"', '\'
// and control characters; "/", non-ASCII, U+2028 and DEL stay as they are.
func TestPointerBodyEscaping(t *testing.T) {
	const head = `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":`
	cases := []struct {
		name, key, want string
	}{
		{"plain path", "a/b c+d=e.json", `"a/b c+d=e.json"`},
		{"quote and backslash", `x"y\z`, `"x\"y\\z"`},
		{"short escapes", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other control characters in upper-case hex", "\x00\x01\x1f\x0b", `"\u0000\u0001\u001F\u000B"`},
		{"DEL is not escaped", "a\x7fb", "\"a\x7fb\""},
		{"multi-byte UTF-8 written as is", "Zürich €/日本/😀", `"Zürich €/日本/😀"`},
		{"U+2028 is not escaped", "a\u2028b", "\"a\u2028b\""},
		{"HTML characters are not escaped", "<a>&", `"<a>&"`},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb", "\"a\uFFFDb\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := sqsextended.Pointer{Bucket: "b", Key: c.key}
			want := head + c.want + "}]"
			if got := p.Body(); got != want {
				t.Fatalf("Body()\n got %q\nwant %q", got, want)
			}
			back, err := sqsextended.ParsePointer(p.Body())
			if err != nil {
				t.Fatalf("ParsePointer(Body()): %v", err)
			}
			if strings.ToValidUTF8(c.key, "\uFFFD") != back.Key {
				t.Errorf("round trip gave key %q, want %q", back.Key, c.key)
			}
		})
	}
}

func TestParsePointerRejects(t *testing.T) {
	cases := []struct{ name, body string }{
		{"empty", ""},
		{"blank", "  \n"},
		{"plain text", "hello"},
		{"a JSON string", `"s3BucketName"`},
		{"truncated", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}`},
		{"trailing data", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}] x`},
		{"unknown class", `["com.example.Pointer",{"s3BucketName":"b","s3Key":"k"}]`},
		{"class not a string", `[1,{"s3BucketName":"b","s3Key":"k"}]`},
		{"one element", `["software.amazon.payloadoffloading.PayloadS3Pointer"]`},
		{"three elements", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"},1]`},
		{"second element not an object", `["software.amazon.payloadoffloading.PayloadS3Pointer",null]`},
		{"no key", `{"s3BucketName":"b"}`},
		{"no bucket", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3Key":"k"}]`},
		{"empty key", `{"s3BucketName":"b","s3Key":""}`},
		{"null bucket", `{"s3BucketName":null,"s3Key":"k"}`},
		{"bucket not a string", `{"s3BucketName":7,"s3Key":"k"}`},
		{"an ordinary JSON record", `{"id":1,"name":"x"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := sqsextended.ParsePointer(c.body)
			var pe *sqsextended.PointerError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePointer = %+v, %v; want a *PointerError", p, err)
			}
			if !strings.HasPrefix(c.body, pe.Excerpt) {
				t.Errorf("Excerpt %q is not the start of the body", pe.Excerpt)
			}
		})
	}
}

// TestParsePointerAccepts covers what other writers may do within JSON:
// extra fields (a fork adds "md5"), different spacing, field order.
func TestParsePointerAccepts(t *testing.T) {
	want := sqsextended.Pointer{Bucket: "b", Key: "k/1"}
	for _, body := range []string{
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k/1","md5":"x"}]`,
		" \n[ \"software.amazon.payloadoffloading.PayloadS3Pointer\" ,\n { \"s3Key\" : \"k\\/1\" , \"s3BucketName\" : \"b\" } ]\n",
		`{"S3BUCKETNAME":"b","s3key":"k\u002f1"}`,
	} {
		got, err := sqsextended.ParsePointer(body)
		if err != nil || got != want {
			t.Errorf("ParsePointer(%q) = %+v, %v; want %+v", body, got, err, want)
		}
	}
}

func TestMarked(t *testing.T) {
	n := sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String("5")}
	cases := []struct {
		name  string
		attrs map[string]sqstypes.MessageAttributeValue
		want  bool
	}{
		{"none", nil, false},
		{"other attributes", map[string]sqstypes.MessageAttributeValue{"source": n}, false},
		{"current", map[string]sqstypes.MessageAttributeValue{sqsextended.SizeAttribute: n}, true},
		{"legacy", map[string]sqstypes.MessageAttributeValue{"source": n, sqsextended.LegacySizeAttribute: n}, true},
		{"case differs", map[string]sqstypes.MessageAttributeValue{"extendedpayloadsize": n}, false},
	}
	for _, c := range cases {
		if got := sqsextended.Marked(c.attrs); got != c.want {
			t.Errorf("%s: Marked = %v, want %v", c.name, got, c.want)
		}
	}
	lambda := map[string]events.SQSMessageAttribute{sqsextended.LegacySizeAttribute: {DataType: "Number"}}
	if !sqsextended.Marked(lambda) {
		t.Error("Marked(events attributes with SQSLargePayloadSize) = false")
	}
	if names := sqsextended.AttributeNames(); !slices.Equal(names, []string{"ExtendedPayloadSize", "SQSLargePayloadSize"}) {
		t.Errorf("AttributeNames() = %q", names)
	}
}
