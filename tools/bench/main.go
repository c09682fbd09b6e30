// Command bench measures, in one run and one table, what each path costs
// per record on this machine: the CPU time of this process (user + system)
// per record and the records sent per second, for pkg/sqsbatch alone on
// ready-made bodies (with and without the three attributes fanout adds to
// every message), fanout in record and chunk mode, and s3ingest through
// its handler, with 200-byte and 1 KiB records in JSON Lines and CSV.
//
// S3 is served by a copy of this program in a child process, and SQS by
// the stand-in that tools/with-local-aws starts, so that the CPU measured
// is the client's alone. `make bench` runs it:
//
//	tools/with-local-aws go run ./tools/bench [-records 100000] [-inflight 16] [-cpuprofile file]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

const bucket = "bench"

func main() {
	if localaws.ServeS3Child() {
		return
	}
	records := flag.Int("records", 100_000, "records per case")
	inFlight := flag.Int("inflight", 0, "SendMessageBatch requests in flight, fixed (default: the sender's, which size themselves)")
	only := flag.String("only", "", "run only the cases whose name contains this")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the measured runs to `file`")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *records, *inFlight, *only, *profile, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// result is one row of the table.
type result struct {
	path, format string
	size         int
	records      int
	cpu, wall    time.Duration
	requests     int64
	// s3cpu is the S3 stand-in's CPU time: on 2 cores it takes from the
	// client's records/s what a Lambda function does not pay.
	s3cpu time.Duration
	// allocs are the heap allocations this process made in the case.
	allocs uint64
}

func run(ctx context.Context, n, inFlight int, only, profile string, out io.Writer) error {
	s3URL, s3PID, stopS3, err := startS3()
	if err != nil {
		return err
	}
	defer stopS3()
	s3c := localaws.S3Client(s3URL)
	sqsURL := os.Getenv(localaws.EnvSQS)
	if sqsURL == "" {
		return fmt.Errorf("%s is not set: run it with tools/with-local-aws (make bench)", localaws.EnvSQS)
	}
	sqsc := sqs.NewFromConfig(localaws.Config(sqsURL))
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return err
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("bench-%d", time.Now().UnixNano()))})
	if err != nil {
		return err
	}
	target := aws.ToString(q.QueueUrl)
	defer sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	send := sqsbatch.Options{MaxInFlight: inFlight, FixedInFlight: inFlight > 0}

	type bench struct {
		path string
		run  func(ctx context.Context, key string, size int) (int64, error)
	}
	// The sender alone sends ready-made bodies, built before it is
	// measured.
	var bodies, attributed []sqsbatch.Entry
	bodiesOf := func(size int) {
		bodies = make([]sqsbatch.Entry, n)
		attributed = make([]sqsbatch.Entry, n)
		obj := dataset.Object{Bucket: bucket, Key: fmt.Sprintf("records-%d.jsonl", size), ETag: "0123456789abcdef0123456789abcdef"}
		for i := range bodies {
			bodies[i] = sqsbatch.Entry{ID: fmt.Sprint(i), Body: jsonRecord(i, size)}
			// The attributes fanout adds to every message.
			attributed[i] = bodies[i]
			attributed[i].Attributes = map[string]sqstypes.MessageAttributeValue{
				engine.AttrRecordID: {DataType: aws.String("String"), StringValue: aws.String(engine.RecordID(obj, int64(i)))},
				engine.AttrSource:   {DataType: aws.String("String"), StringValue: aws.String(obj.URI())},
				engine.AttrVersion:  {DataType: aws.String("String"), StringValue: aws.String(obj.ETag)},
			}
		}
	}
	paths := []bench{
		{"sqsbatch alone", sendRun(sqsc, target, send, &bodies, n)},
		{"sqsbatch + attributes", sendRun(sqsc, target, send, &attributed, n)},
		{"fanout record", fanoutRun(s3c, sqsc, target, send, worktask.ModeRecord, n)},
		{"fanout chunk", fanoutRun(s3c, sqsc, target, send, worktask.ModeChunk, n)},
		{"s3ingest", ingestRun(s3c, sqsc, target, send, n)},
	}

	var results []result
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	warm := true
	for _, size := range []int{200, 1024} {
		for _, format := range []string{"jsonl", "csv"} {
			key := fmt.Sprintf("records-%d.%s", size, format)
			if err := upload(ctx, s3c, key, format, size, n); err != nil {
				return err
			}
			bodiesOf(size)
			for _, p := range paths {
				name := fmt.Sprintf("%s %s %d", p.path, format, size)
				if strings.HasPrefix(p.path, "sqsbatch") && format == "csv" || only != "" && !strings.Contains(name, only) {
					continue
				}
				if warm {
					// The stand-in's first minute is slower (node's JIT,
					// connections): warm it up outside the table.
					if _, err := p.run(ctx, key, size); err != nil {
						return err
					}
					purge(ctx, sqsc, target)
					warm = false
				}
				runtime.GC()
				var mem0, mem1 runtime.MemStats
				runtime.ReadMemStats(&mem0)
				cpu0, s30, wall0 := cpuTime(), childCPU(s3PID), time.Now()
				requests, err := p.run(ctx, key, size)
				r := result{path: p.path, format: format, size: size, records: n, cpu: cpuTime() - cpu0, wall: time.Since(wall0),
					requests: requests, s3cpu: childCPU(s3PID) - s30}
				runtime.ReadMemStats(&mem1)
				r.allocs = mem1.Mallocs - mem0.Mallocs
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				results = append(results, r)
				fmt.Fprintf(os.Stderr, "bench: %s: %.1f µs/record, %.0f records/s\n", name, r.perRecord(), r.rate())
				purge(ctx, sqsc, target)
			}
		}
	}
	printTable(out, results, inFlight)
	return nil
}

