package sqsbatch

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/valyala/fastjson"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// direct makes a Sender's SendMessageBatch requests with the parts of the
// *sqs.Client it was given: its endpoint resolver (once, in New), its
// credentials, its SigV4 signer and its HTTP client. What it leaves out is
// the client's middleware stack, which the client builds anew for every
// call: about 90 allocations before a request is even written, and with
// the signing, sending and answer parsing 420 allocations and about four
// times the CPU of the same request made here (measured on this project's
// machine, fauxqs on loopback). It writes the body the SDK would write
// (batchBody), signs the headers the SDK would sign, and answers as the
// client would: the same output for a 2xx answer, and for any other the
// error the client's own protocol makes of it, wrapped as the client wraps
// it, so that codes, status and retry classes are the client's. A client
// with anything a caller added that sees each request (API options such as
// tracing middleware, interceptors, request logging, a legacy endpoint
// resolver) or anonymous credentials is not made direct: its requests go
// through the client.
//
// Unlike the client, direct does not retry a request underneath: the
// Sender's own attempts (Options.MaxAttempts) are the only ones, so that
// its controller sees every throttle.
type direct struct {
	url       string
	headers   http.Header // the endpoint's own, if any
	region    string
	creds     aws.CredentialsProvider
	signer    sqs.HTTPSignerV4
	sig       *sigV4 // when signer is the SDK's own and the endpoint plain, in its place
	http      sqs.HTTPClient
	protocol  smithyhttp.ClientProtocol
	userAgent []string
	// checkMD5 is the client's !DisableMessageChecksumValidation.
	checkMD5 bool
	// skew is how far the service's clock is ahead of this one, in
	// nanoseconds, as the last answer's Date header said; requests are
	// signed at the service's time, as the client signs them. It stays 0
	// with the client's DisableClockSkewCorrection.
	skew     atomic.Int64
	skewless bool
}

// skewRetry is the skew past which a request refused for its signing time
// is signed again and sent at once, as the client's retryer does.
const skewRetry = 4 * time.Minute

// skewCodes are the errors of a request signed at the wrong time.
var skewCodes = map[string]bool{
	"InvalidSignatureException": true, "SignatureDoesNotMatch": true, "RequestTimeTooSkewed": true,
	"RequestExpired": true, "AuthFailure": true, "AccessDeniedException": true,
}

// sendMessageBatchSchema is the operation's schema, which the client's
// protocol takes to make an error of an answer.
var sendMessageBatchSchema = smithy.NewOperationSchema(schemas.SendMessageBatch, schemas.SendMessageBatchRequest, schemas.SendMessageBatchResult)

// Header values every request shares. http.Header values are not changed
// in place by net/http or the signer, which Set a new slice.
var (
	hdrContentType = []string{"application/x-amz-json-1.0"}
	hdrTarget      = []string{"AmazonSQS.SendMessageBatch"}
	hdrQueryMode   = []string{"true"}
)

// newDirect returns the direct sender of c, or nil when c's requests must
// go through c (see direct).
func newDirect(ctx context.Context, client API) *direct {
	c, ok := client.(*sqs.Client)
	if !ok {
		return nil
	}
	o := c.Options()
	switch {
	case len(o.APIOptions) > 0, hasInterceptors(o.Interceptors), o.ClientLogMode != 0, len(o.AuthSchemePreference) > 0,
		o.EndpointResolver != nil, o.EndpointResolverV2 == nil, o.HTTPSignerV4 == nil, o.HTTPClient == nil,
		o.Credentials == nil, o.Region == "", o.Protocol == nil || o.Protocol.ID() != awsJSON10,
		// A pseudo-region such as fips-us-east-1 names an endpoint and
		// signs for another region: the client maps it.
		strings.Contains(o.Region, "fips"):
		return nil
	}
	if _, anonymous := o.Credentials.(aws.AnonymousCredentials); anonymous {
		return nil
	}
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, sqs.EndpointParameters{
		Region:       aws.String(o.Region),
		UseDualStack: aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
		UseFIPS:      aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		Endpoint:     o.BaseEndpoint,
	})
	if err != nil {
		return nil // the client says why, at the first request
	}
	u := ep.URI
	if u.RawQuery != "" {
		return nil // the client's endpoint step drops it; leave that to the client
	}
	if o.EndpointOptions.DisableHTTPS {
		u.Scheme = "http"
	}
	if u.Path == "" {
		u.Path = "/"
	}
	d := &direct{
		url:       u.String(),
		headers:   ep.Headers,
		region:    o.Region,
		creds:     o.Credentials,
		signer:    o.HTTPSignerV4,
		http:      o.HTTPClient,
		protocol:  o.Protocol,
		checkMD5:  !o.DisableMessageChecksumValidation,
		skewless:  o.DisableClockSkewCorrection,
		userAgent: []string{"aws-sdk-go-v2/" + aws.SDKVersion + " ua/2.1 api/sqs#" + sqs.ServiceAPIVersion + " lib/s3sqs-sqsbatch"},
	}
	if _, sdk := o.HTTPSignerV4.(*v4.Signer); sdk && len(ep.Headers) == 0 && u.Path == "/" && u.RawQuery == "" {
		d.sig = &sigV4{region: o.Region}
	}
	return d
}

