package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
)

// latencyProxy is what the CLI's requests go through: it adds a fixed
// delay to every request.
type latencyProxy interface {
	URL() string
	SetDelay(d time.Duration) error
	Stats() string
	Close() error
}

// streamProxy is a reverse proxy that holds every answer for the delay
// once the upstream's headers have come, and then streams the body as the
// upstream sends it: a first byte the delay late, as in a Region, at the
// cost of a copy. faultproxy instead reads every request and answer whole
// (it must, to cut or drop them) and parses every SendMessageBatch; in the
// benchmark's own process, on 2 cores, that CPU is taken from the CLI and
// fauxqs (see -proxy).
type streamProxy struct {
	url      string
	srv      *http.Server
	ln       net.Listener
	delay    atomic.Int64 // nanoseconds
	requests atomic.Int64
	delayed  atomic.Int64
	served   chan error
}

func newStreamProxy(target string) (*streamProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &streamProxy{url: "http://" + ln.Addr().String(), ln: ln, served: make(chan error, 1)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // part of the signature
		},
		Transport: &delayTransport{p: p, next: http.DefaultTransport.(*http.Transport).Clone()},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: time.Minute}
	go func() { p.served <- p.srv.Serve(ln) }()
	return p, nil
}

// delayTransport waits the proxy's delay after the upstream's headers.
type delayTransport struct {
	p    *streamProxy
	next http.RoundTripper
}

func (t *delayTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.p.requests.Add(1)
	resp, err := t.next.RoundTrip(r)
	d := time.Duration(t.p.delay.Load())
	if err != nil || d <= 0 {
		return resp, err
	}
	t.p.delayed.Add(1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return resp, nil
	case <-r.Context().Done():
		resp.Body.Close()
		return nil, r.Context().Err()
	}
}

func (p *streamProxy) URL() string { return p.url }

func (p *streamProxy) SetDelay(d time.Duration) error {
	p.delay.Store(int64(d))
	return nil
}

func (p *streamProxy) Stats() string {
	return fmt.Sprintf("{Requests:%d Delayed:%d}", p.requests.Load(), p.delayed.Load())
}

func (p *streamProxy) Close() error {
	err := p.srv.Close()
	if serr := <-p.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// faultProxy is faultproxy.Proxy as a latencyProxy: the proxy the first
// tables were measured with.
type faultProxy struct{ *faultproxy.Proxy }

func (p faultProxy) SetDelay(d time.Duration) error {
	rates := faultproxy.Rates{}
	if d > 0 {
		rates = faultproxy.Rates{Delay: 1, DelayFor: d}
	}
	return p.SetRates(rates)
}

func (p faultProxy) Stats() string { return fmt.Sprintf("%+v", p.Proxy.Stats()) }

// newProxy starts a proxy of kind (proxyStream or proxyFault) in front of
// target.
func newProxy(kind, target string) (latencyProxy, error) {
	if kind == proxyFault {
		p, err := faultproxy.New(target, faultproxy.Options{})
		if err != nil {
			return nil, err
		}
		return faultProxy{p}, nil
	}
	return newStreamProxy(target)
}
