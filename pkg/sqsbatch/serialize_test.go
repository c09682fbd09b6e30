package sqsbatch

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
)

// capture is an HTTP client that keeps the last request and its body and
// answers every SendMessageBatch with answer.
type capture struct {
	req    *http.Request
	body   []byte
	answer func(body []byte) string
}

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	c.req, c.body = r, b
	answer := `{"Successful":[],"Failed":[]}`
	if c.answer != nil {
		answer = c.answer(b)
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(answer)), ContentLength: int64(len(answer)), Request: r}, nil
}

func captureClient(c *capture) *sqs.Client {
	return sqs.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:1"), HTTPClient: c, RetryMaxAttempts: 1,
	})
}

// awkward are strings that take every path of the escaper: escapes of each
// kind, multi-byte characters, invalid UTF-8, U+2028, and long ones that
// are escaped as they are read.
var awkward = []string{
	"", "plain", `{"a":"b\\c"}`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "é ünï 😀 中文", "bad \xff\xfe utf-8 \xe2\x82",
	"line\u2028para\u2029", strings.Repeat(`{"id":1,"text":"q\"uote"}`+"\n", 400), strings.Repeat("é😀\x01\xff\u2028", 2000),
	strings.Repeat("p", streamMin-1), strings.Repeat("p", streamMin),
}

func awkwardInput() *sqs.SendMessageBatchInput {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://127.0.0.1:1/000000000000/q")}
	for i, s := range awkward {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(batchIDs[i%MaxBatchEntries]), MessageBody: aws.String(s)}
		switch i % 4 {
		case 0:
			e.MessageAttributes = map[string]types.MessageAttributeValue{
				"s3sqs-record-id": {DataType: aws.String("String"), StringValue: aws.String(s + "id")},
				"count":           {DataType: aws.String("Number"), StringValue: aws.String("42")},
				"bin":             {DataType: aws.String("Binary"), BinaryValue: []byte(s + "\x00\xff")},
			}
		case 1:
			e.MessageGroupId, e.MessageDeduplicationId = aws.String("group-"+s[:min(len(s), 8)]), aws.String("dedup")
		case 2:
			e.DelaySeconds = int32(i * 10)
		case 3:
			e.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		in.Entries = append(in.Entries, e)
	}
	return in
}

// TestBatchBodyAsSDK checks that a request written by batchBody says what
// the SDK's own encoder says, with the same headers.
func TestBatchBodyAsSDK(t *testing.T) {
	in := awkwardInput()
	var sdk, exact capture
	if _, err := captureClient(&sdk).SendMessageBatch(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if _, err := captureClient(&exact).SendMessageBatch(context.Background(), in, exactBodies); err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(sdk.body, &want); err != nil {
		t.Fatalf("the SDK's body: %v", err)
	}
	if err := json.Unmarshal(exact.body, &got); err != nil {
		t.Fatalf("batchBody is not JSON: %v\n%.300s", err, exact.body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batchBody says\n%.2000s\nthe SDK says\n%.2000s", exact.body, sdk.body)
	}
	if len(exact.body) > len(sdk.body) {
		t.Errorf("batchBody is %d bytes, the SDK's %d", len(exact.body), len(sdk.body))
	}
	if exact.req.ContentLength != int64(len(exact.body)) {
		t.Errorf("Content-Length %d, body %d bytes", exact.req.ContentLength, len(exact.body))
	}
	for _, h := range []string{"X-Amz-Target", "Content-Type", "X-Amzn-Query-Mode"} {
		if got, want := exact.req.Header.Get(h), sdk.req.Header.Get(h); got != want {
			t.Errorf("header %s = %q, the SDK sets %q", h, got, want)
		}
	}
}

// TestBatchBodyReads checks that the body reads the same whatever the size
// of the reads, after a rewind and after seeks, and that Len and Seek say
// what the SDK asks of them.
func TestBatchBodyReads(t *testing.T) {
	b := newBatchBody(awkwardInput())
	whole, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(whole)) != b.size {
		t.Fatalf("read %d bytes; the body says it has %d", len(whole), b.size)
	}
	if !json.Valid(whole) {
		t.Fatalf("not JSON: %.300s", whole)
	}
	if b.Len() != 0 {
		t.Errorf("Len %d after the end", b.Len())
	}
	for _, size := range []int{1, 2, 3, 5, 7, 64, 4099} {
		if _, err := b.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if b.Len() != len(whole) {
			t.Errorf("Len %d after a rewind, want %d", b.Len(), len(whole))
		}
		var out bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := b.Read(buf)
			out.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out.Bytes(), whole) {
			t.Errorf("reads of %d bytes give another body", size)
		}
	}
	b.Seek(0, io.SeekStart)
	if err := iotest.TestReader(b, whole); err != nil {
		t.Error(err)
	}
	b.Seek(0, io.SeekStart)
	io.CopyN(io.Discard, b, 100)
	if pos, err := b.Seek(0, io.SeekCurrent); pos != 100 || err != nil {
		t.Errorf("Seek(0, current) = %d, %v; want 100", pos, err)
	}
	if end, err := b.Seek(0, io.SeekEnd); end != int64(len(whole)) || err != nil {
		t.Errorf("Seek(0, end) = %d, %v; want %d", end, err, len(whole))
	}
	if _, err := b.Seek(-1, io.SeekStart); err == nil {
		t.Error("Seek before the start: no error")
	}
}