// hasInterceptors reports whether r holds an interceptor of any kind.
func hasInterceptors(r smithyhttp.InterceptorRegistry) bool {
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).Len() > 0 {
			return true
		}
	}
	return false
}

// sendMessageBatch makes one SendMessageBatch request of in and returns
// what the client's SendMessageBatch with exactBodies would: the answer,
// with each accepted entry whose MD5 does not match its body moved to
// Failed (see bodyChecksums), or the error.
func (d *direct) sendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
	out, err := d.send(ctx, in)
	if err != nil && skewCodes[awserr.Code(err)] && d.skewed() {
		// Signed by a clock far from the service's, which the answer
		// has just told: once more at the service's time.
		out, err = d.send(ctx, in)
	}
	if err != nil {
		return nil, &smithy.OperationError{ServiceID: sqs.ServiceID, OperationName: "SendMessageBatch", Err: err}
	}
	return out, nil
}

func (d *direct) send(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
	creds, err := d.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to retrieve credentials: %w", err)
	}
	body := newBatchBody(in)
	payloadHash, err := payloadHashOf(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(body.Len())
	req.Header = make(http.Header, 8+len(d.headers))
	for k, v := range d.headers {
		req.Header[k] = v
	}
	req.Header["Content-Type"] = hdrContentType
	req.Header["X-Amz-Target"] = hdrTarget
	req.Header["X-Amzn-Query-Mode"] = hdrQueryMode
	req.Header["User-Agent"] = d.userAgent
	now := time.Now().Add(time.Duration(d.skew.Load()))
	if d.sig != nil {
		d.sig.sign(req, creds, payloadHash, now)
	} else if err := d.signer.SignHTTP(ctx, creds, req, payloadHash, "sqs", d.region, now.UTC()); err != nil {
		return nil, fmt.Errorf("failed to sign request: %w", err)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &smithy.CanceledError{Err: ctx.Err()}
		}
		return nil, &smithyhttp.RequestSendError{Err: err}
	}
	defer resp.Body.Close()
	d.noteSkew(resp.Header.Get("Date"), time.Now())
	// An answer's error carries the answer, as the client's does.
	answerErr := func(err error) error {
		return &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
			RequestID:     resp.Header.Get("X-Amzn-Requestid"),
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, answerErr(d.protocol.DeserializeResponse(ctx, sendMessageBatchSchema, sqs.TypeRegistry,
			&smithyhttp.Response{Response: resp}, &sqs.SendMessageBatchOutput{}))
	}
	buf := answerBufs.Get().(*bytes.Buffer)
	defer answerBufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, answerErr(&smithy.DeserializationError{Err: err})
	}
	out, err := readAnswer(buf.Bytes(), in.Entries, d.checkMD5)
	if err != nil {
		return nil, answerErr(&smithy.DeserializationError{Err: err, Snapshot: bytes.Clone(buf.Bytes()[:min(buf.Len(), 1024)])})
	}
	return out, nil
}

