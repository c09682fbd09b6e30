// Command planbench measures how fanout plans a very large prefix: the real
// fanout bootstrap, under aws-lambda-rie with a short function timeout,
// plans a listing of a million keys (by default) across as many
// invocations as it takes. The first is the request; each after it is the
// planning step the one before queued on the work queue, delivered as an
// SQS event. It prints one table row per dataset: keys, invocations, keys
// planned per second, chunk tasks and SQS requests to the work queue, the
// function's peak RSS, and a check that every key is in exactly one chunk
// task.
//
// The listing is synthetic and served by this program on 127.0.0.1
// (ListObjectsV2, 1,000 keys a page, and GetObject for the headers of
// CSV objects, planned split at line ends so that each header is read);
// nothing is stored. SQS is the stand-in that tools/with-local-aws starts,
// behind a loopback proxy here that counts the function's requests. The
// work queue is drained while planning goes on, and the tasks are
// counted, not run. `make planbench` runs it:
//
//	tools/with-local-aws go run ./tools/planbench [-keys 1000000] [-csv-keys 100000] [-timeout 10s]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// workARN is the event source ARN put in the SQS events.
const workARN = "arn:aws:sqs:us-east-1:000000000000:planbench-work"

func main() {
	keys := flag.Int("keys", 1_000_000, "JSON Lines keys to plan (no reads per object)")
	csvKeys := flag.Int("csv-keys", 100_000, "CSV keys to plan, whose headers are read; 0 skips them")
	timeout := flag.Duration("timeout", 10*time.Second, "the function's timeout (AWS_LAMBDA_FUNCTION_TIMEOUT), whole seconds")
	perDay := flag.Int("per-day", 10_000, "keys per date=YYYY-MM-DD partition")
	drainers := flag.Int("drainers", 3, "goroutines draining the work queue")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cases := []keySpace{{root: "t/", ext: "jsonl", n: *keys, perDay: *perDay}}
	if *csvKeys > 0 {
		cases = append(cases, keySpace{root: "c/", ext: "csv", n: *csvKeys, perDay: *perDay})
	}
	if err := run(ctx, cases, *timeout, *drainers, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "planbench: %v\n", err)
		os.Exit(1)
	}
}

// env is what the bench needs from tools/with-local-aws.
type env struct{ sqs, rie string }

func lookupEnv() (env, error) {
	e := env{sqs: os.Getenv(localaws.EnvSQS), rie: os.Getenv(localaws.EnvRIE)}
	if e.sqs == "" || e.rie == "" {
		return e, fmt.Errorf("%s and %s must be set: run it with tools/with-local-aws (make planbench)", localaws.EnvSQS, localaws.EnvRIE)
	}
	return e, nil
}

func run(ctx context.Context, cases []keySpace, timeout time.Duration, drainers int, out io.Writer) error {
	if timeout < time.Second || timeout%time.Second != 0 {
		return fmt.Errorf("timeout %s: want whole seconds, at least 1s", timeout)
	}
	e, err := lookupEnv()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "planbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "planbench: building functions/fanout")
	bootstrap, err := rie.BuildBootstrap(dir, "./functions/fanout")
	if err != nil {
		return err
	}
	ls := &listingServer{buckets: map[string]keySpace{}}
	for _, c := range cases {
		ls.buckets[bucketOf(c)] = c
	}
	s3URL, stopS3, err := serve(ls)
	if err != nil {
		return err
	}
	defer stopS3()
	counter, err := newSQSCounter(e.sqs)
	if err != nil {
		return err
	}
	sqsProxy, stopProxy, err := serve(counter)
	if err != nil {
		return err
	}
	defer stopProxy()
	sqsc := sqs.NewFromConfig(localaws.Config(e.sqs))

	var rows []row
	for _, c := range cases {
		b := bench{space: c, timeout: timeout, drainers: drainers, sqsc: sqsc, counter: counter, listing: ls,
			rieBin: e.rie, bootstrap: bootstrap, s3URL: s3URL, sqsProxy: sqsProxy}
		r, err := b.run(ctx)
		if err != nil {
			return fmt.Errorf("%s keys: %w", c.ext, err)
		}
		rows = append(rows, r)
	}
	printTable(out, rows)
	return nil
}

