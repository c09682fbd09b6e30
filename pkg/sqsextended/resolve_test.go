package sqsextended_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// stubGet answers every GetObject with body, declaring length (nil: no
// Content-Length), and counts calls and bytes read. The embedded interface
// is nil: DeleteObject panics.
type stubGet struct {
	sqsextended.ResolveAPI
	body   string
	length *int64
	calls  int
	read   int
}

func (s *stubGet) GetObject(_ context.Context, _ *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	s.calls++
	return &s3.GetObjectOutput{Body: io.NopCloser(&countingReader{r: strings.NewReader(s.body), n: &s.read}), ContentLength: s.length}, nil
}

type countingReader struct {
	r io.Reader
	n *int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += n
	return n, err
}

func marked(body string) sqstypes.Message {
	return sqstypes.Message{
		Body: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			sqsextended.SizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String("1")},
		},
	}
}

var aPointer = sqsextended.Pointer{Bucket: "b", Key: "k"}

func TestResolveLeavesOtherMessages(t *testing.T) {
	stub := &stubGet{body: "payload"}
	r := sqsextended.NewResolver(stub, sqsextended.ResolverOptions{})
	for _, msg := range []sqstypes.Message{
		{Body: aws.String("plain")},
		{Body: aws.String(aPointer.Body())}, // looks like a pointer, but is not marked
		{Body: aws.String("x"), MessageAttributes: map[string]sqstypes.MessageAttributeValue{"source": strAttr("s")}},
		{},
	} {
		body, p, err := r.Resolve(context.Background(), msg)
		if err != nil || p != nil || body != aws.ToString(msg.Body) {
			t.Errorf("Resolve(%q) = %q, %v, %v; want the body unchanged", aws.ToString(msg.Body), body, p, err)
		}
	}
	if stub.calls != 0 {
		t.Errorf("%d GetObject calls for unmarked messages", stub.calls)
	}
}

func TestResolveMarkedWithoutPointer(t *testing.T) {
	stub := &stubGet{body: "payload"}
	r := sqsextended.NewResolver(stub, sqsextended.ResolverOptions{})
	body, p, err := r.Resolve(context.Background(), marked(`{"order":1}`))
	var pe *sqsextended.PointerError
	if !errors.As(err, &pe) || body != "" || p != nil {
		t.Fatalf("Resolve = %q, %v, %v; want a *PointerError", body, p, err)
	}
	if stub.calls != 0 {
		t.Errorf("%d GetObject calls", stub.calls)
	}
}

func TestResolveSizeCap(t *testing.T) {
	const payload = "0123456789"
	cases := []struct {
		name     string
		limit    int64
		length   *int64
		wantErr  bool
		wantSize int64
		maxRead  int // bytes the resolver may read before refusing
	}{
		{name: "at the limit, length known", limit: 10, length: aws.Int64(10)},
		{name: "at the limit, length unknown", limit: 10},
		{name: "over, length known: nothing read", limit: 9, length: aws.Int64(10), wantErr: true, wantSize: 10, maxRead: 0},
		{name: "over, length unknown: stops after limit+1", limit: 4, wantErr: true, wantSize: 5, maxRead: 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stub := &stubGet{body: payload, length: c.length}
			r := sqsextended.NewResolver(stub, sqsextended.ResolverOptions{MaxPayloadBytes: c.limit})
			body, p, err := r.Resolve(context.Background(), marked(aPointer.Body()))
			if !c.wantErr {
				if err != nil || body != payload || p == nil || *p != aPointer {
					t.Fatalf("Resolve = %q, %v, %v; want the payload", body, p, err)
				}
				return
			}
			var tl *sqsextended.TooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("Resolve = %q, %v, %v; want a *TooLargeError", body, p, err)
			}
			if tl.Size != c.wantSize || tl.Limit != c.limit || tl.Pointer != aPointer {
				t.Errorf("TooLargeError = %+v, want size %d limit %d", tl, c.wantSize, c.limit)
			}
			if stub.read > c.maxRead {
				t.Errorf("read %d bytes of a refused payload, want at most %d", stub.read, c.maxRead)
			}
		})
	}
	// A limit below zero means the default, which a 10-byte payload is under.
	r := sqsextended.NewResolver(&stubGet{body: payload, length: aws.Int64(10)}, sqsextended.ResolverOptions{MaxPayloadBytes: -1})
	if body, _, err := r.Resolve(context.Background(), marked(aPointer.Body())); err != nil || body != payload {
		t.Errorf("negative limit: Resolve = %q, %v; want the payload", body, err)
	}
}
