package simulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// errCode is what the engine reads of an error: its AWS code.
func errCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return "error: " + err.Error()
}

// sqsAnswer is what matters of a SendMessageBatch answer: per entry,
// accepted with the right MD5 or refused with a code and sender fault; or
// the request's error code.
func sqsAnswer(out *sqs.SendMessageBatchOutput, err error, bodies map[string]string) string {
	if err != nil {
		return "request error " + errCode(err)
	}
	var parts []string
	for _, s := range out.Successful {
		ok := aws.ToString(s.MD5OfMessageBody) == md5Hex(bodies[aws.ToString(s.Id)])
		parts = append(parts, fmt.Sprintf("%s accepted md5-ok=%v", aws.ToString(s.Id), ok))
	}
	for _, f := range out.Failed {
		parts = append(parts, fmt.Sprintf("%s failed %s sender=%v", aws.ToString(f.Id), aws.ToString(f.Code), f.SenderFault))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// TestConformanceSQS holds the SQS model to fauxqs on the calls the
// engine makes: queue attributes and URLs, SendMessageBatch's checks of
// requests and entries, MD5s, and FIFO deduplication.
func TestConformanceSQS(t *testing.T) {
	real := sqs.NewFromConfig(localaws.SQS(t))
	ctx := t.Context()
	model := NewSQSModel(time.Now())
	type pair struct{ real, model string }
	std := pair{localaws.CreateQueue(t, real, "-std", map[string]string{"MaximumMessageSize": "2048"}), model.CreateQueue("std", 2048, false)}
	fifo := pair{localaws.CreateQueue(t, real, "-q.fifo", map[string]string{"MaximumMessageSize": "2048"}), model.CreateQueue("q.fifo", 2048, false)}

	attrNames := []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize, types.QueueAttributeNameFifoQueue, types.QueueAttributeNameContentBasedDeduplication}
	for _, q := range []pair{std, fifo} {
		ra, err := real.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.real), AttributeNames: attrNames})
		if err != nil {
			t.Fatal(err)
		}
		ma, err := model.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.model), AttributeNames: attrNames})
		if err != nil {
			t.Fatal(err)
		}
		// A standard queue may or may not report FifoQueue=false; the
		// engine reads a missing one as false.
		if ra.Attributes["FifoQueue"] == "false" {
			delete(ra.Attributes, "FifoQueue")
			delete(ra.Attributes, "ContentBasedDeduplication")
		}
		if fmt.Sprint(ra.Attributes) != fmt.Sprint(ma.Attributes) {
			t.Errorf("GetQueueAttributes: stand-in %v, model %v", ra.Attributes, ma.Attributes)
		}
	}
	_, rerr := real.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("no-such-queue-sim")})
	_, merr := model.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("no-such-queue-sim")})
	if rerr == nil || merr == nil {
		t.Errorf("GetQueueUrl of a missing queue: stand-in %v, model %v; want errors", rerr, merr)
	}

	entry := func(id, body, group, dedup string) types.SendMessageBatchRequestEntry {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("v")}}}
		if group != "" {
			e.MessageGroupId = aws.String(group)
		}
		if dedup != "" {
			e.MessageDeduplicationId = aws.String(dedup)
		}
		return e
	}
	many := func(n int) []types.SendMessageBatchRequestEntry {
		var es []types.SendMessageBatchRequestEntry
		for i := range n {
			es = append(es, entry(fmt.Sprint("e", i), fmt.Sprint("body ", i), "", ""))
		}
		return es
	}
	cases := []struct {
		name    string
		fifo    bool
		entries []types.SendMessageBatchRequestEntry
		// compare says how to compare: "answer" the whole answer;
		// "refused" only that the request or the entry was refused.
		compare string
	}{
		{"ten entries", false, many(10), "answer"},
		{"eleven entries", false, many(11), "refused"},
		{"ids repeated", false, []types.SendMessageBatchRequestEntry{entry("x", "a", "", ""), entry("x", "b", "", "")}, "refused"},
		{"multi-byte and astral characters", false, []types.SendMessageBatchRequestEntry{entry("m", "é 中文 Ω", "", "")}, "answer"},
		{"at the size limit", false, []types.SendMessageBatchRequestEntry{entry("big", strings.Repeat("x", 2048-len("a")-len("String")-len("v")), "", "")}, "answer"},
		{"over the size limit", false, []types.SendMessageBatchRequestEntry{entry("ok", "fine", "", ""), entry("over", strings.Repeat("x", 2049), "", "")}, "refused"},
		{"control character", false, []types.SendMessageBatchRequestEntry{entry("ok", "fine", "", ""), entry("bell", "a\x07b", "", "")}, "refused"},
		{"fifo first", true, []types.SendMessageBatchRequestEntry{entry("f1", "one", "g", "d1"), entry("f2", "two", "g", "d2")}, "answer"},
		{"fifo duplicate ids within 5 minutes", true, []types.SendMessageBatchRequestEntry{entry("f3", "one again, other bytes", "g", "d1"), entry("f4", "three", "g", "d3")}, "answer"},
		{"fifo without group", true, []types.SendMessageBatchRequestEntry{entry("f5", "no group", "", "d5")}, "refused"},
		{"fifo without deduplication id", true, []types.SendMessageBatchRequestEntry{entry("f6", "no dedup", "g", "")}, "refused"},
	}
	for _, c := range cases {
		q := std
		if c.fifo {
			q = fifo
		}
		bodies := map[string]string{}
		for _, e := range c.entries {
			bodies[aws.ToString(e.Id)] = aws.ToString(e.MessageBody)
		}
		ro, rerr := real.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.real), Entries: c.entries})
		mo, merr := model.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.model), Entries: c.entries})
		ra, ma := sqsAnswer(ro, rerr, bodies), sqsAnswer(mo, merr, bodies)
		switch c.compare {
		case "answer":
			if ra != ma {
				t.Errorf("%s: stand-in answered %q, model %q", c.name, ra, ma)
			}
		case "refused":
			// Whether SQS refuses the request or the entry differs
			// between stand-ins and AWS; the engine checks these
			// entries before sending. What must agree is that the
			// bad entry is not taken.
			if !refused(ra) || !refused(ma) {
				t.Errorf("%s: want the entry refused: stand-in %q, model %q", c.name, ra, ma)
			}
		}
	}
	// What each queue holds: the FIFO queue dropped the duplicate.
	for _, q := range []pair{std, fifo} {
		got := localaws.Drain(t, real, q.real, 3*time.Second)
		var rb []string
		for _, m := range got {
			rb = append(rb, aws.ToString(m.Body))
		}
		var mb []string
		for _, m := range model.Messages(q.model) {
			mb = append(mb, m.Body)
		}
		slices.Sort(rb)
		slices.Sort(mb)
		if !slices.Equal(rb, mb) {
			t.Errorf("queue %s holds %q on the stand-in, %q in the model", q.model, rb, mb)
		}
	}
}

