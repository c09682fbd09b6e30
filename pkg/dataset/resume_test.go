package dataset_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// fault is what breakingClient does to one GET.
type fault struct {
	err     error // the GET fails with it, before reaching S3
	cutAt   int64 // the body breaks off with ECONNRESET after this many bytes (>= 0)
	cleanAt int64 // the body ends cleanly after this many bytes (> 0)
	stall   bool  // the body blocks until it is closed
}

// breakingClient breaks the GETs of a real client as faults says, and
// records what each asked for.
type breakingClient struct {
	*s3.Client
	faults func(call int) fault

	mu    sync.Mutex
	calls []*s3.GetObjectInput
}

func (b *breakingClient) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	b.mu.Lock()
	b.calls = append(b.calls, in)
	f := fault{cutAt: -1}
	if b.faults != nil {
		f = b.faults(len(b.calls))
	}
	b.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out, err := b.Client.GetObject(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	switch {
	case f.stall:
		out.Body = &stallBody{ReadCloser: out.Body, closed: make(chan struct{})}
	case f.cleanAt > 0:
		out.Body = &cutBody{ReadCloser: out.Body, left: f.cleanAt, err: io.EOF}
	case f.cutAt >= 0:
		out.Body = &cutBody{ReadCloser: out.Body, left: f.cutAt, err: syscall.ECONNRESET}
	}
	return out, nil
}

func (b *breakingClient) ranges() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, in := range b.calls {
		out = append(out, aws.ToString(in.Range))
	}
	return out
}

type cutBody struct {
	io.ReadCloser
	left int64
	err  error
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

type stallBody struct {
	io.ReadCloser
	once   sync.Once
	closed chan struct{}
}

func (s *stallBody) Read(p []byte) (int, error) {
	<-s.closed
	return 0, errors.New("read on closed body")
}

func (s *stallBody) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.ReadCloser.Close()
}

// resumeObject puts size random bytes and returns the object, pinned as
// the planner pins it.
func resumeObject(t *testing.T, c *s3.Client, key string, body []byte) dataset.Object {
	t.Helper()
	bucket := newBucket(t, c, "resume")
	put(t, c, bucket, key, body)
	head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	return dataset.Object{Bucket: bucket, Key: key, Size: aws.ToInt64(head.ContentLength), ETag: trimQuotes(aws.ToString(head.ETag))}
}

