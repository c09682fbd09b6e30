package sqsextended_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// versionedS3 returns a client for moto_server's S3 and a versioned bucket,
// emptied of every version and deleted when the test ends. On a versioned
// bucket every PutObject that takes effect adds a version, so the versions
// of a key count its writes: a rewrite cannot hide.
func versionedS3(t *testing.T, optFns ...func(*s3.Options)) (*s3.Client, string) {
	t.Helper()
	endpoint := localaws.Endpoint(t, localaws.EnvS3)
	c := localaws.S3Client(endpoint)
	bucket := fmt.Sprintf("sqsextended-v-%d", time.Now().UnixNano())
	ctx := t.Context()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("enable versioning: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
		if err == nil {
			for _, v := range out.Versions {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: v.Key, VersionId: v.VersionId})
			}
			for _, m := range out.DeleteMarkers {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: m.Key, VersionId: m.VersionId})
			}
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	if len(optFns) > 0 {
		c = s3.NewFromConfig(localaws.Config(endpoint), append([]func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}, optFns...)...)
	}
	return c, bucket
}

// versions returns, for each key under prefix, how many versions it has
// (delete markers not counted).
func versions(t *testing.T, c *s3.Client, bucket, prefix string) map[string]int {
	t.Helper()
	out, err := c.ListObjectVersions(t.Context(), &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("list versions: %v", err)
	}
	if aws.ToBool(out.IsTruncated) {
		t.Fatal("list versions: more than one page")
	}
	n := map[string]int{}
	for _, v := range out.Versions {
		n[aws.ToString(v.Key)]++
	}
	return n
}

func offloader(t *testing.T, c sqsextended.OffloadAPI, bucket, prefix string) *sqsextended.Offloader {
	t.Helper()
	o, err := sqsextended.NewOffloader(c, sqsextended.OffloaderOptions{Bucket: bucket, Prefix: prefix, MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// message is e as a consumer receives it.
func message(e sqsbatch.Entry) sqstypes.Message {
	return sqstypes.Message{Body: aws.String(e.Body), MessageAttributes: e.Attributes}
}

// TestIntegrationOtherBodySameRecord offloads one record id with two
// bodies, as a second run with another mapping (or chunk mode, or the
// other function) does: two objects, each written once, and each pointer
// reads its own body, also after a consumer deleted the other's payload.
func TestIntegrationOtherBodySameRecord(t *testing.T) {
	c, bucket := versionedS3(t)
	off := offloader(t, c, bucket, "runs/")
	ctx := t.Context()
	const id = "orders.jsonl:7"
	first := sqsbatch.Entry{ID: "e", Body: `{"run":1,"doc":"` + strings.Repeat("a", 2000) + `"}`}
	second := sqsbatch.Entry{ID: "e", Body: `{"run":2,"doc":"` + strings.Repeat("b", 2000) + `"}`}
	p1, ok1, err1 := off.Entry(ctx, id, first)
	p2, ok2, err2 := off.Entry(ctx, id, second)
	if err1 != nil || err2 != nil || !ok1 || !ok2 {
		t.Fatalf("Entry: %v %v, offloaded %v %v", err1, err2, ok1, ok2)
	}
	if p1.Body == p2.Body {
		t.Errorf("both bodies got the pointer %s", p1.Body)
	}
	got := versions(t, c, bucket, "runs/")
	want := map[string]int{off.Key(id, first.Body): 1, off.Key(id, second.Body): 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("versions per key = %v, want %v (one object per body, each written once)", got, want)
	}

	r := sqsextended.NewResolver(c, sqsextended.ResolverOptions{})
	body, ptr, err := r.Resolve(ctx, message(p1))
	if err != nil {
		t.Fatal(err)
	}
	if body != first.Body {
		t.Errorf("first pointer reads %.20q; want the first body", body)
	}
	// The first run's consumer is done and deletes its payload; the
	// second run's message must still read.
	if err := r.Delete(ctx, *ptr); err != nil {
		t.Fatal(err)
	}
	if body, _, err := r.Resolve(ctx, message(p2)); err != nil || body != second.Body {
		t.Errorf("second pointer after the first payload's deletion reads %.20q, %v; want the second body", body, err)
	}
}

// TestIntegrationSameBodyWrittenOnce offloads one record with one body
// three times (a retry, a re-run): one object, written once, and the same
// pointer every time, encrypted as the bucket's default says.
func TestIntegrationSameBodyWrittenOnce(t *testing.T) {
	c, bucket := versionedS3(t)
	if _, err := c.PutBucketEncryption(t.Context(), &s3.PutBucketEncryptionInput{Bucket: aws.String(bucket),
		ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAwsKms, KMSMasterKeyID: aws.String("alias/lake")},
		}}}}); err != nil {
		t.Fatal(err)
	}
	off := offloader(t, c, bucket, "retry/")
	e := sqsbatch.Entry{ID: "e", Body: strings.Repeat("r", 4096)}
	var bodies []string
	for range 3 {
		out, ok, err := off.Entry(t.Context(), "orders.jsonl:7", e)
		if err != nil || !ok {
			t.Fatalf("Entry = %v, %v; want offloaded", ok, err)
		}
		bodies = append(bodies, out.Body)
	}
	if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Errorf("pointers differ: %q", bodies)
	}
	key := off.Key("orders.jsonl:7", e.Body)
	if got := versions(t, c, bucket, "retry/"); len(got) != 1 || got[key] != 1 {
		t.Errorf("versions per key = %v, want {%s: 1}", got, key)
	}
	head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if head.ServerSideEncryption != s3types.ServerSideEncryptionAwsKms || aws.ToInt64(head.ContentLength) != int64(len(e.Body)) {
		t.Errorf("object stored with SSE %q (key %q), %d bytes; want the bucket's default aws:kms, %d",
			head.ServerSideEncryption, aws.ToString(head.SSEKMSKeyId), aws.ToInt64(head.ContentLength), len(e.Body))
	}
	// Another record with the same body gets its own object: a consumer
	// that deletes one record's payload leaves the other's.
	if _, _, err := off.Entry(t.Context(), "orders.jsonl:8", e); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, c, bucket, "retry/"); len(got) != 2 {
		t.Errorf("after a second record with the same body: %v, want two keys", got)
	}
}

