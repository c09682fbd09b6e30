package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

const (
	bucket = "latencybench"
	prefix = "data/"
)

// env is what every measurement shares: the CLI binary, the S3 child, the
// two proxies and the clients that set up and tear down queues directly.
type env struct {
	o            options
	dir, bin     string
	s3           *localaws.S3Child
	sqsc         *sqs.Client
	s3p, sqsp    latencyProxy
	notification string // the SQS event naming every object, for ingest
	// sweeps are the settings tried beside the defaults, by mode.
	sweeps map[string][]setting
	log    io.Writer
	seq    int
}

// setUp builds the CLI, starts the S3 child and the proxies and uploads
// the dataset.
func setUp(ctx context.Context, o options, log io.Writer) (_ *env, err error) {
	sqsURL := os.Getenv(localaws.EnvSQS)
	if sqsURL == "" {
		return nil, fmt.Errorf("%s is not set: run it with tools/with-local-aws (make bench-latency)", localaws.EnvSQS)
	}
	e := &env{o: o, log: log, sqsc: sqs.NewFromConfig(localaws.Config(sqsURL))}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.dir, err = os.MkdirTemp("", "latencybench-"); err != nil {
		return nil, err
	}
	if e.bin = o.bin; e.bin == "" {
		e.bin = filepath.Join(e.dir, "s3sqs")
		build := exec.CommandContext(ctx, "go", "build", "-o", e.bin, "github.com/s3sqs/s3sqs/cmd/s3sqs")
		build.Stdout, build.Stderr = log, log
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("building the CLI: %w", err)
		}
	}
	if e.sweeps, err = sweeps(ctx, e.bin, o); err != nil {
		return nil, err
	}
	if e.s3, err = localaws.RunS3Child(); err != nil {
		return nil, err
	}
	if e.s3p, err = newProxy(o.proxy, e.s3.URL); err != nil {
		return nil, err
	}
	if e.sqsp, err = newProxy(o.proxy, sqsURL); err != nil {
		return nil, err
	}
	if e.notification, err = upload(ctx, localaws.S3Client(e.s3.URL), o); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	for _, p := range []latencyProxy{e.s3p, e.sqsp} {
		if p != nil {
			p.Close()
		}
	}
	if e.s3 != nil {
		e.s3.Stop()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// upload writes the dataset and returns a Lambda SQS event with one
// ObjectCreated notification per object, as s3ingest would get it.
func upload(ctx context.Context, c *s3.Client, o options) (string, error) {
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return "", err
	}
	var ev events.SQSEvent
	for k := range o.objects {
		key := fmt.Sprintf("%sobject-%03d.jsonl", prefix, k)
		err := localaws.UploadLines(ctx, c, bucket, key, func(yield func(string) bool) {
			for i := range o.records {
				if !yield(jsonRecord(k*o.records+i, o.record)) {
					return
				}
			}
		})
		if err != nil {
			return "", err
		}
		obj, err := dataset.Head(ctx, c, bucket, key, "")
		if err != nil {
			return "", err
		}
		body, err := s3event.Encoder{}.Encode(obj.Created(time.Now()))
		if err != nil {
			return "", err
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", k), EventSource: "aws:sqs", Body: string(body)})
	}
	b, err := json.Marshal(ev)
	return string(b), err
}

// jsonRecord is record i, a JSON object of size bytes.
func jsonRecord(i, size int) string {
	head := fmt.Sprintf(`{"id":%d,"user":"u%06d","event":"page_view","text":"record %d","pad":"`, i, i%1000, i)
	return head + strings.Repeat("p", max(0, size-len(head)-2)) + `"}`
}

// sweeps are the settings each mode is tried at beside its defaults: what
// -sweep says, or the sweep that suits the CLI at bin (see the command's
// doc). A CLI with -fixed-in-flight tries each setting with it.
func sweeps(ctx context.Context, bin string, o options) (map[string][]setting, error) {
	fanoutHelp, err := help(ctx, bin, "fanout")
	if err != nil {
		return nil, err
	}
	ingestHelp, err := help(ctx, bin, "ingest")
	if err != nil {
		return nil, err
	}
	fixed := strings.Contains(fanoutHelp, "-fixed-in-flight")
	ingestTunes := strings.Contains(ingestHelp, "-fixed-in-flight") && strings.Contains(ingestHelp, "-read-concurrency")
	sweep := o.sweep
	if !o.swept {
		sweep = []setting{{16, 4, false}, {64, 4, false}, {128, 4, false}, {16, 8, false}, {64, 8, false}, {128, 8, false}}
		if fixed {
			sweep = []setting{{16, 4, false}, {64, 4, false}, {128, 4, false}, {256, 4, false}, {16, 8, false}, {64, 8, false}, {128, 8, false}, {256, 8, false}}
		}
	}
	out := map[string][]setting{}
	for _, m := range []string{modeRecord, modeChunk, modeIngest} {
		if m == modeIngest && !ingestTunes {
			continue // s3sqs ingest has no flag to tune
		}
		for _, s := range sweep {
			s.fixed = fixed
			out[m] = append(out[m], s)
		}
	}
	return out, nil
}

// help is what `bin cmd -h` prints.
func help(ctx context.Context, bin, cmd string) (string, error) {
	var b bytes.Buffer
	c := exec.CommandContext(ctx, bin, cmd, "-h")
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return "", fmt.Errorf("%s %s -h: %w", bin, cmd, err)
	}
	if !strings.Contains(b.String(), "-max-in-flight") && cmd == "fanout" {
		return "", fmt.Errorf("%s fanout -h lists no -max-in-flight: is it the s3sqs CLI?\n%s", bin, tail(b.String()))
	}
	return b.String(), nil
}

