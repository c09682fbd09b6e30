package faultproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// shutdownGrace is how long Close lets connections finish before it closes
// them. Handlers end at once when Close starts (delays and upstream
// requests are cancelled), so only a client that stalls while sending its
// request takes this long.
const shutdownGrace = 5 * time.Second

// Proxy is a running fault-injecting proxy in front of one upstream. Its
// methods are safe for concurrent use.
type Proxy struct {
	target string // scheme://host:port of the upstream
	url    string
	ops    map[string]bool // nil: every SQS operation and defaultS3Ops
	log    *slog.Logger

	srv    *http.Server
	tr     *http.Transport
	client *http.Client
	served chan struct{} // closed when srv.Serve returns

	// closing is cancelled by Close; it ends delays and upstream requests
	// in flight, which do not follow their client's context.
	closing  context.Context
	stop     context.CancelFunc
	handlers sync.WaitGroup

	mu     sync.Mutex
	closed bool
	rates  Rates
	rnd    *rand.Rand
	seq    int
	stats  Stats
	lost   []LostEntry
	// inFlight and inFlightBytes count the requests being handled and
	// the bytes of their bodies.
	inFlight      int
	inFlightBytes int64
}

// New starts a Proxy on 127.0.0.1 (a free port) that forwards to target,
// an http URL of a loopback address without a path, such as the value of
// AWS_ENDPOINT_URL_SQS. It fails on an invalid target, invalid rates or
// when it cannot listen. Call Close to stop it.
func New(target string, opts Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("faultproxy: target %q is not an http://host:port URL", target)
	}
	if h := u.Hostname(); h != "localhost" && !net.ParseIP(h).IsLoopback() {
		// Test infrastructure: it must never relay signed requests
		// anywhere but to a stand-in on this machine.
		return nil, fmt.Errorf("faultproxy: target %q is not a loopback address", target)
	}
	if err := opts.Rates.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := &http.Transport{
		Proxy:               nil, // never through an HTTP_PROXY of the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		// The client must get the upstream's bytes: no gzip added by
		// the proxy's own transport.
		DisableCompression: true,
	}
	p := &Proxy{
		target: u.Scheme + "://" + u.Host,
		url:    "http://" + ln.Addr().String(),
		log:    log,
		tr:     tr,
		client: &http.Client{
			Transport: tr,
			// Redirects (S3's 301 and 307) are the client's business.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		served: make(chan struct{}),
		rates:  opts.Rates,
		rnd:    rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		stats:  Stats{Requests: map[string]int{}},
	}
	if opts.Ops != nil {
		p.ops = make(map[string]bool, len(opts.Ops))
		for _, op := range opts.Ops {
			p.ops[op] = true
		}
	}
	p.closing, p.stop = context.WithCancel(context.Background())
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln) // returns ErrServerClosed after Close
	}()
	return p, nil
}

// Start is New for a test: it fails the test when New fails and closes the
// Proxy when the test ends.
func Start(tb testing.TB, target string, opts Options) *Proxy {
	tb.Helper()
	p, err := New(target, opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// URL returns the base URL clients use instead of the upstream's, such as
// "http://127.0.0.1:40123".
func (p *Proxy) URL() string { return p.url }

// SetRates replaces the fault rates from the next request on; requests in
// flight keep the faults already drawn. It fails, changing nothing, on
// invalid rates.
func (p *Proxy) SetRates(r Rates) error {
	if err := r.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	p.rates = r
	p.mu.Unlock()
	return nil
}

// Stats returns a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Requests = maps.Clone(p.stats.Requests)
	return s
}

// LostAnswers returns a copy of the messages that reached their queue
// without their answer reaching the sender, in the order the answers were
// lost.
func (p *Proxy) LostAnswers() []LostEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.lost)
	for i := range out {
		out[i].Attributes = maps.Clone(out[i].Attributes)
	}
	return out
}

// Close stops the Proxy: it stops listening, ends delays and upstream
// requests in flight (their clients get a reset; a send that had taken
// effect is recorded as a lost answer), and returns once every connection
// and goroutine of the Proxy has ended. Calling it again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()

	p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var err error
	if p.srv.Shutdown(ctx) != nil {
		err = p.srv.Close()
	}
	p.handlers.Wait()
	<-p.served
	p.tr.CloseIdleConnections()
	return err
}

// enter registers a handler, unless Close has begun. Doing both under mu
// keeps handlers.Add from racing with the Wait in Close.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// fault is a request fault; at most one is drawn per request.
type fault int

const (
	noFault fault = iota
	faultSQS500
	faultSQSThrottled
	faultS3500
	faultResetBefore
	faultResetAfter
	faultBodyCut
)

