package sqsbatch_test

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// viaClient hides the *sqs.Client it holds, so that a Sender makes its
// requests through the client's SendMessageBatch, as it does for any
// client that is not a plain *sqs.Client.
type viaClient struct{ sqsbatch.API }

// sqsAnswer answers a SendMessageBatch as the test's scenario says, given
// the request's entries (their Id and MessageBody).
type sqsAnswer func(w http.ResponseWriter, entries []wireEntry)

type wireEntry struct{ Id, MessageBody string }

// answerServer is an SQS endpoint that answers every SendMessageBatch with
// the current scenario and keeps each request as it arrived.
type answerServer struct {
	*httptest.Server
	mu       sync.Mutex
	answer   sqsAnswer
	requests []*http.Request
	bodies   [][]byte
}

func newAnswerServer(t *testing.T) *answerServer {
	s := &answerServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ Entries []wireEntry }
		if err := json.Unmarshal(body, &in); err != nil || r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" {
			t.Errorf("request %s %q: %v", r.Header.Get("X-Amz-Target"), body, err)
		}
		s.mu.Lock()
		s.requests = append(s.requests, r)
		s.bodies = append(s.bodies, body)
		answer := s.answer
		s.mu.Unlock()
		answer(w, in.Entries)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *answerServer) take() ([]*http.Request, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, b := s.requests, s.bodies
	s.requests, s.bodies = nil, nil
	return r, b
}

