package faultproxy

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name, method, target string
		header               map[string]string
		body                 string
		svc                  service
		op                   string
	}{
		{name: "sqs json", method: "POST", target: "/", header: map[string]string{"X-Amz-Target": "AmazonSQS.SendMessageBatch", "Content-Type": "application/x-amz-json-1.0"}, body: "{}", svc: serviceSQS, op: "SendMessageBatch"},
		{name: "other json target", method: "POST", target: "/", header: map[string]string{"X-Amz-Target": "DynamoDB_20120810.PutItem"}, svc: serviceOther, op: "target:DynamoDB_20120810.PutItem"},
		{name: "sns query", method: "POST", target: "/", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}, body: "Action=Publish&Version=2010-03-31", svc: serviceOther, op: "query:Publish"},
		{name: "sqs query", method: "POST", target: "/", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "Action=SendMessage&Version=2012-11-05", svc: serviceOther, op: "query:SendMessage"},
		{name: "health", method: "GET", target: "/health", svc: serviceOther, op: "other"},
		{name: "moto api", method: "GET", target: "/moto-api/data.json", svc: serviceOther, op: "other"},
		{name: "get object sdk", method: "GET", target: "/b/dir/k.json?x-id=GetObject", svc: serviceS3, op: "GetObject"},
		{name: "put object sdk", method: "PUT", target: "/b/k?x-id=PutObject", svc: serviceS3, op: "PutObject"},
		{name: "get object plain", method: "GET", target: "/b/dir%2Fk", svc: serviceS3, op: "GetObject"},
		{name: "head object", method: "HEAD", target: "/b/k", svc: serviceS3, op: "HeadObject"},
		{name: "put object plain", method: "PUT", target: "/b/k", svc: serviceS3, op: "PutObject"},
		{name: "copy object", method: "PUT", target: "/b/k", header: map[string]string{"X-Amz-Copy-Source": "/b/j"}, svc: serviceS3, op: "CopyObject"},
		{name: "object tagging", method: "GET", target: "/b/k?tagging", svc: serviceS3, op: "S3:GETObject?tagging"},
		{name: "list v2", method: "GET", target: "/b?list-type=2&prefix=x", svc: serviceS3, op: "ListObjectsV2"},
		{name: "list v2 slash", method: "GET", target: "/b/?list-type=2", svc: serviceS3, op: "ListObjectsV2"},
		{name: "list v1", method: "GET", target: "/b", svc: serviceS3, op: "ListObjects"},
		{name: "create bucket", method: "PUT", target: "/b", svc: serviceS3, op: "CreateBucket"},
		{name: "bucket notification", method: "PUT", target: "/b?notification", svc: serviceS3, op: "S3:PUTBucket?notification"},
		{name: "list buckets", method: "GET", target: "/", svc: serviceS3, op: "ListBuckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			svc, op := classify(r, []byte(tc.body))
			if svc != tc.svc || op != tc.op {
				t.Errorf("classify(%s %s) = %v, %q; want %v, %q", tc.method, tc.target, svc, op, tc.svc, tc.op)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		rates  Rates
		want   string
	}{
		{name: "https", target: "https://127.0.0.1:1", want: "not an http://host:port"},
		{name: "path", target: "http://127.0.0.1:1/x", want: "not an http://host:port"},
		{name: "remote", target: "http://10.1.2.3:80", want: "not a loopback"},
		{name: "rate above 1", target: "http://127.0.0.1:1", rates: Rates{SQS500: 1.5}, want: "SQS500 = 1.5"},
		{name: "negative rate", target: "http://127.0.0.1:1", rates: Rates{EntryFailed: -0.1}, want: "EntryFailed"},
		{name: "NaN", target: "http://127.0.0.1:1", rates: Rates{Delay: math.NaN()}, want: "Delay"},
		{name: "sqs sum", target: "http://127.0.0.1:1", rates: Rates{SQS500: 0.5, ResetAfter: 0.6}, want: "SQS500+SQSThrottled"},
		{name: "s3 sum", target: "http://127.0.0.1:1", rates: Rates{BodyCut: 0.5, ResetBefore: 0.6}, want: "S3500+ResetBefore"},
		{name: "negative delay", target: "http://127.0.0.1:1", rates: Rates{DelayFor: -time.Second}, want: "DelayFor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.target, Options{Rates: tc.rates})
			if err == nil {
				p.Close()
				t.Fatalf("New(%q, %+v) succeeded", tc.target, tc.rates)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestDecide checks that the drawn faults follow the rates: exclusive
// classes in proportion, BodyCut only on GetObject, entries only on a
// forwarded batch, nothing on operations not eligible.
func TestDecide(t *testing.T) {
	p, err := New("http://127.0.0.1:1", Options{Seed: 3, Ops: []string{"SendMessageBatch", "GetObject", "PutObject"}, Rates: Rates{
		SQS500: 0.1, SQSThrottled: 0.2, ResetBefore: 0.1, ResetAfter: 0.1, S3500: 0.1, BodyCut: 0.3, EntryFailed: 0.25, Delay: 0.5, DelayFor: time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 20000
	got := map[service]map[fault]int{serviceSQS: {}, serviceS3: {}}
	entries, failedEntries, delayed := 0, 0, 0
	for range n {
		d := p.decide(serviceSQS, "SendMessageBatch", 10)
		got[serviceSQS][d.fault]++
		if d.fault == faultSQS500 || d.fault == faultSQSThrottled || d.fault == faultResetBefore {
			if d.fail != nil {
				t.Fatalf("entries failed on a request not forwarded (%v)", d.fault)
			}
		} else {
			entries += len(d.fail)
			for _, f := range d.fail {
				if f {
					failedEntries++
				}
			}
		}
		if d.delay > 0 {
			delayed++
		}
		got[serviceS3][p.decide(serviceS3, "GetObject", 0).fault]++
		if f := p.decide(serviceS3, "PutObject", 0).fault; f == faultBodyCut {
			t.Fatal("BodyCut drawn for PutObject")
		}
		if d := p.decide(serviceSQS, "ReceiveMessage", 0); d.fault != noFault || d.delay != 0 {
			t.Fatalf("fault on ReceiveMessage, which Ops leaves out: %+v", d)
		}
	}
	near := func(what string, count, total int, want float64) {
		t.Helper()
		if got := float64(count) / float64(total); math.Abs(got-want) > 0.02 {
			t.Errorf("%s: rate %.3f, want %.2f", what, got, want)
		}
	}
	near("SQS500", got[serviceSQS][faultSQS500], n, 0.1)
	near("SQSThrottled", got[serviceSQS][faultSQSThrottled], n, 0.2)
	near("SQS ResetBefore", got[serviceSQS][faultResetBefore], n, 0.1)
	near("SQS ResetAfter", got[serviceSQS][faultResetAfter], n, 0.1)
	near("SQS none", got[serviceSQS][noFault], n, 0.5)
	near("S3500", got[serviceS3][faultS3500], n, 0.1)
	near("BodyCut", got[serviceS3][faultBodyCut], n, 0.3)
	near("S3 none", got[serviceS3][noFault], n, 0.4)
	near("EntryFailed", failedEntries, entries, 0.25)
	near("Delay", delayed, n, 0.5)
}
