package sqsextended_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// motoS3 returns a client for moto_server's S3 (fauxqs refuses large S3
// bodies) and a bucket that is emptied and deleted when the test ends.
func motoS3(t *testing.T) (*s3.Client, string) {
	t.Helper()
	c := localaws.S3Client(localaws.Endpoint(t, localaws.EnvS3))
	bucket := fmt.Sprintf("sqsextended-%d", time.Now().UnixNano())
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range listKeys(t, c, bucket, "") {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	return c, bucket
}

func listKeys(t *testing.T, c *s3.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// utf8Body returns a body of exactly n bytes that starts with name, then
// repeats two- and three-byte characters (and, with astral, a four-byte
// one, which fauxqs refuses inline but S3 stores), and ends with ASCII
// padding.
func utf8Body(name string, n int, astral bool) string {
	var b strings.Builder
	b.WriteString(name + "|")
	chars := []string{"é", "€", "日"}
	if astral {
		chars = append(chars, "😀")
	}
	for i := 0; ; i++ {
		c := chars[i%len(chars)]
		if b.Len()+len(c) > n-4 {
			break
		}
		b.WriteString(c)
	}
	b.WriteString(strings.Repeat("x", n-b.Len()))
	return b.String()
}

func asciiBody(name string, n int) string {
	return name + "|" + strings.Repeat("x", n-len(name)-1)
}

type record struct {
	id      string
	body    string
	attrs   map[string]sqstypes.MessageAttributeValue
	offload bool
}

// records returns the cases for a queue whose limit is max: bodies at the
// limit minus one, at it and one byte over, with and without attributes,
// in ASCII and multi-byte UTF-8, and a 5 MiB record.
func records(max int) []record {
	attrs := func(id string) map[string]sqstypes.MessageAttributeValue {
		return map[string]sqstypes.MessageAttributeValue{"rid": strAttr(id), "source": strAttr("orders/ünï.jsonl")}
	}
	attrSize := func(id string) int {
		return len("rid") + len("String") + len(id) + len("source") + len("String") + len("orders/ünï.jsonl")
	}
	var out []record
	for _, d := range []int{-1, 0, 1} {
		id := fmt.Sprintf("ascii%+d", d)
		out = append(out, record{id: id, body: asciiBody(id, max+d), offload: d > 0})
		id = fmt.Sprintf("ascii-attrs%+d", d)
		out = append(out, record{id: id, body: asciiBody(id, max+d-attrSize(id)), attrs: attrs(id), offload: d > 0})
		id = fmt.Sprintf("utf8%+d", d)
		out = append(out, record{id: id, body: utf8Body(id, max+d, d > 0), offload: d > 0})
		id = fmt.Sprintf("utf8-attrs%+d", d)
		out = append(out, record{id: id, body: utf8Body(id, max+d-attrSize(id), d > 0), attrs: attrs(id), offload: d > 0})
	}
	out = append(out, record{id: "5MiB", body: utf8Body("5MiB", 5<<20, true), attrs: attrs("5MiB"), offload: true})
	return out
}

// TestIntegrationRoundTrip offloads records around the limit of a 256 KiB
// and a 1 MiB queue, standard and FIFO, sends them with sqsbatch to fauxqs,
// receives them and resolves each through moto's S3: every record is inline
// or a pointer as the rule says, and comes back byte for byte.
func TestIntegrationRoundTrip(t *testing.T) {
	s3c, bucket := motoS3(t)
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	for _, q := range []struct {
		name string
		max  int
		fifo bool
	}{
		{"256KiB", 262144, false},
		{"256KiB-fifo", 262144, true},
		{"1MiB", 1048576, false},
		{"1MiB-fifo", 1048576, true},
	} {
		t.Run(q.name, func(t *testing.T) {
			ctx := t.Context()
			suffix := ""
			if q.fifo {
				suffix = ".fifo"
			}
			url := localaws.CreateQueue(t, sqsc, suffix, map[string]string{"MaximumMessageSize": strconv.Itoa(q.max)})
			sender, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
			if err != nil {
				t.Fatalf("sqsbatch.New: %v", err)
			}
			if sender.MaxMessageSize() != q.max {
				t.Fatalf("queue limit read as %d, want %d", sender.MaxMessageSize(), q.max)
			}
			prefix := "it/" + q.name + "/"
			off, err := sqsextended.NewOffloader(s3c, sqsextended.OffloaderOptions{Bucket: bucket, Prefix: prefix, MaxMessageSize: sender.MaxMessageSize()})
			if err != nil {
				t.Fatal(err)
			}
			recs := records(q.max)
			byBody := map[string]record{}
			var entries []sqsbatch.Entry
			wantObjects := 0
			for _, r := range recs {
				if !utf8.ValidString(r.body) {
					t.Fatalf("%s: invalid UTF-8 in the test's body", r.id)
				}
				e := sqsbatch.Entry{ID: r.id, Body: r.body, Attributes: r.attrs}
				if q.fifo {
					e.GroupID, e.DeduplicationID = "g", r.id
				}
				out, offloaded, err := off.Entry(ctx, r.id, e)
				if err != nil {
					t.Fatalf("%s: Entry: %v", r.id, err)
				}
				if offloaded != r.offload {
					t.Fatalf("%s (%d bytes with attributes, limit %d): offloaded = %v, want %v", r.id, e.Size(), q.max, offloaded, r.offload)
				}
				if offloaded {
					wantObjects++
				}
				byBody[r.body] = r
				entries = append(entries, out)
			}
			res, err := sender.SendEntries(ctx, entries)
			if err != nil || res.Sent != len(entries) {
				for _, f := range res.Failures {
					t.Logf("failed %s: %s: %s", f.Entry.ID, f.Code, f.Message)
				}
				t.Fatalf("sent %d of %d: %v", res.Sent, len(entries), err)
			}
			if keys := listKeys(t, s3c, bucket, prefix); len(keys) != wantObjects {
				t.Errorf("%d objects under %s, want %d", len(keys), prefix, wantObjects)
			}

			msgs := localaws.Drain(t, sqsc, url, 2500*time.Millisecond)
			if len(msgs) != len(recs) {
				t.Fatalf("received %d messages, want %d", len(msgs), len(recs))
			}
			resolver := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{MaxPayloadBytes: 8 << 20})
			var order []string
			for _, m := range msgs {
				body, p, err := resolver.Resolve(ctx, m)
				if err != nil {
					t.Fatalf("Resolve: %v (body starts %.80q)", err, aws.ToString(m.Body))
				}
				r, ok := byBody[body]
				if !ok {
					t.Fatalf("resolved a body that matches no record byte for byte (%d bytes, starts %.40q)", len(body), body)
				}
				delete(byBody, body)
				order = append(order, r.id)
				if (p != nil) != r.offload {
					t.Errorf("%s arrived as pointer=%v, want %v", r.id, p != nil, r.offload)
				}
				if p != nil {
					if want := off.Pointer(r.id, r.body); *p != want {
						t.Errorf("%s: pointer %s, want %s", r.id, p, want)
					}
					if aws.ToString(m.Body) != p.Body() {
						t.Errorf("%s: body %q is not the Java client's bytes %q", r.id, aws.ToString(m.Body), p.Body())
					}
					size := m.MessageAttributes[sqsextended.SizeAttribute]
					if aws.ToString(size.DataType) != "Number" || aws.ToString(size.StringValue) != strconv.Itoa(len(r.body)) {
						t.Errorf("%s: %s = %s %s, want Number %d", r.id, sqsextended.SizeAttribute, aws.ToString(size.DataType), aws.ToString(size.StringValue), len(r.body))
					}
				}
				for k, v := range r.attrs {
					if got := aws.ToString(m.MessageAttributes[k].StringValue); got != aws.ToString(v.StringValue) {
						t.Errorf("%s: attribute %s = %q, want %q", r.id, k, got, aws.ToString(v.StringValue))
					}
				}
			}
			if q.fifo {
				for i, r := range recs {
					if order[i] != r.id {
						t.Fatalf("FIFO order: got %v", order)
					}
				}
			}
		})
	}
}

// failingPut wraps the real client and fails every PutObject.
type failingPut struct {
	sqsextended.OffloadAPI
	err error
}

func (f failingPut) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, f.err
}