// FuzzJSONString checks the escaper against encoding/json: every string
// comes back from the JSON written for it, with each invalid byte as
// U+FFFD, and the length it predicts is the length written.
func FuzzJSONString(f *testing.F) {
	for _, s := range awkward {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := appendJSONString(nil, s)
		if len(lit) != jsonStringLen(s) {
			t.Fatalf("jsonStringLen %d, wrote %d", jsonStringLen(s), len(lit))
		}
		b := newBatchBody(&sqs.SendMessageBatchInput{QueueUrl: aws.String(s + strings.Repeat(" ", streamMin))})
		streamed, err := io.ReadAll(iotest.HalfReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range [][]byte{lit, streamed[len(`{"QueueUrl":`) : len(streamed)-1]} {
			var back string
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if want := validUTF8(s); back != want && back != want+strings.Repeat(" ", streamMin) {
				t.Fatalf("%q came back as %q", s, back)
			}
		}
	})
}

// validUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as the
// SDK does.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

// TestBodyChecksums checks that an entry whose MD5 SQS reports otherwise
// moves from the answer's Successful to its Failed entries, retryable with
// CodeMD5Mismatch, and that the call and the other entries stay as SQS
// answered them.
func TestBodyChecksums(t *testing.T) {
	long := strings.Repeat("body ", 5000)
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String("q"), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String(long)},
		{Id: aws.String("1"), MessageBody: aws.String("short")},
		{Id: aws.String("2"), MessageBody: aws.String("refused")},
	}}
	c := &capture{answer: func([]byte) string {
		return `{"Successful":[` +
			`{"Id":"0","MessageId":"m0","MD5OfMessageBody":"` + md5Of("other") + `"},` +
			`{"Id":"1","MessageId":"m1","MD5OfMessageBody":"` + md5Of("short") + `"}],` +
			`"Failed":[{"Id":"2","Code":"InvalidParameterValue","SenderFault":true}]}`
	}}
	out, err := captureClient(c).SendMessageBatch(context.Background(), in, exactBodies)
	if err != nil {
		t.Fatalf("call failed: %v; want the mismatch kept to its entry", err)
	}
	var ok []string
	for _, e := range out.Successful {
		ok = append(ok, aws.ToString(e.Id))
	}
	if !reflect.DeepEqual(ok, []string{"1"}) {
		t.Errorf("successful %v, want [1]", ok)
	}
	failed := map[string]types.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	if f := failed["0"]; aws.ToString(f.Code) != CodeMD5Mismatch || f.SenderFault || !strings.Contains(aws.ToString(f.Message), md5Of(long)) {
		t.Errorf("entry 0 failed as %+v, want %s, not the sender's fault, naming the body's MD5", f, CodeMD5Mismatch)
	}
	if f := failed["2"]; aws.ToString(f.Code) != "InvalidParameterValue" || len(failed) != 2 {
		t.Errorf("failed %v, want entry 2 kept as SQS answered it", failed)
	}
	var m md5Sum
	m.h = md5.New()
	if string(m.hex(strings.Repeat("x", 20000))) != md5Of(strings.Repeat("x", 20000)) || string(m.hex("y")) != md5Of("y") {
		t.Error("md5Sum.hex differs from md5.Sum")
	}
}

