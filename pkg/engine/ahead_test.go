package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/internal/testenv/simulate"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// getLog records, in front of a proxy, when each GetObject arrived and when
// its answer's headers came back, by key.
type getLog struct {
	mu            sync.Mutex
	start, answer map[string][]time.Time
}

func (l *getLog) add(m map[string][]time.Time, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[key] = append(m[key], time.Now())
}

func (l *getLog) times(m map[string][]time.Time, key string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(m[key])
}

// recorder serves a reverse proxy to target that logs each GetObject.
func recorder(t *testing.T, target string) (*getLog, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l := &getLog{start: map[string][]time.Time{}, answer: map[string][]time.Time{}}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		get := r.Method == http.MethodGet && r.URL.Query().Get("x-id") == "GetObject"
		if get {
			l.add(l.start, key)
		}
		rp.ServeHTTP(&headerHook{ResponseWriter: w, hook: func() {
			if get {
				l.add(l.answer, key)
			}
		}}, r)
	}))
	t.Cleanup(srv.Close)
	return l, srv.URL
}

// headerHook calls hook as the answer's headers are written.
type headerHook struct {
	http.ResponseWriter
	hook func()
}

func (h *headerHook) WriteHeader(code int) {
	h.hook()
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerHook) Flush() { h.ResponseWriter.(http.Flusher).Flush() }

// wireStack is a runner that reads gofakes3 through a faultproxy that holds
// every GetObject's answer for delay, and sends to the SQS model.
type wireStack struct {
	s3     *s3.Client // straight to gofakes3
	gets   *getLog
	runner *engine.Runner
	sqs    *simulate.SQSModel
	target string
}

func newWireStack(t *testing.T, delay time.Duration, concurrency int) *wireStack {
	t.Helper()
	s3URL := localaws.FakeS3URL(t)
	slow := faultproxy.Start(t, s3URL, faultproxy.Options{Ops: []string{"GetObject"}, Rates: faultproxy.Rates{Delay: 1, DelayFor: delay}})
	gets, front := recorder(t, slow.URL())
	st := &wireStack{s3: localaws.S3Client(s3URL), gets: gets, sqs: simulate.NewSQSModel(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	if _, err := st.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("lake")}); err != nil {
		t.Fatal(err)
	}
	st.target = st.sqs.CreateQueue("target", 0, false)
	r, err := engine.New(t.Context(), localaws.S3Client(front), simulate.NewSQSClient(st.sqs), engine.Options{
		Target: sqsbatch.Queue{URL: st.target, MaxMessageSize: 1 << 20}, ChunkConcurrency: concurrency})
	if err != nil {
		t.Fatal(err)
	}
	st.runner = r
	return st
}