func bucketOf(s keySpace) string { return "planbench-" + s.ext }

// serve serves h on a free 127.0.0.1 port.
func serve(h http.Handler) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(l)
	return "http://" + l.Addr().String(), func() { srv.Close() }, nil
}

// bench is one dataset's run.
type bench struct {
	space     keySpace
	timeout   time.Duration
	drainers  int
	sqsc      *sqs.Client
	counter   *sqsCounter
	listing   *listingServer
	rieBin    string
	bootstrap string
	s3URL     string
	sqsProxy  string
}

// invocation is one invocation of the function, as measured here and as
// its summary line reports it.
type invocation struct {
	kind    string
	wall    time.Duration
	summary fanouthandler.Invocation
}

// row is one line of the table.
type row struct {
	space       keySpace
	timeout     time.Duration
	invocations []invocation
	wall        time.Duration // first invocation to the last task drained
	ops         map[string]opCount
	peakRSS     int64
	cpu         time.Duration
	lists, gets int64
	check       checkResult
	extraSteps  int
	rieReport   string
}

func (b *bench) run(ctx context.Context) (row, error) {
	r := row{space: b.space, timeout: b.timeout}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	work, err := b.createQueue(ctx, "planbench-work-"+suffix)
	if err != nil {
		return r, err
	}
	defer b.sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(work)})
	target, err := b.createQueue(ctx, "planbench-target-"+suffix)
	if err != nil {
		return r, err
	}
	defer b.sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(target)})

	sums := &summaries{}
	fn, err := rie.Run(b.rieBin, b.bootstrap, []string{
		"AWS_ENDPOINT_URL_S3=" + b.s3URL, settings.S3PathStyle.Env + "=true",
		"AWS_ENDPOINT_URL_SQS=" + b.sqsProxy,
		"TARGET_QUEUE_URL=" + target, "WORK_QUEUE_URL=" + work,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(b.timeout/time.Second)),
		// CSV objects split at line ends, whose headers planning reads (read
		// whole, they would be planned without a GET).
		settings.CSVNoQuotedNewlines.Env + "=true",
	}, sums)
	if err != nil {
		return r, err
	}
	defer fn.Close()

	// Drain the work queue while planning goes on: tasks are counted,
	// planning steps handed to the loop below.
	t := newTally(b.space)
	steps := make(chan types.Message, 16)
	dctx, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	var drainWG sync.WaitGroup
	drainErr := make(chan error, b.drainers)
	for range b.drainers {
		drainWG.Go(func() {
			if err := drain(dctx, b.sqsc, work, t, steps); err != nil && dctx.Err() == nil {
				drainErr <- err
				stopDrain()
			}
		})
	}

	b.counter.take()
	lists0, gets0 := b.listing.lists.Load(), b.listing.gets.Load()
	fmt.Fprintf(os.Stderr, "planbench: %s: planning %d keys with a %s timeout\n", b.space.ext, b.space.n, b.timeout)
	start := time.Now()
	pid := 0
	invoke := func(kind string, payload any) (json.RawMessage, error) {
		t0 := time.Now()
		answer, err := fn.Invoke(ctx, payload)
		if err != nil {
			return answer, fmt.Errorf("%s invocation %d: %w\n%s", kind, len(r.invocations)+1, err, tail(fn.Logs(), 20))
		}
		inv := invocation{kind: kind, wall: time.Since(t0)}
		s, ok := sums.wait(len(r.invocations)+1, 10*time.Second)
		if !ok {
			return answer, fmt.Errorf("%s invocation %d: no summary line in the function's output", kind, len(r.invocations)+1)
		}
		inv.summary = s
		r.invocations = append(r.invocations, inv)
		// The function process lives on between invocations, so that
		// its VmHWM is its peak so far; a new process (after a crash or
		// a timeout) starts a new peak.
		if pid == 0 || !alive(pid, b.bootstrap) {
			if pid, err = findProcess(b.bootstrap); err != nil {
				return answer, err
			}
		}
		if rss, cpu, err := procStats(pid); err == nil {
			r.peakRSS, r.cpu = max(r.peakRSS, rss), cpu
		}
		fmt.Fprintf(os.Stderr, "planbench: %s: invocation %d (%s): %d keys in %s, %d tasks queued, continued %v\n",
			b.space.ext, len(r.invocations), kind, s.Objects, inv.wall.Round(time.Millisecond), s.TasksQueued, s.PlanContinued)
		return answer, nil
	}

	answer, err := invoke("request", map[string]any{"bucket": bucketOf(b.space), "prefix": b.space.root, "runId": "planbench-" + b.space.ext})
	if err != nil {
		return r, err
	}
	var rep engine.Report
	if err := json.Unmarshal(answer, &rep); err != nil {
		return r, fmt.Errorf("request answered %s: %w", answer, err)
	}
	continued := rep.PlanContinued
	for continued {
		var m types.Message
		select {
		case m = <-steps:
		case err := <-drainErr:
			return r, err
		case <-time.After(5 * time.Minute):
			return r, errors.New("no planning step on the work queue after 5 minutes")
		case <-ctx.Done():
			return r, ctx.Err()
		}
		answer, err := invoke("step", esm.Event([]types.Message{m}, workARN))
		if err != nil {
			return r, err
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(answer, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
			return r, fmt.Errorf("planning step answered %s (%v)\n%s", answer, err, tail(fn.Logs(), 20))
		}
		continued = r.invocations[len(r.invocations)-1].summary.PlanContinued
	}
	r.ops = b.counter.take()
	r.lists, r.gets = b.listing.lists.Load()-lists0, b.listing.gets.Load()-gets0

	// The rest of the tasks: the queue is empty when nothing is visible
	// or in flight twice in a row.
	for empty := 0; empty < 2; {
		select {
		case err := <-drainErr:
			return r, err
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Second):
		}
		vis, inflight, err := localaws.Depth(ctx, b.sqsc, work)
		if err != nil {
			return r, err
		}
		if vis+inflight == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	r.wall = time.Since(start)
	stopDrain()
	drainWG.Wait()
	r.extraSteps = len(steps)
	r.check = t.result()
	r.rieReport = sums.lastReport()
	return r, nil
}

