// Package iamrecord is a loopback reverse proxy in front of a stand-in that
// records, for each request an AWS SDK client sends through it, the IAM
// actions the request needs and the resources they act on, so that a test
// can hold a policy to what a program calls rather than to what its author
// remembers.
//
// It knows the protocols this project's clients speak: SQS's JSON protocol
// and DynamoDB's (the X-Amz-Target header names the operation, the body its
// queue or table) and S3's REST protocol with path-style addressing. The
// operation becomes the action IAM authorizes it under: SendMessageBatch
// is sqs:SendMessage, HeadObject is s3:GetObject (s3:GetObjectVersion with
// a version id), ListObjectsV2 is s3:ListBucket with the condition key
// s3:prefix, each update of a TransactWriteItems is dynamodb:UpdateItem.
// A request it cannot name is recorded with an action "unknown:" and its
// operation, so that a check over the calls fails rather than passes it by.
package iamrecord

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Call is one action a request needs on one resource.
type Call struct {
	// Action is the IAM action, such as sqs:SendMessage.
	Action string `json:"action"`
	// Resource is the ARN the action is authorized on.
	Resource string `json:"resource"`
	// Context holds the condition keys IAM sets for the request that a
	// policy of this project may test, such as s3:prefix.
	Context map[string]string `json:"context,omitempty"`
	// Operation is the API operation that made the call.
	Operation string `json:"operation"`
}

// Options say what the ARNs of the stand-in's resources are.
type Options struct {
	// Region of the ARNs; the zero value is us-east-1.
	Region string
	// Account of DynamoDB tables' ARNs and of a queue named without its
	// owner (a queue's URL names its own); the zero value is
	// 123456789012, moto_server's.
	Account string
}

// Recorder records the calls of the requests it forwards. It is safe for
// concurrent use.
type Recorder struct {
	opts  Options
	proxy *httputil.ReverseProxy
	srv   *httptest.Server

	mu    sync.Mutex
	calls []Call
}

// Start starts a Recorder in front of upstream, a loopback base URL, and
// stops it when the test ends.
func Start(tb testing.TB, upstream string, o Options) *Recorder {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	if h := u.Hostname(); h != "localhost" && !net.ParseIP(h).IsLoopback() {
		tb.Fatalf("iamrecord: upstream %s is not a loopback address", upstream)
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Account == "" {
		o.Account = "123456789012"
	}
	r := &Recorder{opts: o, proxy: httputil.NewSingleHostReverseProxy(u)}
	r.proxy.Transport = &http.Transport{Proxy: nil}
	r.srv = httptest.NewServer(r)
	tb.Cleanup(r.srv.Close)
	return r
}

// URL is the base URL to point a client at.
func (r *Recorder) URL() string { return r.srv.URL }

// Calls returns the calls recorded so far and starts again from none.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// ServeHTTP records the calls of req and forwards it.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	calls := r.classify(req, body)
	r.mu.Lock()
	r.calls = append(r.calls, calls...)
	r.mu.Unlock()
	r.proxy.ServeHTTP(w, req)
}

func (r *Recorder) classify(req *http.Request, body []byte) []Call {
	target := req.Header.Get("X-Amz-Target")
	if op, ok := strings.CutPrefix(target, "AmazonSQS."); ok {
		return []Call{r.sqsCall(op, body)}
	}
	if _, op, ok := strings.Cut(target, "DynamoDB_"); ok {
		_, op, _ = strings.Cut(op, ".")
		return r.dynamoCalls(op, body)
	}
	if target != "" {
		return []Call{{Action: "unknown:" + target, Resource: "*", Operation: target}}
	}
	return []Call{r.s3Call(req)}
}