// TestIntegrationFailedWrite checks that a failed PutObject gives an error
// and no pointer, both injected and from S3 itself (a missing bucket).
func TestIntegrationFailedWrite(t *testing.T) {
	s3c, bucket := motoS3(t)
	e := sqsbatch.Entry{ID: "r", Body: strings.Repeat("f", 2048)}

	injected := errors.New("injected: connection reset by peer")
	off, err := sqsextended.NewOffloader(failingPut{OffloadAPI: s3c, err: injected}, sqsextended.OffloaderOptions{Bucket: bucket, Prefix: "fail/", MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	out, offloaded, err := off.Entry(t.Context(), e.ID, e)
	if !errors.Is(err, injected) || offloaded || out.Body != "" {
		t.Errorf("injected failure: Entry = %+v, %v, %v; want the error and no pointer", out, offloaded, err)
	}
	if keys := listKeys(t, s3c, bucket, "fail/"); len(keys) != 0 {
		t.Errorf("objects written: %q", keys)
	}

	off, err = sqsextended.NewOffloader(s3c, sqsextended.OffloaderOptions{Bucket: bucket + "-missing", MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	out, offloaded, err = off.Entry(t.Context(), e.ID, e)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "NoSuchBucket" || offloaded || out.Body != "" {
		t.Errorf("missing bucket: Entry = %+v, %v, %v; want NoSuchBucket and no pointer", out, offloaded, err)
	}
}

// TestIntegrationLegacyFormats sends, through fauxqs, pointers as other and
// older clients wrote them, and resolves each against moto.
func TestIntegrationLegacyFormats(t *testing.T) {
	s3c, bucket := motoS3(t)
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	url := localaws.CreateQueue(t, sqsc, ".fifo", map[string]string{"ContentBasedDeduplication": "true"})
	ctx := t.Context()
	put := func(key, payload string) {
		t.Helper()
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(payload)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	num := func(n int) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(n))}
	}
	cases := []struct {
		name, key, attr, body string
	}{
		{"Java 2 default: SQSLargePayloadSize", "java2", sqsextended.LegacySizeAttribute, `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"%s","s3Key":"java2"}]`},
		{"Java 1.0: MessageS3Pointer", "java1", sqsextended.LegacySizeAttribute, `["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"%s","s3Key":"java1"}]`},
		{"Python json.dumps, escaped key", "py/Zürich €", sqsextended.SizeAttribute, `["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "%s", "s3Key": "py/Z\u00fcrich \u20ac"}]`},
		{"bare object", "bare", sqsextended.LegacySizeAttribute, `{"s3BucketName":"%s","s3Key":"bare"}`},
		{".NET Json.NET bare object", "dotnet", sqsextended.LegacySizeAttribute, `{"S3Key":"dotnet","S3BucketName":"%s"}`},
	}
	payloads := map[string]string{}
	var entries []sqsbatch.Entry
	for i, c := range cases {
		payload := fmt.Sprintf("payload of %s: %s", c.name, strings.Repeat("ü", 1000+i))
		put(c.key, payload)
		body := fmt.Sprintf(c.body, bucket)
		payloads[body] = payload
		entries = append(entries, sqsbatch.Entry{ID: c.name, Body: body, GroupID: "g",
			Attributes: map[string]sqstypes.MessageAttributeValue{c.attr: num(len(payload))}})
	}
	// An unmarked message whose body looks like a pointer (to an object
	// that exists) stays as it is.
	put("unmarked", "not to be read")
	plain := sqsextended.Pointer{Bucket: bucket, Key: "unmarked"}.Body()
	entries = append(entries, sqsbatch.Entry{ID: "unmarked", Body: plain, GroupID: "g"})
	payloads[plain] = plain

	sender, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: url}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sender.SendEntries(ctx, entries); err != nil || res.Sent != len(entries) {
		t.Fatalf("sent %d of %d: %v %+v", res.Sent, len(entries), err, res.Failures)
	}
	msgs := localaws.Drain(t, sqsc, url, 2500*time.Millisecond)
	if len(msgs) != len(entries) {
		t.Fatalf("received %d messages, want %d", len(msgs), len(entries))
	}
	r := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{})
	for i, m := range msgs {
		got, p, err := r.Resolve(ctx, m)
		if err != nil {
			t.Errorf("%s: Resolve: %v", entries[i].ID, err)
			continue
		}
		if want := payloads[aws.ToString(m.Body)]; got != want {
			t.Errorf("%s: resolved %.60q, want %.60q", entries[i].ID, got, want)
		}
		if (p == nil) != (entries[i].ID == "unmarked") {
			t.Errorf("%s: pointer %v", entries[i].ID, p)
		}
	}
}

