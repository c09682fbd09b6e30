package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// billedUnit is the payload size SQS bills as one request.
const billedUnit = 64 << 10

// sqsCounter is a loopback reverse proxy in front of the SQS stand-in that
// counts the function's requests by operation (the JSON protocol's
// X-Amz-Target), and their billed 64 KiB units, taken as
// ceil(request body / 64 KiB): the body is the JSON request, a little more
// than the messages' payload.
type sqsCounter struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	ops   map[string]opCount
}

type opCount struct{ requests, units, bytes int64 }

func newSQSCounter(target string) (*sqsCounter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if h := u.Hostname(); h != "localhost" && !net.ParseIP(h).IsLoopback() {
		return nil, fmt.Errorf("SQS endpoint %s is not a loopback address", target)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	return &sqsCounter{proxy: rp, ops: map[string]opCount{}}, nil
}

func (c *sqsCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if op == "" {
		op = "other"
	}
	n := max(r.ContentLength, 0)
	c.mu.Lock()
	oc := c.ops[op]
	oc.requests++
	oc.bytes += n
	oc.units += max(1, (n+billedUnit-1)/billedUnit)
	c.ops[op] = oc
	c.mu.Unlock()
	c.proxy.ServeHTTP(w, r)
}

// take returns the counts so far and starts again from zero.
func (c *sqsCounter) take() map[string]opCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = map[string]opCount{}
	return ops
}