// sqsActions names the action of the batch operations, which IAM
// authorizes as their single form.
var sqsActions = map[string]string{
	"SendMessageBatch":             "SendMessage",
	"DeleteMessageBatch":           "DeleteMessage",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

func (r *Recorder) sqsCall(op string, body []byte) Call {
	var in struct {
		QueueURL               string `json:"QueueUrl"`
		QueueName              string
		QueueOwnerAWSAccountID string `json:"QueueOwnerAWSAccountId"`
	}
	_ = json.Unmarshal(body, &in)
	action := op
	if a, ok := sqsActions[op]; ok {
		action = a
	}
	c := Call{Action: "sqs:" + action, Operation: op, Resource: "*"}
	switch {
	case in.QueueURL != "":
		if u, err := url.Parse(in.QueueURL); err == nil {
			if account, name, ok := strings.Cut(strings.Trim(u.Path, "/"), "/"); ok {
				c.Resource = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", r.opts.Region, account, name)
			}
		}
	case in.QueueName != "":
		account := cmp.Or(in.QueueOwnerAWSAccountID, r.opts.Account)
		c.Resource = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", r.opts.Region, account, in.QueueName)
	}
	return c
}

// dynamoItemActions names the action of each kind of item of a
// TransactWriteItems, which IAM authorizes item by item.
var dynamoItemActions = map[string]string{
	"Update":         "UpdateItem",
	"Put":            "PutItem",
	"Delete":         "DeleteItem",
	"ConditionCheck": "ConditionCheckItem",
}

func (r *Recorder) dynamoCalls(op string, body []byte) []Call {
	table := func(name string) string {
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", r.opts.Region, r.opts.Account, name)
	}
	var in struct {
		TableName     string
		TransactItems []map[string]struct{ TableName string }
		RequestItems  map[string]json.RawMessage
	}
	_ = json.Unmarshal(body, &in)
	var calls []Call
	for _, item := range in.TransactItems {
		for kind, v := range item {
			calls = append(calls, Call{Action: "dynamodb:" + dynamoItemActions[kind], Resource: table(v.TableName), Operation: op})
		}
	}
	for name := range in.RequestItems {
		calls = append(calls, Call{Action: "dynamodb:" + op, Resource: table(name), Operation: op})
	}
	if in.TableName != "" || len(calls) == 0 {
		calls = append(calls, Call{Action: "dynamodb:" + op, Resource: table(in.TableName), Operation: op})
	}
	return calls
}

// objectQuery and listQuery are the query parameters that leave an object
// request GetObject, PutObject, HeadObject or DeleteObject, and a bucket
// request a listing: any other (tagging, acl, uploads, ...) makes another
// operation, which is recorded as unknown.
var (
	objectQuery = []string{"versionId", "x-id", "partNumber"}
	listQuery   = []string{"list-type", "prefix", "start-after", "continuation-token", "max-keys", "delimiter", "encoding-type", "fetch-owner", "versions", "key-marker", "version-id-marker", "marker", "x-id"}
)

// only reports whether every parameter of q is in allowed or a
// response-* override.
func only(q url.Values, allowed []string) bool {
	for k := range q {
		if !slices.Contains(allowed, k) && !strings.HasPrefix(k, "response-") {
			return false
		}
	}
	return true
}

func (r *Recorder) s3Call(req *http.Request) Call {
	q := req.URL.Query()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	object := "arn:aws:s3:::" + bucket + "/" + key
	versioned := func(action string) string {
		if q.Has("versionId") {
			return action + "Version"
		}
		return action
	}
	switch {
	case bucket == "":
	case key != "" && only(q, objectQuery) && (req.Method == http.MethodGet || req.Method == http.MethodHead):
		return Call{Action: versioned("s3:GetObject"), Resource: object, Operation: req.Method + " object"}
	case key != "" && only(q, objectQuery) && req.Method == http.MethodPut && req.Header.Get("X-Amz-Copy-Source") == "":
		return Call{Action: "s3:PutObject", Resource: object, Operation: "PutObject"}
	case key != "" && only(q, objectQuery) && req.Method == http.MethodDelete:
		return Call{Action: versioned("s3:DeleteObject"), Resource: object, Operation: "DeleteObject"}
	case key == "" && only(q, listQuery) && req.Method == http.MethodGet && q.Has("versions"):
		return Call{Action: "s3:ListBucketVersions", Resource: "arn:aws:s3:::" + bucket, Operation: "ListObjectVersions",
			Context: map[string]string{"s3:prefix": q.Get("prefix")}}
	case key == "" && only(q, listQuery) && req.Method == http.MethodGet:
		return Call{Action: "s3:ListBucket", Resource: "arn:aws:s3:::" + bucket, Operation: "ListObjects",
			Context: map[string]string{"s3:prefix": q.Get("prefix")}}
	case key == "" && len(q) == 0 && req.Method == http.MethodHead:
		return Call{Action: "s3:ListBucket", Resource: "arn:aws:s3:::" + bucket, Operation: "HeadBucket"}
	}
	op := req.Method + " " + req.URL.Path + "?" + req.URL.RawQuery
	return Call{Action: "unknown:s3 " + op, Resource: "*", Operation: op}
}