var faultNames = [...]string{"none", "sqs-500", "sqs-throttled", "s3-500", "reset-before", "reset-after", "body-cut"}

func (f fault) String() string { return faultNames[f] }

// decision is everything drawn for one request.
type decision struct {
	fault fault
	delay time.Duration
	fail  []bool // SendMessageBatch entries to fail, by index
	id    string // request id of injected answers
}

// decide counts the request and draws its faults, under mu so that one
// seeded source serves every request in arrival order.
func (p *Proxy) decide(svc service, op string, entries int) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	d := decision{id: fmt.Sprintf("faultproxy-%08d", p.seq)}
	p.stats.Requests[op]++
	if !p.eligible(svc, op) {
		return d
	}
	r := p.rates
	type class struct {
		rate  float64
		fault fault
	}
	var classes []class
	switch svc {
	case serviceSQS:
		classes = []class{{r.SQS500, faultSQS500}, {r.SQSThrottled, faultSQSThrottled}, {r.ResetBefore, faultResetBefore}, {r.ResetAfter, faultResetAfter}}
	case serviceS3:
		classes = []class{{r.S3500, faultS3500}, {r.ResetBefore, faultResetBefore}, {r.ResetAfter, faultResetAfter}}
		if op == "GetObject" {
			classes = append(classes, class{r.BodyCut, faultBodyCut})
		}
	}
	u := p.rnd.Float64()
	for _, c := range classes {
		if u < c.rate {
			d.fault = c.fault
			break
		}
		u -= c.rate
	}
	if p.rnd.Float64() < r.Delay {
		d.delay = r.delayFor()
	}
	d.delay += time.Duration(p.inFlight) * r.DelayPerInFlight
	if entries > 0 && (d.fault == noFault || d.fault == faultResetAfter) {
		d.fail = make([]bool, entries)
		for i := range d.fail {
			d.fail[i] = p.rnd.Float64() < r.EntryFailed
		}
	}
	return d
}

func (p *Proxy) eligible(svc service, op string) bool {
	switch {
	case svc == serviceOther:
		return false
	case p.ops != nil:
		return p.ops[op]
	case svc == serviceSQS:
		return true
	default:
		return slices.Contains(defaultS3Ops, op)
	}
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// serve handles one request: it reads it whole (so that a fault never
// meets a half-sent request), draws its faults and carries them out.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		reset(w)
		return
	}
	defer p.handlers.Done()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away while sending
	}
	p.arrive(len(body))
	defer p.depart(len(body))
	svc, op := classify(r, body)
	var batch *batchRequest
	if svc == serviceSQS && op == "SendMessageBatch" {
		if batch, err = parseBatch(body); err != nil {
			// Not a batch SQS would take either: let it answer.
			p.log.Debug("faultproxy: batch not parsed", "err", err)
			batch = nil
		}
	}
	entries := 0
	if batch != nil {
		entries = len(batch.entries)
	}
	d := p.decide(svc, op, entries)
	if d.fault != noFault {
		p.log.Debug("faultproxy: fault", "op", op, "fault", d.fault, "requestId", d.id)
	}
	switch d.fault {
	case faultSQS500, faultSQSThrottled, faultS3500, faultResetBefore:
		if !p.wait(r.Context(), d.delay) {
			reset(w)
			return
		}
		switch d.fault {
		case faultSQS500:
			p.count(func(s *Stats) { s.SQS500++ })
			sqsInternalError.write(w, d.id)
		case faultSQSThrottled:
			p.count(func(s *Stats) { s.SQSThrottled++ })
			sqsThrottled.write(w, d.id)
		case faultS3500:
			p.count(func(s *Stats) { s.S3500++ })
			writeS3InternalError(w, r, d.id)
		case faultResetBefore:
			p.count(func(s *Stats) { s.ResetBefore++ })
			reset(w)
		}
		return
	}

	sent := body
	var failed []json.RawMessage
	if batch != nil && slices.Contains(d.fail, true) {
		if sent, failed, err = batch.without(d.fail); err != nil {
			p.log.Warn("faultproxy: cannot fail entries", "err", err)
			sent, failed = body, nil
		}
	}
	var a *answer
	if len(failed) > 0 && len(failed) == entries {
		// Nothing left to send: SQS would refuse an empty batch.
		a = &answer{status: http.StatusOK, header: http.Header{"Content-Type": {sqsContentType}, "X-Amzn-Requestid": {d.id}}}
	} else if a, err = p.forward(r, sent); err != nil {
		p.count(func(s *Stats) { s.UpstreamErrors++ })
		p.log.Warn("faultproxy: upstream", "op", op, "err", err)
		http.Error(w, "faultproxy: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	if len(failed) > 0 && a.status == http.StatusOK {
		body, err := addFailed(a.body, failed)
		if err != nil {
			// The upstream answered something else than a batch
			// result; the client must see the failure, not a result
			// that omits entries.
			p.log.Warn("faultproxy: cannot add failed entries", "err", err)
			http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		a.body = body
		a.header.Del("Content-Length")
		p.count(func(s *Stats) { s.EntriesFailed += len(failed) })
	}

	// From here the request has taken effect: an answer that does not
	// reach the client is a lost answer.
	if !p.wait(r.Context(), d.delay) || r.Context().Err() != nil {
		p.lose(svc, op, sent, a, func(s *Stats) { s.ClientGone++ })
		reset(w)
		return
	}
	switch {
	case d.fault == faultResetAfter:
		p.lose(svc, op, sent, a, func(s *Stats) { s.ResetAfter++ })
		reset(w)
	case d.fault == faultBodyCut && a.status/100 == 2 && len(a.body) > 0 && r.Method == http.MethodGet:
		p.mu.Lock()
		n := p.rnd.IntN(len(a.body))
		p.stats.BodyCut++
		p.mu.Unlock()
		cut(w, a, n)
	default:
		a.write(w, r)
	}
}

// wait waits d, unless the client goes or the Proxy closes first, and
// reports whether d passed.
func (p *Proxy) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	// Counted as the wait starts, so that a caller that sees it knows the
	// request is held here (after its forward, when it has one).
	p.count(func(s *Stats) { s.Delayed++ })
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.closing.Done():
	}
	return false
}