func (b *bench) createQueue(ctx context.Context, name string) (string, error) {
	out, err := b.sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": "20"}})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// drain receives and deletes the work queue's messages until ctx ends:
// chunk tasks are added to t, planning steps sent to steps.
func drain(ctx context.Context, c *sqs.Client, url string, t *tally, steps chan<- types.Message) error {
	for ctx.Err() == nil {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
			body := aws.ToString(m.Body)
			task, err := worktask.Parse(body)
			if errors.Is(err, worktask.ErrNotTask) {
				if _, perr := worktask.ParsePlan(body); perr == nil {
					select {
					case steps <- m:
					case <-ctx.Done():
						return nil
					}
					continue
				}
			}
			if err != nil {
				return fmt.Errorf("work queue message %.200s: %w", body, err)
			}
			ch := task.Chunk
			t.add(ch.Key, aws.ToString(m.MessageId), ch.Index == 0 && ch.Count == 1 && ch.Start == 0 && ch.End == ch.Size)
		}
		if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	return nil
}

// summaries collects, from the function's output, its summary lines (one
// per invocation) and the emulator's REPORT lines.
type summaries struct {
	mu      sync.Mutex
	partial []byte
	lines   []fanouthandler.Invocation
	reports []string
}

func (s *summaries) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := s.partial[:i]
		if bytes.Contains(line, []byte(`"fanout invocation"`)) {
			var l struct {
				Summary fanouthandler.Invocation `json:"summary"`
			}
			if json.Unmarshal(line, &l) == nil {
				s.lines = append(s.lines, l.Summary)
			}
		}
		if j := bytes.Index(line, []byte("REPORT RequestId")); j >= 0 {
			s.reports = append(s.reports, string(line[j:]))
		}
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

// wait returns the n-th summary line, waiting for it at most timeout: the
// output comes through a pipe, and may arrive after the answer.
func (s *summaries) wait(n int, timeout time.Duration) (fanouthandler.Invocation, bool) {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		if len(s.lines) >= n {
			l := s.lines[n-1]
			s.mu.Unlock()
			return l, true
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return fanouthandler.Invocation{}, false
		}
	}
}