func (r result) perRecord() float64 { return float64(r.cpu.Microseconds()) / float64(r.records) }
func (r result) rate() float64      { return float64(r.records) / r.wall.Seconds() }

func printTable(w io.Writer, results []result, inFlight int) {
	inFlightText := "requests in flight sized by the sender"
	if inFlight > 0 {
		inFlightText = fmt.Sprintf("%d requests in flight", inFlight)
	}
	fmt.Fprintf(w, "\n%d records a case, %s, GOMAXPROCS=%d; CPU is this process's user+system time;\n"+
		"the S3 stand-in runs beside it on the same cores and SQS's (fauxqs) too\n\n", results[0].records, inFlightText, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tformat\trecord\tCPU µs/record\tvs sqsbatch\tallocs/record\trecords/s\trequests\tS3 stand-in µs/record\t")
	base := map[int]float64{}
	for _, r := range results {
		if r.path == "sqsbatch alone" {
			base[r.size] = r.perRecord()
		}
	}
	for _, r := range results {
		vs := ""
		if b, ok := base[r.size]; ok && !strings.HasPrefix(r.path, "sqsbatch alone") {
			vs = fmt.Sprintf("%+.1f µs", r.perRecord()-b)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d B\t%.1f\t%s\t%.1f\t%.0f\t%d\t%.1f\t\n", r.path, r.format, r.size, r.perRecord(), vs,
			float64(r.allocs)/float64(r.records), r.rate(), r.requests, float64(r.s3cpu.Microseconds())/float64(r.records))
	}
	tw.Flush()
}

func check(err error, sent, want int) error {
	if err == nil && sent != want {
		err = fmt.Errorf("%d of %d sent", sent, want)
	}
	return err
}

func sendRun(sqsc *sqs.Client, target string, send sqsbatch.Options, entries *[]sqsbatch.Entry, n int) func(context.Context, string, int) (int64, error) {
	return func(ctx context.Context, _ string, _ int) (int64, error) {
		s, err := sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: target}, send)
		if err != nil {
			return 0, err
		}
		res, err := s.SendEntries(ctx, *entries)
		return int64(res.Requests), check(err, res.Sent, n)
	}
}