func md5Of(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// randString is n bytes or more of pieces that JSON escapes or that
// are not valid UTF-8.
func randString(r *rand.Rand, n int) string {
	alpha := []string{"a", "\"", "\\", "\n", "\x00", "\x7f", "\xff", "\xe2\x82", "é", "😀", "\u2028", "\u2029", "<", ">", "&", "\ufffd", "/"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(alpha[r.IntN(len(alpha))])
	}
	return b.String()
}

// TestBatchBodyBytesAsSDK compares, byte for byte, the bodies batchBody
// writes with the SDK's own, for random batches of characters JSON escapes
// (quotes, backslashes, controls, DEL, invalid and cut UTF-8, U+2028/2029,
// <>&), bodies below and above streamMin, read in pieces of 1, 3, 4096 and
// 1 MiB bytes; attribute maps of one key so that map order cannot differ.
func TestBatchBodyBytesAsSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(randString(r, r.IntN(50)))}
		for i := 0; i < 1+r.IntN(10); i++ {
			e := types.SendMessageBatchRequestEntry{Id: aws.String(batchIDs[i]), MessageBody: aws.String(randString(r, r.IntN(3*streamMin)))}
			if r.IntN(2) == 0 {
				e.MessageAttributes = map[string]types.MessageAttributeValue{randString(r, 5): {DataType: aws.String("String"), StringValue: aws.String(randString(r, r.IntN(2*streamMin)))}}
			}
			if r.IntN(3) == 0 {
				e.MessageAttributes = map[string]types.MessageAttributeValue{"b": {DataType: aws.String("Binary"), BinaryValue: []byte{}}}
			}
			if r.IntN(2) == 0 {
				e.MessageGroupId, e.MessageDeduplicationId = aws.String(randString(r, 5)), aws.String(randString(r, 5))
			}
			e.DelaySeconds = int32(r.IntN(3) - 1)
			in.Entries = append(in.Entries, e)
		}
		var sdk capture
		if _, err := captureClient(&sdk).SendMessageBatch(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		b := newBatchBody(in)
		for _, sz := range []int{1, 3, 4096, 1 << 20} {
			b.Seek(0, io.SeekStart)
			var out bytes.Buffer
			buf := make([]byte, sz)
			for {
				n, err := b.Read(buf)
				out.Write(buf[:n])
				if err == io.EOF {
					break
				}
			}
			if !bytes.Equal(out.Bytes(), sdk.body) {
				t.Fatalf("iter %d size %d: differs\n%q\n%q", iter, sz, out.Bytes()[:min(300, out.Len())], sdk.body[:min(300, len(sdk.body))])
			}
			if int64(out.Len()) != b.size {
				t.Fatalf("size %d vs %d", out.Len(), b.size)
			}
		}
	}
}

// TestBatchBodyRetries sends a batch that fails twice with a 500 over a
// real HTTP transport: every attempt sends the same body, with its
// Content-Length, and SigV4's payload hash is that of the bytes sent.
func TestBatchBodyRetries(t *testing.T) {
	var attempts atomic.Int32
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read: %v", err)
		}
		if int64(len(b)) != r.ContentLength {
			t.Errorf("CL %d body %d", r.ContentLength, len(b))
		}
		bodies = append(bodies, b)
		n := attempts.Add(1)
		if n < 3 {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(500)
			w.Write([]byte(`{"__type":"InternalError","message":"x"}`))
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{"Successful":[],"Failed":[]}`))
	}))
	defer srv.Close()
	var hashes []string
	c := sqs.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 3})
	in := awkwardInput()
	_, err := c.SendMessageBatch(context.Background(), in, exactBodies, func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("grabhash", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				hashes = append(hashes, v4.GetPayloadHash(ctx))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d attempts", len(bodies))
	}
	for i := range bodies {
		if !bytes.Equal(bodies[i], bodies[0]) {
			t.Errorf("attempt %d body differs", i)
		}
		s := sha256.Sum256(bodies[i])
		if i < len(hashes) && hashes[i] != hex.EncodeToString(s[:]) {
			t.Errorf("attempt %d hash %s want %x", i, hashes[i], s)
		}
	}
	if len(hashes) != 3 {
		t.Errorf("%d payload hashes, want one per attempt", len(hashes))
	}
}

// TestOtherProtocolKeepsSDK checks that exactBodies leaves a protocol
// other than JSON 1.0 to the SDK: the body is the query protocol's form.
func TestOtherProtocolKeepsSDK(t *testing.T) {
	var c capture
	// The answer is JSON, which the query protocol does not read: only
	// the request matters here.
	captureClient(&c).SendMessageBatch(context.Background(), awkwardInput(),
		func(o *sqs.Options) { o.Protocol = awsquery.New(schemas.AmazonSQS) }, exactBodies)
	if c.req == nil {
		t.Fatal("no request sent")
	}
	if ct := c.req.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") || bytes.HasPrefix(c.body, []byte("{")) {
		t.Errorf("Content-Type %q, body %.60q: want the query protocol's own request", ct, c.body)
	}
}

// TestRequestShapesKnown pins the fields of the SDK's request types that
// batchBody writes: an SDK that adds one fails here, until batchBody writes
// it or plainEntries sends such entries through the SDK.
func TestRequestShapesKnown(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{sqs.SendMessageBatchInput{}, "Entries QueueUrl"},
		{types.SendMessageBatchRequestEntry{}, "Id MessageBody DelaySeconds MessageAttributes MessageDeduplicationId MessageGroupId MessageSystemAttributes"},
		{types.MessageAttributeValue{}, "DataType BinaryListValues BinaryValue StringListValues StringValue"},
	} {
		typ := reflect.TypeOf(tc.v)
		var got []string
		for f := range typ.Fields() {
			if f.IsExported() {
				got = append(got, f.Name)
			}
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s has fields %q, batchBody knows %q", typ, g, tc.want)
		}
	}
}