func (s *summaries) lastReport() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reports) == 0 {
		return ""
	}
	return s.reports[len(s.reports)-1]
}

// findProcess returns the id of the process running the executable exe.
func findProcess(exe string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err == nil && alive(pid, exe) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process runs %s", exe)
}

func alive(pid int, exe string) bool {
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && got == exe
}

// procStats returns the peak RSS (VmHWM) and the CPU time (user + system)
// of process pid.
func procStats(pid int) (rss int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, 0, err
			}
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return rss, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintf(w, "\nfanout's bootstrap under aws-lambda-rie; listing served on 127.0.0.1 (1,000 keys a page); SQS is fauxqs;\n"+
		"keys/s are keys planned per second of invocation; tasks are counted off the work queue, not run\n\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keys\tformat\ttimeout\tinvocations\tkeys/s overall\tkeys/s per invocation (min-median-max)\twall\t"+
		"chunk tasks\tSendMessageBatch\tbilled units\tS3 LIST / GET\tpeak RSS\tCPU µs/key\texactly once\t")
	for _, r := range rows {
		var busy time.Duration
		var rates []float64
		for _, inv := range r.invocations {
			busy += inv.wall
			rates = append(rates, float64(inv.summary.Objects)/inv.wall.Seconds())
		}
		full := rates
		if len(full) > 1 {
			full = full[:len(full)-1] // the last invocation ends with the listing, not the timeout
		}
		slices.Sort(full)
		var keys, queued int
		for _, inv := range r.invocations {
			keys += inv.summary.Objects
			queued += inv.summary.TasksQueued
		}
		send := r.ops["SendMessageBatch"]
		check := "PASS"
		if !r.check.Pass() || r.extraSteps > 0 || keys != r.space.n {
			check = "FAIL"
		}
		check += fmt.Sprintf(" (missing %d, doubled %d)", r.check.Missing, r.check.Doubled)
		if r.check.Unknown+r.check.Partial+r.extraSteps > 0 {
			check += fmt.Sprintf(" unknown %d, partial %d, extra steps %d", r.check.Unknown, r.check.Partial, r.extraSteps)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d (1 + %d steps)\t%.0f\t%.0f-%.0f-%.0f\t%s\t%d\t%d\t%d\t%d / %d\t%.0f MiB\t%.1f\t%s\t\n",
			r.space.n, r.space.ext, r.timeout, len(r.invocations), len(r.invocations)-1,
			float64(keys)/busy.Seconds(), full[0], full[len(full)/2], full[len(full)-1], r.wall.Round(time.Second),
			r.check.Tasks, send.requests, send.units, r.lists, r.gets, float64(r.peakRSS)/(1<<20),
			float64(r.cpu.Microseconds())/float64(keys), check)
		if queued != r.check.Tasks {
			fmt.Fprintf(w, "note: the function reported %d tasks queued, %d were received\n", queued, r.check.Tasks)
		}
	}
	tw.Flush()
	for _, r := range rows {
		fmt.Fprintf(w, "\n%s: SQS requests of the function by operation:", r.space.ext)
		for _, op := range slices.Sorted(maps.Keys(r.ops)) {
			oc := r.ops[op]
			fmt.Fprintf(w, " %s=%d (%.1f KiB a request)", op, oc.requests, float64(oc.bytes)/float64(max(oc.requests, 1))/1024)
		}
		fmt.Fprintf(w, "; redelivered messages %d\n", r.check.Redelivered)
		if r.rieReport != "" {
			fmt.Fprintf(w, "%s: aws-lambda-rie's last %s\n", r.space.ext, r.rieReport)
		}
	}
}