// TestIntegrationCapAndDelete checks the size cap on a real object, that
// Delete removes the payload, and that a missing payload is a NoSuchKey.
func TestIntegrationCapAndDelete(t *testing.T) {
	s3c, bucket := motoS3(t)
	ctx := t.Context()
	off, err := sqsextended.NewOffloader(s3c, sqsextended.OffloaderOptions{Bucket: bucket, Mode: sqsextended.ModeAlways, MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300_000
	e, _, err := off.Entry(ctx, "big", sqsbatch.Entry{Body: strings.Repeat("c", n)})
	if err != nil {
		t.Fatal(err)
	}
	msg := sqstypes.Message{Body: aws.String(e.Body), MessageAttributes: e.Attributes}

	small := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{MaxPayloadBytes: n - 1})
	_, _, err = small.Resolve(ctx, msg)
	var tl *sqsextended.TooLargeError
	if !errors.As(err, &tl) || tl.Size != n || tl.Limit != n-1 {
		t.Fatalf("cap n-1: err = %v, want a *TooLargeError of %d bytes", err, n)
	}

	exact := sqsextended.NewResolver(s3c, sqsextended.ResolverOptions{MaxPayloadBytes: n})
	body, p, err := exact.Resolve(ctx, msg)
	if err != nil || len(body) != n || p == nil {
		t.Fatalf("cap n: Resolve = %d bytes, %v, %v", len(body), p, err)
	}
	if err := exact.Delete(ctx, *p); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if keys := listKeys(t, s3c, bucket, ""); len(keys) != 0 {
		t.Errorf("objects left after Delete: %q", keys)
	}
	_, _, err = exact.Resolve(ctx, msg)
	var nsk *s3types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Errorf("after Delete: err = %v, want it to wrap *types.NoSuchKey", err)
	}
	if err := exact.Delete(ctx, *p); err != nil {
		t.Errorf("deleting a deleted payload: %v", err)
	}
}