func trimQuotes(s string) string { return string(bytes.Trim([]byte(s), `"`)) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

func TestReaderResumes(t *testing.T) {
	c := localaws.FakeS3(t)
	body := randomBytes(1 << 20)
	obj := resumeObject(t, c, "data.bin", body)
	tests := []struct {
		name   string
		start  int64
		expect int64
		faults func(call int) fault
		ranges []string // of each GET, when the test pins them
	}{
		{
			name: "reset mid-body, whole read", expect: 0,
			faults: func(call int) fault {
				if call == 1 {
					return fault{cutAt: 300_000}
				}
				return fault{cutAt: -1}
			},
			ranges: []string{"", "bytes=300000-"},
		},
		{
			name: "reset mid-body, ranged read", start: 1000, expect: 100_000,
			faults: func(call int) fault {
				if call == 1 {
					return fault{cutAt: 70_000}
				}
				return fault{cutAt: -1}
			},
			// The rest is asked for in one range, as after a first range
			// that did not break.
			ranges: []string{"bytes=1000-100999", "bytes=71000-"},
		},
		{
			name: "body shorter than its length, no error from the transport", expect: 0,
			faults: func(call int) fault {
				if call == 1 {
					return fault{cleanAt: 5}
				}
				return fault{cutAt: -1}
			},
			ranges: []string{"", "bytes=5-"},
		},
		{
			name: "every body cut short, progress each time", expect: 0,
			faults: func(call int) fault { return fault{cutAt: 150_000} },
		},
		{
			name: "GET fails with a transport error, then works", expect: 0,
			faults: func(call int) fault {
				if call <= 3 {
					return fault{err: syscall.ECONNREFUSED}
				}
				return fault{cutAt: -1}
			},
			ranges: []string{"", "", "", ""},
		},
		{
			name: "stalled body", expect: 0,
			faults: func(call int) fault {
				if call == 1 {
					return fault{stall: true}
				}
				return fault{cutAt: -1}
			},
			ranges: []string{"", "bytes=0-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bc := &breakingClient{Client: c, faults: tt.faults}
			r := dataset.NewReader(t.Context(), bc, obj, tt.start, tt.expect)
			r.Resume.StallTimeout = 200 * time.Millisecond
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("read: %v (GETs %q)", err, bc.ranges())
			}
			if !bytes.Equal(got, body[tt.start:]) {
				t.Fatalf("read %d bytes, not the object's %d from %d", len(got), len(body)-int(tt.start), tt.start)
			}
			if tt.ranges != nil && !equal(bc.ranges(), tt.ranges) {
				t.Errorf("GET ranges = %q, want %q", bc.ranges(), tt.ranges)
			}
			for i, in := range bc.calls[1:] {
				if aws.ToString(in.IfMatch) != `"`+obj.ETag+`"` {
					t.Errorf("GET %d is not pinned to the ETag: If-Match %q", i+2, aws.ToString(in.IfMatch))
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReaderResumesCompressed(t *testing.T) {
	c := localaws.FakeS3(t)
	var plain bytes.Buffer
	for i := range 20_000 {
		plain.WriteString(`{"n":` + string(rune('0'+i%10)) + `,"pad":"` + string(bytes.Repeat([]byte{'x'}, i%97)) + "\"}\n")
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	obj := resumeObject(t, c, "data.jsonl.gz", gz.Bytes())
	cut := int64(gz.Len() / 3)
	bc := &breakingClient{Client: c, faults: func(call int) fault {
		if call <= 2 {
			return fault{cutAt: cut}
		}
		return fault{cutAt: -1}
	}}
	r := dataset.NewReader(t.Context(), bc, obj, 0, 0)
	defer r.Close()
	d, err := dataset.Decompress(r, dataset.CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, plain.Bytes()) {
		t.Fatalf("decompressed %d bytes, want %d", len(got), plain.Len())
	}
	if n := len(bc.ranges()); n != 3 {
		t.Errorf("%d GETs (%q), want 3: each resumed where the cut was", n, bc.ranges())
	}
}

func TestReaderGivesUp(t *testing.T) {
	c := localaws.FakeS3(t)
	body := randomBytes(200_000)
	obj := resumeObject(t, c, "data.bin", body)
	bc := &breakingClient{Client: c, faults: func(call int) fault {
		if call == 1 {
			return fault{cutAt: 1234}
		}
		return fault{cutAt: 0}
	}}
	r := dataset.NewReader(t.Context(), bc, obj, 0, 0)
	r.Resume.Attempts = 3
	defer r.Close()
	got, err := io.ReadAll(r)
	var re *dataset.ReadError
	if !errors.As(err, &re) || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("err = %v, want a *ReadError of the reset", err)
	}
	if re.Offset != 1234 || len(got) != 1234 {
		t.Errorf("failed at offset %d after %d bytes, want 1234", re.Offset, len(got))
	}
	if n := len(bc.ranges()); n != 1+3 {
		t.Errorf("%d GETs, want 4: the first and 3 resumes without progress", n)
	}
}

func TestReaderStopsWhenObjectChanged(t *testing.T) {
	c := localaws.FakeS3(t)
	body := randomBytes(200_000)
	obj := resumeObject(t, c, "data.bin", body)
	bc := &breakingClient{Client: c}
	bc.faults = func(call int) fault {
		if call == 1 {
			return fault{cutAt: 1000}
		}
		// Overwritten after the first response broke off.
		put(t, c, obj.Bucket, obj.Key, bytes.Repeat([]byte("other "), 50_000))
		return fault{cutAt: -1}
	}
	r := dataset.NewReader(t.Context(), bc, obj, 0, 0)
	defer r.Close()
	_, err := io.ReadAll(r)
	if !errors.Is(err, dataset.ErrChanged) {
		t.Fatalf("err = %v, want ErrChanged", err)
	}
	if n := len(bc.ranges()); n != 2 {
		t.Errorf("%d GETs, want 2: no retry once the object changed", n)
	}
}

func TestReaderAtResumes(t *testing.T) {
	c := localaws.FakeS3(t)
	body := randomBytes(300_000)
	obj := resumeObject(t, c, "data.bin", body)
	bc := &breakingClient{Client: c, faults: func(call int) fault {
		switch call {
		case 1:
			return fault{cutAt: 10_000}
		case 2:
			return fault{cleanAt: 20_000}
		}
		return fault{cutAt: -1}
	}}
	r := dataset.NewReaderAt(t.Context(), bc, obj)
	p := make([]byte, 100_000)
	n, err := r.ReadAt(p, 50_000)
	if err != nil || n != len(p) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(p, body[50_000:150_000]) {
		t.Fatal("ReadAt returned other bytes")
	}
	want := []string{"bytes=50000-149999", "bytes=60000-149999", "bytes=80000-149999"}
	if !equal(bc.ranges(), want) {
		t.Errorf("GET ranges = %q, want %q", bc.ranges(), want)
	}
}
