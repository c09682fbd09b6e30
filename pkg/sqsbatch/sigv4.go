package sqsbatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// sigV4 signs the Sender's own requests to SQS with Signature Version 4,
// as the SDK's v4.Signer signs them (TestSigV4AsTheSDK holds it to that
// signer, signature for signature), for the one shape they have: a POST
// to the path "/" with no query, whose headers are those the direct
// sender sets. The SDK's signer builds its canonical request for any
// request, with about 46 allocations; this one writes it into pooled
// buffers and keeps the signing key of the day, with 5.
type sigV4 struct {
	region string

	mu  sync.Mutex
	key *signingKey // the last key derived
}

// signingKey is the key of one day, region and secret, with the HMACs
// made with it, for reuse.
type signingKey struct {
	day, secret string
	key         []byte
	macs        sync.Pool
}

// signBufs holds the buffers a signature, and a body's hash, are written
// in.
var signBufs = sync.Pool{New: func() any { return &signBuf{h: sha256.New()} }}

type signBuf struct {
	canonical []byte
	h         hash.Hash
	sum       [sha256.Size]byte
	hex       [2 * sha256.Size]byte
	copy      [8 << 10]byte // what a body is hashed through
}

// signedHeaders are the headers signed, with and without a session
// token: those the direct sender sets, in the order SigV4 sorts them.
const (
	signedHeaders      = "content-length;content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode"
	signedHeadersToken = "content-length;content-type;host;x-amz-date;x-amz-security-token;x-amz-target;x-amzn-query-mode"
)

// sign sets req's X-Amz-Date, X-Amz-Security-Token (with a session
// token) and Authorization headers. req is a POST to "/" whose
// Content-Type, X-Amz-Target and X-Amzn-Query-Mode the direct sender set;
// payloadHash is the hex SHA-256 of its body.
func (s *sigV4) sign(req *http.Request, creds aws.Credentials, payloadHash string, now time.Time) {
	now = now.UTC()
	var stamp [16]byte
	amzDate := string(now.AppendFormat(stamp[:0], "20060102T150405Z"))
	day := amzDate[:8]
	req.Header["X-Amz-Date"] = []string{amzDate}
	signed := signedHeaders
	if creds.SessionToken != "" {
		req.Header["X-Amz-Security-Token"] = []string{creds.SessionToken}
		signed = signedHeadersToken
	}

	b := signBufs.Get().(*signBuf)
	defer signBufs.Put(b)
	c := append(b.canonical[:0], "POST\n/\n\ncontent-length:"...)
	c = strconv.AppendInt(c, req.ContentLength, 10)
	c = append(c, "\ncontent-type:"...)
	c = append(c, req.Header.Get("Content-Type")...)
	c = append(c, "\nhost:"...)
	c = append(c, hostForSigning(req)...)
	c = append(c, "\nx-amz-date:"...)
	c = append(c, amzDate...)
	if creds.SessionToken != "" {
		c = append(c, "\nx-amz-security-token:"...)
		c = append(c, creds.SessionToken...)
	}
	c = append(c, "\nx-amz-target:"...)
	c = append(c, req.Header.Get("X-Amz-Target")...)
	c = append(c, "\nx-amzn-query-mode:"...)
	c = append(c, req.Header.Get("X-Amzn-Query-Mode")...)
	c = append(c, "\n\n"...)
	c = append(c, signed...)
	c = append(c, '\n')
	c = append(c, payloadHash...)
	b.h.Reset()
	b.h.Write(c)
	hex.Encode(b.hex[:], b.h.Sum(b.sum[:0]))

	// The string to sign, in the same buffer: the canonical request is
	// hashed.
	scope := day + "/" + s.region + "/sqs/aws4_request"
	c = append(c[:0], "AWS4-HMAC-SHA256\n"...)
	c = append(c, amzDate...)
	c = append(c, '\n')
	c = append(c, scope...)
	c = append(c, '\n')
	c = append(c, b.hex[:]...)
	k := s.keyOf(day, creds.SecretAccessKey)
	mac := k.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(c)
	sig := mac.Sum(b.sum[:0])
	k.macs.Put(mac)
	hex.Encode(b.hex[:], sig)

	c = append(c[:0], "AWS4-HMAC-SHA256 Credential="...)
	c = append(c, creds.AccessKeyID...)
	c = append(c, '/')
	c = append(c, scope...)
	c = append(c, ", SignedHeaders="...)
	c = append(c, signed...)
	c = append(c, ", Signature="...)
	c = append(c, b.hex[:]...)
	req.Header["Authorization"] = []string{string(c)}
	b.canonical = c
}

// keyOf returns the signing key of day and secret, derived once.
func (s *sigV4) keyOf(day, secret string) *signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.key; k != nil && k.day == day && k.secret == secret {
		return k
	}
	key := hmacSHA256([]byte("AWS4"+secret), day)
	key = hmacSHA256(key, s.region)
	key = hmacSHA256(key, "sqs")
	key = hmacSHA256(key, "aws4_request")
	k := &signingKey{day: day, secret: secret, key: key}
	k.macs.New = func() any { return hmac.New(sha256.New, k.key) }
	s.key = k
	return k
}

func hmacSHA256(key []byte, data string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(data))
	return mac.Sum(nil)
}

// hostForSigning is the host req goes to, without the scheme's default
// port, which it takes out of req.Host too, as the SDK's signer does, so
// that the Host header says what is signed.
func hostForSigning(req *http.Request) string {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	switch port := req.URL.Port(); {
	case port == "443" && req.URL.Scheme == "https", port == "80" && req.URL.Scheme == "http":
		req.Host = host[:len(host)-len(port)-1]
		return req.Host
	}
	return host
}