// putFault is what putFaults does with one PutObject request.
type putFault int

const (
	pass       putFault = iota
	lostAnswer          // forwarded, takes effect; the answer is lost (reset)
	conflict            // 409 ConditionalRequestConflict, not forwarded
	denied              // 403 AccessDenied, not forwarded
)

// putFaults wraps the SDK's HTTP client and applies script, in order, to
// the PutObject requests that go through it; the rest pass. Other
// requests pass untouched.
type putFaults struct {
	inner  s3.HTTPClient
	mu     sync.Mutex
	script []putFault
	puts   int
}

func withPutFaults(f *putFaults) func(*s3.Options) {
	return func(o *s3.Options) {
		f.inner = o.HTTPClient
		if f.inner == nil {
			f.inner = awshttp.NewBuildableClient()
		}
		o.HTTPClient = f
	}
}

func s3Error(req *http.Request, status int, code string) *http.Response {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}
}

func (f *putFaults) Do(req *http.Request) (*http.Response, error) {
	q, _ := url.ParseQuery(req.URL.RawQuery)
	if req.Method != http.MethodPut || q.Get("x-id") != "PutObject" {
		return f.inner.Do(req)
	}
	f.mu.Lock()
	fault := pass
	if f.puts < len(f.script) {
		fault = f.script[f.puts]
	}
	f.puts++
	f.mu.Unlock()
	switch fault {
	case conflict:
		return s3Error(req, http.StatusConflict, "ConditionalRequestConflict"), nil
	case denied:
		return s3Error(req, http.StatusForbidden, "AccessDenied"), nil
	case lostAnswer:
		resp, err := f.inner.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return f.inner.Do(req)
}

// TestIntegrationPutFaults runs Entry through faults on PutObject in front
// of moto: a lost answer and a conflicting write are retried and end with
// one object written once; a refused write is an error the engine sends to
// the failure output (an S3 error, not an *InvalidEntryError), with no
// pointer.
func TestIntegrationPutFaults(t *testing.T) {
	body := strings.Repeat("f", 2048)
	for _, c := range []struct {
		name   string
		script []putFault
		code   string // the error's code; "" for success
		puts   int
	}{
		{name: "lost answer: the retry finds the object (412)", script: []putFault{lostAnswer}, puts: 2},
		{name: "conflicting write in progress: retried (409)", script: []putFault{conflict}, puts: 2},
		{name: "refused: AccessDenied", script: []putFault{denied}, code: "AccessDenied", puts: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			faults := &putFaults{script: c.script}
			s3c, bucket := versionedS3(t, withPutFaults(faults))
			off := offloader(t, s3c, bucket, "fault/")
			out, offloaded, err := off.Entry(t.Context(), "r", sqsbatch.Entry{ID: "e", Body: body})
			if faults.puts != c.puts {
				t.Errorf("%d PutObject requests, want %d", faults.puts, c.puts)
			}
			got := versions(t, s3c, bucket, "fault/")
			if c.code != "" {
				var api smithy.APIError
				if !errors.As(err, &api) || api.ErrorCode() != c.code {
					t.Fatalf("Entry = %v, %v; want an S3 error %s", offloaded, err, c.code)
				}
				if _, invalid := errors.AsType[*sqsextended.InvalidEntryError](err); invalid {
					t.Errorf("a refused write is reported as an invalid entry: %v", err)
				}
				if offloaded || out.Body != "" || out.Attributes != nil {
					t.Errorf("offloaded=%v entry %+v; want the zero entry", offloaded, out)
				}
				if len(got) != 0 {
					t.Errorf("objects written: %v", got)
				}
				return
			}
			if err != nil || !offloaded {
				t.Fatalf("Entry = %v, %v; want offloaded", offloaded, err)
			}
			if key := off.Key("r", body); len(got) != 1 || got[key] != 1 {
				t.Errorf("versions per key = %v, want {%s: 1}", got, key)
			}
			if payload, _, err := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{}).Resolve(t.Context(), message(out)); err != nil || payload != body {
				t.Errorf("Resolve = %d bytes, %v; want the body", len(payload), err)
			}
		})
	}
}