// lose counts a lost answer with count and, for a send that SQS accepted,
// records its messages.
func (p *Proxy) lose(svc service, op string, sent []byte, a *answer, count func(*Stats)) {
	var lost []LostEntry
	if svc == serviceSQS && (op == "SendMessage" || op == "SendMessageBatch") && a.status == http.StatusOK {
		var err error
		if lost, err = lostEntries(op, sent, a.body); err != nil {
			p.log.Warn("faultproxy: cannot record lost answer", "op", op, "err", err)
		}
	}
	p.mu.Lock()
	count(&p.stats)
	p.lost = append(p.lost, lost...)
	p.mu.Unlock()
}

// answer is an upstream answer, read whole so that it can be changed, cut
// or dropped.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// hopByHop are the headers that belong to one connection and are not
// passed on (RFC 9110, section 7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = slices.Clone(v)
	}
	for _, k := range hopByHop {
		dst.Del(k)
	}
}

// forward sends the request, with body, to the upstream and reads the
// answer. The upstream request does not end when its client goes, as on a
// remote server that got it: the proxy must learn whether it took effect to
// account for a lost answer. Close ends it.
func (p *Proxy) forward(r *http.Request, body []byte) (*answer, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	defer context.AfterFunc(p.closing, cancel)()
	uri := r.RequestURI // as sent, so that S3 keys keep their escaping
	if uri == "" || uri[0] != '/' {
		uri = r.URL.RequestURI()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeader(req.Header, r.Header)
	// The body is here already; waiting for 100 Continue would only
	// slow the upstream request down.
	req.Header.Del("Expect")
	req.Host = r.Host // part of the signature
	req.ContentLength = int64(len(body))
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (a *answer) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	copyHeader(h, a.header)
	if _, ok := a.header["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffing: the client gets what the upstream sent
	}
	// A HEAD answer keeps the upstream's Content-Length, the length of
	// the body a GET would get.
	if r.Method != http.MethodHead && a.status != http.StatusNoContent && a.status != http.StatusNotModified {
		h.Set("Content-Length", fmt.Sprint(len(a.body)))
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// reset closes the client's connection with a TCP RST, without an answer.
func reset(w http.ResponseWriter) {
	conn, _, err := hijack(w)
	if err != nil {
		// The server then closes the connection without an answer.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		// Linger 0 makes Close send RST instead of FIN, as a crashed
		// or overloaded peer does.
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// cut sends a's status and headers, with the full Content-Length, and its
// first n bytes of body, then closes the connection. The close is a FIN,
// not a RST: a RST can make the kernel drop data not yet read, and the
// client must see a short body, not a reset before any answer.
func cut(w http.ResponseWriter, a *answer, n int) {
	conn, buf, err := hijack(w)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	h := http.Header{}
	copyHeader(h, a.header)
	h.Set("Content-Length", fmt.Sprint(len(a.body)))
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", a.status, http.StatusText(a.status))
	_ = h.Write(buf)
	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(a.body[:n])
	_ = buf.Flush()
}

func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("faultproxy: connection cannot be hijacked")
	}
	return hj.Hijack()
}