func refused(answer string) bool {
	return strings.HasPrefix(answer, "request error") || strings.Contains(answer, " failed ")
}

// TestConformanceS3 holds the S3 model to moto_server on the calls the
// engine makes: versioned and plain PutObject, conditional PutObject,
// HeadObject, ranged, version-pinned and If-Match GETs, ListObjectsV2 with
// StartAfter and pagination, DeleteObject, and their error codes.
func TestConformanceS3(t *testing.T) {
	real := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	ctx := t.Context()
	model := NewS3Model()
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	plain, versioned := "simconf-plain-"+suffix, "simconf-ver-"+suffix
	for _, b := range []string{plain, versioned} {
		if _, err := real.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := real.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(versioned),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	model.CreateBucket(plain, false)
	model.CreateBucket(versioned, true)

	// Version ids differ between the two: the model's are mapped to the
	// stand-in's by the order they were made in.
	type versions struct{ real, model []string }
	vs := map[string]*versions{}
	put := func(bucket, key, body, encoding, ifNoneMatch string) string {
		in := func() *s3.PutObjectInput {
			p := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
			if encoding != "" {
				p.ContentEncoding = aws.String(encoding)
			}
			if ifNoneMatch != "" {
				p.IfNoneMatch = aws.String(ifNoneMatch)
			}
			return p
		}
		ro, rerr := real.PutObject(ctx, in())
		mo, merr := model.PutObject(ctx, in())
		ans := func(o *s3.PutObjectOutput, err error) string {
			if err != nil {
				return "error " + errCode(err)
			}
			return fmt.Sprintf("etag %s versioned %v", aws.ToString(o.ETag), aws.ToString(o.VersionId) != "")
		}
		ra, ma := ans(ro, rerr), ans(mo, merr)
		if ra != ma {
			t.Errorf("PutObject %s/%s (If-None-Match %q): stand-in %q, model %q", bucket, key, ifNoneMatch, ra, ma)
		}
		if rerr == nil && merr == nil && aws.ToString(ro.VersionId) != "" {
			k := bucket + "/" + key
			if vs[k] == nil {
				vs[k] = &versions{}
			}
			vs[k].real = append(vs[k].real, aws.ToString(ro.VersionId))
			vs[k].model = append(vs[k].model, aws.ToString(mo.VersionId))
		}
		return ra
	}
	put(plain, "a/one.jsonl", "one\ntwo\nthree\n", "", "")
	put(plain, "a/two.jsonl.gz", "\x1f\x8bnot really gzip", "gzip", "")
	put(plain, "a/three.txt", "3", "", "")
	put(plain, "b/four.txt", "4", "", "")
	put(plain, "a/one.jsonl", "other bytes", "", "*")
	put(plain, "a/new.txt", "new", "", "*")
	put(versioned, "k.jsonl", "first version\n", "", "")
	put(versioned, "k.jsonl", "second version, longer\n", "", "")

	type getCase struct {
		name                      string
		bucket, key, rng, ifMatch string
		version                   int // 1-based index into the key's versions; 0 none
	}
	etagOf := func(body string) string { return `"` + md5Hex(body) + `"` }
	gets := []getCase{
		{name: "whole", bucket: plain, key: "a/one.jsonl"},
		{name: "range", bucket: plain, key: "a/one.jsonl", rng: "bytes=2-6"},
		{name: "open range", bucket: plain, key: "a/one.jsonl", rng: "bytes=4-"},
		{name: "range past the end", bucket: plain, key: "a/one.jsonl", rng: "bytes=100-"},
		{name: "range over the end", bucket: plain, key: "a/one.jsonl", rng: "bytes=10-99"},
		{name: "if-match", bucket: plain, key: "a/one.jsonl", ifMatch: etagOf("one\ntwo\nthree\n")},
		{name: "if-match changed", bucket: plain, key: "a/one.jsonl", ifMatch: etagOf("something else")},
		{name: "content-encoding", bucket: plain, key: "a/two.jsonl.gz"},
		{name: "missing key", bucket: plain, key: "a/nothing"},
		{name: "first version", bucket: versioned, key: "k.jsonl", version: 1},
		{name: "first version, ranged", bucket: versioned, key: "k.jsonl", version: 1, rng: "bytes=6-"},
		{name: "latest version", bucket: versioned, key: "k.jsonl"},
	}
	get := func(c getCase) {
		in := func(side int) *s3.GetObjectInput {
			g := &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.key)}
			if c.rng != "" {
				g.Range = aws.String(c.rng)
			}
			if c.ifMatch != "" {
				g.IfMatch = aws.String(c.ifMatch)
			}
			if c.version > 0 {
				v := vs[c.bucket+"/"+c.key]
				g.VersionId = aws.String([][]string{v.real, v.model}[side][c.version-1])
			}
			return g
		}
		ans := func(o *s3.GetObjectOutput, err error) string {
			if err != nil {
				return "error " + errCode(err)
			}
			b, _ := io.ReadAll(o.Body)
			return fmt.Sprintf("body %q length %d range %q etag %s encoding %q", b, aws.ToInt64(o.ContentLength),
				aws.ToString(o.ContentRange), aws.ToString(o.ETag), aws.ToString(o.ContentEncoding))
		}
		ra, ma := ans(real.GetObject(ctx, in(0))), ans(model.GetObject(ctx, in(1)))
		if ra != ma {
			t.Errorf("GetObject %s: stand-in %s, model %s", c.name, ra, ma)
		}
		head := func(side int) *s3.HeadObjectInput {
			g := in(side)
			return &s3.HeadObjectInput{Bucket: g.Bucket, Key: g.Key, VersionId: g.VersionId, IfMatch: g.IfMatch}
		}
		hans := func(o *s3.HeadObjectOutput, err error) string {
			if err != nil {
				return "error " + errCode(err)
			}
			return fmt.Sprintf("length %d etag %s versioned %v encoding %q", aws.ToInt64(o.ContentLength), aws.ToString(o.ETag),
				aws.ToString(o.VersionId) != "", aws.ToString(o.ContentEncoding))
		}
		if c.rng == "" {
			rh, mh := hans(real.HeadObject(ctx, head(0))), hans(model.HeadObject(ctx, head(1)))
			if rh != mh {
				t.Errorf("HeadObject %s: stand-in %s, model %s", c.name, rh, mh)
			}
		}
	}
	for _, c := range gets {
		get(c)
	}

	list := func(in s3.ListObjectsV2Input) {
		pages := func(c interface {
			ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
		}) string {
			var buf bytes.Buffer
			p := s3.NewListObjectsV2Paginator(c, &in)
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					return "error " + errCode(err)
				}
				buf.WriteString("page:")
				for _, o := range out.Contents {
					fmt.Fprintf(&buf, " %s(%d,%s)", aws.ToString(o.Key), aws.ToInt64(o.Size), aws.ToString(o.ETag))
				}
				buf.WriteString("\n")
			}
			return buf.String()
		}
		if r, m := pages(real), pages(model); r != m {
			t.Errorf("ListObjectsV2 prefix %q start-after %q max-keys %d: stand-in\n%s model\n%s", aws.ToString(in.Prefix), aws.ToString(in.StartAfter), aws.ToInt32(in.MaxKeys), r, m)
		}
	}
	list(s3.ListObjectsV2Input{Bucket: aws.String(plain)})
	list(s3.ListObjectsV2Input{Bucket: aws.String(plain), Prefix: aws.String("a/"), MaxKeys: aws.Int32(2)})
	list(s3.ListObjectsV2Input{Bucket: aws.String(plain), Prefix: aws.String("a/"), StartAfter: aws.String("a/one.jsonl")})

	// A deleted object: gone from GETs and listings, its versions kept.
	for _, c := range []interface {
		DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	}{real, model} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versioned), Key: aws.String("k.jsonl")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(plain), Key: aws.String("b/four.txt")}); err != nil {
			t.Fatal(err)
		}
	}
	get(getCase{name: "deleted, latest", bucket: versioned, key: "k.jsonl"})
	get(getCase{name: "deleted, first version", bucket: versioned, key: "k.jsonl", version: 1})
	get(getCase{name: "deleted, plain", bucket: plain, key: "b/four.txt"})
	list(s3.ListObjectsV2Input{Bucket: aws.String(versioned)})
	list(s3.ListObjectsV2Input{Bucket: aws.String(plain)})

	// Versions and delete markers, by key and newest first, page by page:
	// version ids differ, so each is written as its place in its key.
	listVersions := func(in s3.ListObjectVersionsInput) {
		pages := func(c interface {
			ListObjectVersions(context.Context, *s3.ListObjectVersionsInput, ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
		}) string {
			var buf bytes.Buffer
			in := in
			for {
				out, err := c.ListObjectVersions(ctx, &in)
				if err != nil {
					return "error " + errCode(err)
				}
				buf.WriteString("page:")
				for _, v := range out.Versions {
					fmt.Fprintf(&buf, " %s(%d,%s,latest=%v,null=%v)", aws.ToString(v.Key), aws.ToInt64(v.Size), aws.ToString(v.ETag), aws.ToBool(v.IsLatest), aws.ToString(v.VersionId) == "null")
				}
				for _, d := range out.DeleteMarkers {
					fmt.Fprintf(&buf, " marker %s(latest=%v)", aws.ToString(d.Key), aws.ToBool(d.IsLatest))
				}
				buf.WriteString("\n")
				if !aws.ToBool(out.IsTruncated) {
					return buf.String()
				}
				in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
			}
		}
		if r, m := pages(real), pages(model); r != m {
			t.Errorf("ListObjectVersions prefix %q max-keys %d: stand-in\n%s model\n%s", aws.ToString(in.Prefix), aws.ToInt32(in.MaxKeys), r, m)
		}
	}
	listVersions(s3.ListObjectVersionsInput{Bucket: aws.String(versioned)})
	listVersions(s3.ListObjectVersionsInput{Bucket: aws.String(versioned), MaxKeys: aws.Int32(1)})
	listVersions(s3.ListObjectVersionsInput{Bucket: aws.String(plain), Prefix: aws.String("a/")})
	put(plain, "b/four.txt", "back", "", "*")
}