func jsonAnswer(status int, headers map[string]string, body string) sqsAnswer {
	return func(w http.ResponseWriter, _ []wireEntry) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// accept answers each entry as accepted, but those fail names: entry
// index -> the Failed member written for it ("" leaves it out of both
// lists), or "md5" for an accepted entry with a wrong MD5.
func accept(fail map[int]string) sqsAnswer {
	return func(w http.ResponseWriter, entries []wireEntry) {
		var ok, failed []string
		for i, e := range entries {
			f, found := fail[i]
			switch {
			case !found || f == "md5":
				sum := md5.Sum([]byte(e.MessageBody))
				if f == "md5" {
					sum[0]++
				}
				ok = append(ok, fmt.Sprintf(`{"Id":%q,"MessageId":"m-%d","MD5OfMessageBody":%q}`, e.Id, i, hex.EncodeToString(sum[:])))
			case f != "":
				failed = append(failed, fmt.Sprintf(`{"Id":%q,%s}`, e.Id, f))
			}
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprintf(w, `{"Failed":[%s],"Successful":[%s]}`, strings.Join(failed, ","), strings.Join(ok, ","))
	}
}

// TestDirectAnswersAsTheClient sends the same entries, under each answer
// SQS can give, once with the Sender's own requests and once through the
// *sqs.Client's SendMessageBatch, and holds the two to the same outcome:
// what was accepted, each failure's code and fault, and the error's AWS
// code and retry class. The requests' bodies are the same bytes, and each
// request's signature is the one the SDK's signer makes of it as it
// arrived.
func TestDirectAnswersAsTheClient(t *testing.T) {
	srv := newAnswerServer(t)
	c := sqs.NewFromConfig(aws.Config{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "session-token"),
		BaseEndpoint: aws.String(srv.URL),
	}, func(o *sqs.Options) { o.RetryMaxAttempts = 1 }) // one request each way
	q := sqsbatch.Queue{URL: srv.URL + "/123456789012/q", MaxMessageSize: 256 << 10}
	opts := sqsbatch.Options{MaxAttempts: 1, Backoff: noWait, FixedInFlight: true, MaxInFlight: 1}
	cut := func(w http.ResponseWriter, _ []wireEntry) {
		w.Header().Set("Content-Length", "500")
		io.WriteString(w, `{"Successful":[{"Id":"0"`)
	}
	for _, tc := range []struct {
		name   string
		answer sqsAnswer
	}{
		{"all accepted", accept(nil)},
		{"partial", accept(map[int]string{
			1: `"SenderFault":true,"Code":"InvalidParameterValue","Message":"bad"`,
			2: `"SenderFault":false,"Code":"RequestThrottled","Message":"slow down"`,
			3: "",
		})},
		{"md5 mismatch", accept(map[int]string{0: "md5"})},
		{"throttled", jsonAnswer(400, map[string]string{"X-Amzn-Query-Error": "RequestThrottled;Sender"},
			`{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Rate exceeded"}`)},
		{"no queue", jsonAnswer(400, map[string]string{"X-Amzn-Query-Error": "AWS.SimpleQueueService.NonExistentQueue;Sender", "X-Amzn-Requestid": "r-1"},
			`{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`)},
		{"denied", jsonAnswer(403, nil, `{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"not yours"}`)},
		{"kms throttled", jsonAnswer(400, map[string]string{"X-Amzn-Query-Error": "KMS.ThrottlingException;Sender"},
			`{"__type":"com.amazonaws.sqs#KmsThrottled","message":"kms"}`)},
		{"server error", jsonAnswer(500, nil, `{"__type":"com.amazon.coral.service#InternalFailure"}`)},
		{"unavailable, not JSON", jsonAnswer(503, nil, `<html>busy</html>`)},
		{"answer not JSON", jsonAnswer(200, nil, `{"Successful":[`)},
		{"answer cut short", cut},
		{"empty answer", jsonAnswer(200, nil, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.answer = tc.answer
			var outcomes [2]outcome
			var bodies [2][]byte
			for i, api := range []sqsbatch.API{c, viaClient{c}} {
				s, err := sqsbatch.New(t.Context(), api, q, opts)
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.SendEntries(t.Context(), entries("e", 5))
				outcomes[i] = outcomeOf(res, err)
				reqs, bs := srv.take()
				if len(reqs) != 1 {
					t.Fatalf("%d requests, want 1", len(reqs))
				}
				bodies[i] = bs[0]
				checkSignature(t, reqs[0], bs[0], "secret")
			}
			if d := cmp.Diff(outcomes[1], outcomes[0]); d != "" {
				t.Errorf("the Sender's own request ended otherwise than the client's (-client +own):\n%s", d)
			}
			if string(bodies[0]) != string(bodies[1]) {
				t.Errorf("bodies differ:\nown    %s\nclient %s", bodies[0], bodies[1])
			}
		})
	}
}

// outcome is what a send came to, as a caller of the Sender can tell.
type outcome struct {
	Sent     int
	Failures []string // seq code senderFault
	ErrCode  string
	ErrClass string
	Stopped  bool
	Status   int
}

func outcomeOf(res sqsbatch.Result, err error) outcome {
	o := outcome{Sent: res.Sent, ErrCode: awserr.Code(err), ErrClass: awserr.Classify(err).String(), Status: awserr.StatusCode(err)}
	var stop *sqsbatch.StopError
	o.Stopped = errors.As(err, &stop)
	for _, f := range res.Failures {
		o.Failures = append(o.Failures, fmt.Sprintf("%d %s %v", f.Seq, f.Code, f.SenderFault))
	}
	slices.Sort(o.Failures)
	return o
}

// checkSignature signs again, with the SDK's signer, the headers r says
// it signed, as r arrived, and fails when the signature differs.
func checkSignature(t *testing.T, r *http.Request, body []byte, secret string) {
	t.Helper()
	auth := r.Header.Get("Authorization")
	var credential, signed, signature string
	for part := range strings.SplitSeq(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			signature = v
		}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[3] != "sqs" || scope[2] != "eu-west-1" {
		t.Fatalf("Authorization %q: want a credential scope of sqs in eu-west-1", auth)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("X-Amz-Date: %v", err)
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	again.ContentLength = r.ContentLength
	for h := range strings.SplitSeq(signed, ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	for _, must := range []string{"x-amz-security-token", "x-amz-target", "content-type"} {
		if !strings.Contains(";"+signed+";", ";"+must+";") {
			t.Errorf("SignedHeaders %q leaves out %s", signed, must)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: scope[0], SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, again, hex.EncodeToString(sum[:]), "sqs", "eu-west-1", at); err != nil {
		t.Fatal(err)
	}
	if want := again.Header.Get("Authorization"); !strings.HasSuffix(want, "Signature="+signature) {
		t.Errorf("signature of the request as it arrived:\n got %s\nwant %s", auth, want)
	}
}

// TestDirectSignsAtTheServicesTime sends to a service whose clock is ten
// minutes ahead and refuses a request signed more than five minutes from
// it, as SQS does: the first request, signed by this clock, is refused,
// and sent again at once signed at the time the answer's Date header
// tells; the next Send signs at that time from the start. Through the
// client the same happens by its retryer.
func TestDirectSignsAtTheServicesTime(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		service := time.Now().Add(10 * time.Minute)
		w.Header().Set("Date", service.UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		signed, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if d := service.Sub(signed); d > 5*time.Minute || d < -5*time.Minute {
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"Signature expired"}`)
			return
		}
		io.WriteString(w, `{"Successful":[{"Id":"0"}]}`)
	}))
	t.Cleanup(srv.Close)
	c := sqs.NewFromConfig(aws.Config{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint: aws.String(srv.URL),
	})
	q := sqsbatch.Queue{URL: srv.URL + "/123456789012/q", MaxMessageSize: 256 << 10}
	opts := sqsbatch.Options{MaxAttempts: 1, Backoff: noWait, FixedInFlight: true, MaxInFlight: 1}
	for _, tc := range []struct {
		name string
		api  sqsbatch.API
	}{{"direct", c}, {"through the client", viaClient{c}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqsbatch.New(t.Context(), tc.api, q, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []int32{2, 1} {
				requests.Store(0)
				res, err := s.SendEntries(t.Context(), entries("e", 1))
				if err != nil || res.Sent != 1 || requests.Load() != want {
					t.Errorf("send %d: %v, sent %d in %d requests; want sent in %d", i, err, res.Sent, requests.Load(), want)
				}
			}
		})
	}
}