func fanoutRun(s3c *s3.Client, sqsc *sqs.Client, target string, send sqsbatch.Options, mode worktask.Mode, n int) func(context.Context, string, int) (int64, error) {
	return func(ctx context.Context, key string, _ int) (int64, error) {
		r, err := engine.New(ctx, s3c, sqsc, engine.Options{Target: sqsbatch.Queue{URL: target}, Mode: mode, Planning: engine.Planning{InlineMaxBytes: 1 << 40}, Send: send})
		if err != nil {
			return 0, err
		}
		rep, err := r.Run(ctx, engine.Request{Source: dataset.Source{Bucket: bucket, Key: key}})
		if err == nil && rep.RecordsSent != int64(n) {
			err = fmt.Errorf("%d of %d records sent", rep.RecordsSent, n)
		}
		return rep.Requests, err
	}
}

func ingestRun(s3c *s3.Client, sqsc *sqs.Client, target string, send sqsbatch.Options, n int) func(context.Context, string, int) (int64, error) {
	return func(ctx context.Context, key string, _ int) (int64, error) {
		r, err := engine.New(ctx, s3c, sqsc, engine.Options{Target: sqsbatch.Queue{URL: target}, Send: send})
		if err != nil {
			return 0, err
		}
		obj, err := dataset.Head(ctx, s3c, bucket, key, "")
		if err != nil {
			return 0, err
		}
		h := ingesthandler.New(r, ingesthandler.Options{Partitions: recordjson.PartitionsString, FileMetadata: true})
		body, err := s3event.Encoder{}.Encode(obj.Created(time.Now()))
		if err != nil {
			return 0, err
		}
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", EventSource: "aws:sqs", Body: string(body)}}}
		resp, sum, err := h.HandleSummary(ctx, ev)
		if err == nil && (len(resp.BatchItemFailures) > 0 || sum.RecordsSent != int64(n)) {
			err = fmt.Errorf("%d of %d records sent, %d messages failed", sum.RecordsSent, n, len(resp.BatchItemFailures))
		}
		return sum.Requests, err
	}
}

// jsonRecord is record i, a JSON object of size bytes. It has no "value"
// field, so that fanout sends it whole, as the sender alone sends it.
func jsonRecord(i, size int) string {
	head := fmt.Sprintf(`{"id":%d,"user":"u%06d","event":"page_view","text":"record %d","pad":"`, i, i%1000, i)
	return head + strings.Repeat("p", max(0, size-len(head)-2)) + `"}`
}

// csvRecord is record i, a CSV row of size bytes under csvHeader.
func csvRecord(i, size int) string {
	head := fmt.Sprintf("%d,u%06d,page_view,record %d,", i, i%1000, i)
	return head + strings.Repeat("p", max(0, size-len(head)))
}

const csvHeader = "id,user,event,text,pad"

// upload writes n records of size bytes as one object.
func upload(ctx context.Context, c *s3.Client, key, format string, size, n int) error {
	return localaws.UploadLines(ctx, c, bucket, key, func(yield func(string) bool) {
		if format == "csv" && !yield(csvHeader) {
			return
		}
		for i := range n {
			rec := jsonRecord(i, size)
			if format == "csv" {
				rec = csvRecord(i, size)
			}
			if !yield(rec) {
				return
			}
		}
	})
}

func purge(ctx context.Context, c *sqs.Client, url string) {
	// fauxqs keeps what it holds in memory: empty it between cases.
	_, _ = c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)})
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startS3 runs a copy of this program as the S3 stand-in (see
// localaws.ServeS3Child) and returns its URL and process id.
func startS3() (string, int, func(), error) {
	child, err := localaws.RunS3Child()
	if err != nil {
		return "", 0, nil, err
	}
	return child.URL, child.PID, child.Stop, nil
}

// childCPU is the user and system CPU time of process pid so far, from
// /proc, in clock ticks of 10ms.
func childCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which ends with ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