// result is one run of the CLI.
type result struct {
	setting setting
	records int64
	wall    time.Duration
	peakRSS int64 // bytes
}

func (r result) rate() float64 { return float64(r.records) / r.wall.Seconds() }

// measureRow measures mode at lat at the defaults and at every setting of
// sweep, o.repeat times each in rounds, and keeps each setting's median.
func (e *env) measureRow(ctx context.Context, mode string, lat time.Duration, sweep []setting) (row, error) {
	settings := append([]setting{{}}, sweep...)
	runs := make([][]result, len(settings))
	for range e.o.repeat {
		for i, s := range settings {
			res, err := e.measure(ctx, mode, lat, s)
			if err != nil {
				return row{}, err
			}
			runs[i] = append(runs[i], res)
		}
	}
	r := row{mode: mode, latency: lat, defaults: median(runs[0])}
	if len(sweep) == 0 {
		return r, nil
	}
	// The best of the defaults and the sweep, so defaults / best is at
	// most 1.
	best := r.defaults
	for _, rs := range runs[1:] {
		if m := median(rs); m.rate() > best.rate() {
			best = m
		}
	}
	r.best = &best
	return r, nil
}

// median is the run of rs with the median rate (the lower of the middle
// two for an even count), with the highest peak RSS of them all.
func median(rs []result) result {
	sorted := slices.SortedFunc(slices.Values(rs), func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
	m := sorted[(len(sorted)-1)/2]
	for _, r := range rs {
		m.peakRSS = max(m.peakRSS, r.peakRSS)
	}
	return m
}

// measure runs the CLI once, to a new queue, with every request delayed
// by lat, and checks that every record was sent.
func (e *env) measure(ctx context.Context, mode string, lat time.Duration, s setting) (result, error) {
	for _, p := range []latencyProxy{e.s3p, e.sqsp} {
		if err := p.SetDelay(lat); err != nil {
			return result{}, err
		}
	}
	e.seq++
	q, err := e.sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("latencybench-%d-%d", time.Now().UnixNano(), e.seq))})
	if err != nil {
		return result{}, err
	}
	defer e.sqsc.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	args := e.args(mode, aws.ToString(q.QueueUrl), s)
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), localaws.EnvS3+"="+e.s3p.URL(), localaws.EnvSQS+"="+e.sqsp.URL(), "AWS_ENDPOINT_URL=")
	if mode == modeIngest {
		cmd.Stdin = strings.NewReader(e.notification)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	name := fmt.Sprintf("%s %v %s", mode, lat, s.label(mode))
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err = cmd.Wait()
	res := result{setting: s, wall: time.Since(t0), peakRSS: peak()}
	if err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", name, err, tail(stderr.String()))
	}
	if res.records, err = sent(mode, stdout.Bytes(), stderr.String()); err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	if want := int64(e.o.objects * e.o.records); res.records != want {
		return result{}, fmt.Errorf("%s: %d of %d records sent", name, res.records, want)
	}
	fmt.Fprintf(e.log, "latencybench: %s: %.0f records/s, peak RSS %.1f MiB\n", name, res.rate(), mib(res.peakRSS))
	return res, nil
}

// args is the CLI's command line for mode.
func (e *env) args(mode, queueURL string, s setting) []string {
	failures := filepath.Join(e.dir, fmt.Sprintf("failures-%d.jsonl", e.seq))
	if mode == modeIngest {
		return append([]string{"ingest", "-output-queue-url", queueURL, "-s3-path-style", "-failure-file", failures}, s.flags(mode)...)
	}
	a := []string{"fanout", "-bucket", bucket, "-prefix", prefix, "-mode", mode, "-target-queue-url", queueURL,
		"-s3-path-style", "-failure-file", failures, "-progress-interval", "1h"}
	return append(a, s.flags(mode)...)
}

var ingestSent = regexp.MustCompile(`records read, (\d+) sent, (\d+) failed`)

// sent is the number of records the CLI reports it sent: from fanout's
// JSON report on stdout, or ingest's summary line on stderr.
func sent(mode string, stdout []byte, stderr string) (int64, error) {
	if mode == modeIngest {
		m := ingestSent.FindStringSubmatch(stderr)
		if m == nil {
			return 0, fmt.Errorf("no summary line in ingest's output:\n%s", tail(stderr))
		}
		return strconv.ParseInt(m[1], 10, 64)
	}
	var rep struct {
		RecordsSent int64 `json:"recordsSent"`
	}
	if err := json.Unmarshal(stdout, &rep); err != nil {
		return 0, fmt.Errorf("fanout's report: %w", err)
	}
	return rep.RecordsSent, nil
}

// tail is the end of a process's output, for an error.
func tail(s string) string {
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// watchPeakRSS reads the VmHWM of process pid every 20 ms until the
// returned function is called, after the process has ended, and that
// function returns the highest value seen, in bytes. The rusage of the
// ended process cannot serve: Linux carries the RSS high-water mark over
// exec, and Go starts a child with the parent's memory (CLONE_VM), so its
// ru_maxrss is this process's peak when it is larger. A peak reached in
// the process's last 20 ms can be missed.
func watchPeakRSS(pid int) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	read := func() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil && kb*1024 > peak.Load() {
					peak.Store(kb * 1024)
				}
			}
		}
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}