// TestIntegrationDeletedPayload resolves a message whose payload a consumer
// deleted after processing a copy of it: an error to act on by default,
// ErrSkip with IgnorePayloadNotFound; both say which payload.
func TestIntegrationDeletedPayload(t *testing.T) {
	c, bucket := motoS3(t)
	ctx := t.Context()
	off := offloader(t, c, bucket, "gone/")
	e, _, err := off.Entry(ctx, "orders.jsonl:9", sqsbatch.Entry{Body: strings.Repeat("g", 3000)})
	if err != nil {
		t.Fatal(err)
	}
	copies := []sqstypes.Message{message(e), message(e)} // SQS delivered it twice
	strict := sqsextended.NewResolver(c, sqsextended.ResolverOptions{})
	_, p, err := strict.Resolve(ctx, copies[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := strict.Delete(ctx, *p); err != nil {
		t.Fatal(err)
	}

	_, _, err = strict.Resolve(ctx, copies[1])
	nf, ok := errors.AsType[*sqsextended.PayloadNotFoundError](err)
	if !ok || nf.Pointer != *p {
		t.Fatalf("default: err = %v, want a *PayloadNotFoundError for %s", err, p)
	}
	if _, ok := errors.AsType[*s3types.NoSuchKey](err); !ok {
		t.Errorf("default: err = %v, want it to wrap *types.NoSuchKey", err)
	}
	if errors.Is(err, sqsextended.ErrSkip) {
		t.Errorf("default: err = %v is ErrSkip; the zero option must not skip", err)
	}

	lenient := sqsextended.NewResolver(c, sqsextended.ResolverOptions{IgnorePayloadNotFound: true})
	body, q, err := lenient.Resolve(ctx, copies[1])
	if !errors.Is(err, sqsextended.ErrSkip) || body != "" || q != nil {
		t.Fatalf("IgnorePayloadNotFound: Resolve = %q, %v, %v; want ErrSkip", body, q, err)
	}
	if nf, ok := errors.AsType[*sqsextended.PayloadNotFoundError](err); !ok || nf.Pointer != *p {
		t.Errorf("IgnorePayloadNotFound: err = %v, want it to carry the *PayloadNotFoundError", err)
	}
	if _, err := lenient.Fetch(ctx, *p); !errors.Is(err, sqsextended.ErrSkip) {
		t.Errorf("IgnorePayloadNotFound: Fetch err = %v, want ErrSkip", err)
	}
	// Only a missing payload is skipped: a missing bucket is not.
	_, err = lenient.Fetch(ctx, sqsextended.Pointer{Bucket: bucket + "-missing", Key: p.Key})
	if err == nil || errors.Is(err, sqsextended.ErrSkip) {
		t.Errorf("missing bucket: err = %v, want an error that is not ErrSkip", err)
	}
}

// TestOffloadChecksumMatchesKey checks, against gofakes3 (which verifies
// checksums, as S3 does), that a payload is stored with the SHA-256 its
// key names, so S3 refuses bytes that do not match the key and anyone can
// check an object against its key (HeadObject with ChecksumMode ENABLED).
func TestOffloadChecksumMatchesKey(t *testing.T) {
	c := localaws.FakeS3(t)
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	off := offloader(t, c, "lake", "sum/")
	body := strings.Repeat("ü", 1500)
	if _, _, err := off.Entry(t.Context(), "r", sqsbatch.Entry{Body: body}); err != nil {
		t.Fatal(err)
	}
	key := off.Key("r", body)
	head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hex.DecodeString(key[strings.LastIndex(key, "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := aws.ToString(head.ChecksumSHA256), base64.StdEncoding.EncodeToString(sum); got != want {
		t.Errorf("stored SHA-256 %q, want the key's %q", got, want)
	}
}