// put writes an object of n records and returns its task.
func (st *wireStack) put(t *testing.T, key string, n int) (worktask.Task, []string) {
	t.Helper()
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"key":"%s","n":%d}`, key, i))
	}
	err := localaws.UploadLines(t.Context(), st.s3, "lake", key, slices.Values(recs))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dataset.Head(t.Context(), st.s3, "lake", key, "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := st.runner.Tasks(t.Context(), "run-"+key, obj, worktask.Overrides{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks of %s: %v (%v), want one", key, tasks, err)
	}
	return tasks[0], recs
}

// TestReadAheadOpensNextGET reads three objects one at a time behind a
// proxy that holds each GetObject's answer 300 ms: the second and third
// objects' GETs reach the proxy before the first one's answer has come
// back, so their first-byte waits overlap its own, and each object is
// still read with one GET (the GET opened ahead is the one its read uses),
// every record sent once.
func TestReadAheadOpensNextGET(t *testing.T) {
	st := newWireStack(t, 300*time.Millisecond, 1)
	var tasks []worktask.Task
	var want []string
	for _, key := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		task, recs := st.put(t, key, 20)
		tasks = append(tasks, task)
		want = append(want, recs...)
	}
	for i, res := range st.runner.RunTasks(t.Context(), tasks, 1) {
		if res.Err != nil || res.Continuation != nil || res.RecordsSent != 20 {
			t.Errorf("task %d: %+v, want its 20 records sent", i, res)
		}
	}
	var got []string
	for _, m := range st.sqs.Messages(st.target) {
		got = append(got, m.Body)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	firstAnswer := st.gets.times(st.gets.answer, "a.jsonl")
	if len(firstAnswer) != 1 {
		t.Fatalf("a.jsonl answered %d times, want once", len(firstAnswer))
	}
	for _, key := range []string{"b.jsonl", "c.jsonl"} {
		starts := st.gets.times(st.gets.start, key)
		if len(starts) != 1 {
			t.Errorf("%s: %d GETs, want one: the one opened ahead", key, len(starts))
			continue
		}
		if !starts[0].Before(firstAnswer[0]) {
			t.Errorf("%s's GET arrived %v after a.jsonl's answer: not opened ahead", key, starts[0].Sub(firstAnswer[0]))
		}
	}
}

// faultS3 breaks the reads of one key: its first GetObject's body breaks
// off after 50 bytes (cut), or every GetObject of it fails with err. It
// logs, in order, each GetObject's start and each body's close.
type faultS3 struct {
	engine.S3API
	key string
	cut bool
	err error

	mu     sync.Mutex
	events []string
	cuts   int
}

func (f *faultS3) log(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func (f *faultS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	key := aws.ToString(in.Key)
	f.log("get " + key)
	if key == f.key && f.err != nil {
		return nil, f.err
	}
	if key == "a.jsonl" {
		// a's read is the one the others are opened ahead of: it lasts
		// long enough for their GETs to start.
		time.Sleep(200 * time.Millisecond)
	}
	out, err := f.S3API.GetObject(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	cut := key == f.key && f.cut && f.cuts == 0
	f.cuts += map[bool]int{true: 1}[cut]
	f.mu.Unlock()
	body := out.Body
	if cut {
		body = &brokenBody{r: io.LimitReader(out.Body, 50), c: out.Body}
	}
	out.Body = s3fault.OnClose(body, func() { f.log("close " + key) })
	return out, nil
}

// brokenBody hands out what r holds, then fails as a connection reset.
type brokenBody struct {
	r io.Reader
	c io.Closer
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *brokenBody) Close() error { return b.c.Close() }

// TestReadAheadFailsAsARead reads three objects one at a time, b's read
// opened ahead while a is read, with b's read broken: its body breaking
// off, the object gone, or it changed since it was planned. b's task ends
// as the same task ends run alone (RunTasks of one task, which opens nothing ahead):
// the same result and the same records on the target.
func TestReadAheadFailsAsARead(t *testing.T) {
	tests := []struct {
		name  string
		fault func(m *models, f *faultS3)
	}{
		{"body breaks off", func(m *models, f *faultS3) { f.cut = true }},
		{"object deleted", func(m *models, f *faultS3) { m.s3.Delete("lake", "b.jsonl") }},
		{"object changed", func(m *models, f *faultS3) { m.put("b.jsonl", 41) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ahead, aheadBodies, events := runFaulted(t, tt.fault, true)
			alone, aloneBodies, _ := runFaulted(t, tt.fault, false)
			if i, j := slices.Index(events, "get b.jsonl"), slices.Index(events, "close a.jsonl"); i < 0 || j < 0 || i > j {
				t.Errorf("events %q: b's GET did not start before a's read ended", events)
			}
			// b's broken read makes a GET of its own: a resume, or the
			// same GET again, which fails as the first did.
			if n := count(events, "get b.jsonl"); n != 2 {
				t.Errorf("events %q: %d GETs of b, want 2", events, n)
			}
			// A send's totals are charged to its group's first task, a.
			alone.Requests, alone.BytesSent, alone.Retries, alone.PeakInFlight, alone.Throttled = 0, 0, 0, 0, 0
			if diff := cmp.Diff(alone.Stats, ahead.Stats); diff != "" {
				t.Errorf("b's stats read ahead (-alone +ahead):\n%s", diff)
			}
			if errText(alone.Err) != errText(ahead.Err) || (alone.Continuation == nil) != (ahead.Continuation == nil) ||
				errors.Is(alone.Err, dataset.ErrNotFound) != errors.Is(ahead.Err, dataset.ErrNotFound) {
				t.Errorf("b read ahead: err %v, continuation %v; alone: err %v, continuation %v", ahead.Err, ahead.Continuation, alone.Err, alone.Continuation)
			}
			if diff := cmp.Diff(aloneBodies, aheadBodies); diff != "" {
				t.Errorf("b's records on the target (-alone +ahead):\n%s", diff)
			}
		})
	}
}

func count(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runFaulted plans a, b and c (45, 40 and 35 records), applies fault and
// runs b's task: with a and c, one at a time (ahead), or alone. It returns
// b's result, the records of b on the target and the GET log.
func runFaulted(t *testing.T, fault func(*models, *faultS3), ahead bool) (engine.TaskResult, []string, []string) {
	t.Helper()
	m := newModels(t)
	f := &faultS3{S3API: m.s3, key: "b.jsonl"}
	r := m.runner(t, engine.Options{ChunkConcurrency: 1}, f)
	var tasks []worktask.Task
	for i, key := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		m.put(key, 45-5*i) // each under the runner's 1 KiB chunks
		obj, err := dataset.Head(t.Context(), m.s3, "lake", key, "")
		if err != nil {
			t.Fatal(err)
		}
		ts, err := r.Tasks(t.Context(), "run", obj, worktask.Overrides{})
		if err != nil || len(ts) != 1 {
			t.Fatalf("tasks of %s: %v (%v), want one", key, ts, err)
		}
		tasks = append(tasks, ts[0])
	}
	fault(m, f)
	var res engine.TaskResult
	if ahead {
		res = r.RunTasks(t.Context(), tasks, 1)[1]
	} else {
		res = r.RunTasks(t.Context(), tasks[1:2], 0)[0]
	}
	var bodies []string
	for _, b := range m.bodies(m.target) {
		if strings.Contains(b, `"key":"b"`) {
			bodies = append(bodies, b)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return res, bodies, slices.Clone(f.events)
}

// TestReadAheadChunksUseTheirGET reads the chunks of one object, one at a
// time, with each later chunk's first GET opened ahead: the reads make as
// many GETs as the same chunks read alone, so every GET opened ahead is the
// one its read asked for (a ranged one from just before the chunk's start),
// and every record arrives once.
func TestReadAheadChunksUseTheirGET(t *testing.T) {
	m := newModels(t)
	want := m.put("big.jsonl", 200) // 4400 bytes: five chunks of 1 KiB
	slices.Sort(want)
	f := &faultS3{S3API: m.s3}
	r := m.runner(t, engine.Options{}, f)
	obj, err := dataset.Head(t.Context(), m.s3, "lake", "big.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := r.Tasks(t.Context(), "run", obj, worktask.Overrides{})
	if err != nil || len(tasks) < 4 {
		t.Fatalf("tasks %v (%v), want several", tasks, err)
	}
	f.events = nil // planning's own GET
	for i, res := range r.RunTasks(t.Context(), tasks, 1) {
		if res.Err != nil || res.Continuation != nil {
			t.Errorf("chunk %d: %+v", i, res)
		}
	}
	if diff := cmp.Diff(want, m.bodies(m.target)); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	ahead := count(f.events, "get big.jsonl")
	f.events = nil
	for _, task := range tasks {
		r.RunTasks(t.Context(), []worktask.Task{task}, 0)
	}
	if alone := count(f.events, "get big.jsonl"); ahead != alone {
		t.Errorf("%d GETs read ahead, %d alone: some GET opened ahead was not the one its read asked for", ahead, alone)
	}
}