// payloadHashOf returns the hex SHA-256 of what body reads, and seeks it
// back to its start.
func payloadHashOf(body *batchBody) (string, error) {
	b := signBufs.Get().(*signBuf)
	defer signBufs.Put(b)
	b.h.Reset()
	if _, err := io.CopyBuffer(b.h, body, b.copy[:]); err != nil {
		return "", err
	}
	hex.Encode(b.hex[:], b.h.Sum(b.sum[:0]))
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return string(b.hex[:]), nil
}

// noteSkew keeps the skew of the service's clock that an answer's Date
// header, read at now, tells.
func (d *direct) noteSkew(date string, now time.Time) {
	if d.skewless || date == "" {
		return
	}
	if at, err := http.ParseTime(date); err == nil {
		d.skew.Store(int64(at.Sub(now)))
	}
}

// skewed reports whether the service's clock is more than skewRetry from
// this one.
func (d *direct) skewed() bool {
	skew := time.Duration(d.skew.Load())
	return skew > skewRetry || skew < -skewRetry
}

// answerBufs and answerParsers hold what reading an answer needs, so that
// it allocates only the output.
var (
	answerBufs    = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	answerParsers fastjson.ParserPool
)

// readAnswer reads the JSON answer to a SendMessageBatch of entries, whose
// ids are batchIDs, into the output the client would return, but for the
// accepted entries' fields other than Id, which the Sender does not read.
// With checkMD5, an accepted entry whose MD5OfMessageBody is not the MD5
// of the body sent is moved to Failed, as bodyChecksums moves it.
func readAnswer(answer []byte, entries []types.SendMessageBatchRequestEntry, checkMD5 bool) (*sqs.SendMessageBatchOutput, error) {
	if len(bytes.TrimSpace(answer)) == 0 {
		// The client reads an empty answer as an empty output: every
		// entry is then sent again.
		return &sqs.SendMessageBatchOutput{}, nil
	}
	p := answerParsers.Get()
	defer answerParsers.Put(p)
	v, err := p.ParseBytes(answer)
	if err != nil {
		return nil, err
	}
	if v.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("the answer is a JSON %s, not an object", v.Type())
	}
	ok, failed := v.GetArray("Successful"), v.GetArray("Failed")
	out := &sqs.SendMessageBatchOutput{Successful: make([]types.SendMessageBatchResultEntry, 0, len(ok))}
	var sums *md5Sum
	for _, e := range ok {
		id := e.GetStringBytes("Id")
		i := entryOf(id, entries)
		if i < 0 {
			// Not an entry sent: the Sender skips it as it would.
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: aws.String(string(id))})
			continue
		}
		if md5 := e.GetStringBytes("MD5OfMessageBody"); checkMD5 && md5 != nil && entries[i].MessageBody != nil {
			if sums == nil {
				sums = md5Sums.Get().(*md5Sum)
				defer md5Sums.Put(sums)
			}
			if sum := sums.hex(*entries[i].MessageBody); !bytes.Equal(sum, md5) {
				out.Failed = append(out.Failed, md5Mismatch(entries[i].Id, md5, e.GetStringBytes("MessageId"), sum))
				continue
			}
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: entries[i].Id})
	}
	for _, e := range failed {
		f := types.BatchResultErrorEntry{SenderFault: e.GetBool("SenderFault")}
		if i := entryOf(e.GetStringBytes("Id"), entries); i >= 0 {
			f.Id = entries[i].Id
		} else {
			f.Id = aws.String(string(e.GetStringBytes("Id")))
		}
		if c := e.Get("Code"); c != nil {
			f.Code = aws.String(string(c.GetStringBytes()))
		}
		if m := e.Get("Message"); m != nil {
			f.Message = aws.String(string(m.GetStringBytes()))
		}
		out.Failed = append(out.Failed, f)
	}
	return out, nil
}

// entryOf returns the place in entries of the entry whose Id is id, or -1.
// The Sender's ids are the entries' places, so it looks there first.
func entryOf[S string | []byte](id S, entries []types.SendMessageBatchRequestEntry) int {
	if len(id) == 1 && id[0] >= '0' && id[0] <= '9' {
		if i := int(id[0] - '0'); i < len(entries) && aws.ToString(entries[i].Id) == string(id) {
			return i
		}
	}
	for i := range entries {
		if aws.ToString(entries[i].Id) == string(id) {
			return i
		}
	}
	return -1
}
