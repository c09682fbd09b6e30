package ingesthandler

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rclone/gofakes3"
	"github.com/rclone/gofakes3/s3mem"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// The benchmarks ingest S3INGEST_BENCH_OBJECTS objects (default 100; the
// closing-note figures use 1,000) of
// 1 MiB of JSON Lines, ~200-byte records, notified ten to an SQS event as
// the event source mapping's default batch size delivers them, and send
// the records to fauxqs. The output queue is purged between invocations,
// outside the measured time, so that the stand-in's memory stays flat.
//
//	tools/with-local-aws go test -run='^$' -bench=. -benchtime=1x ./internal/handler/ingesthandler/

const benchObjectSize = 1 << 20

func benchObjects(tb testing.TB) int {
	v := os.Getenv("S3INGEST_BENCH_OBJECTS")
	if v == "" {
		return 100
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("S3INGEST_BENCH_OBJECTS=%q", v)
	}
	return n
}

// benchContent is 1 MiB of JSON Lines records of about 200 bytes, and
// their number.
func benchContent() (string, int) {
	var b strings.Builder
	n := 0
	for b.Len() < benchObjectSize-256 {
		fmt.Fprintf(&b, `{"ts":"2024-01-01T00:%02d:%02dZ","user":"u%06d","event":"page_view","page":"/products/%06d","session":"%016x","value":%d,"tags":["web","eu","beta"],"seq":%d}`+"\n",
			n/60%60, n%60, n%9973, n*7%1000000, n*2654435761, n%1000, n)
		n++
	}
	return b.String(), n
}

// benchBatches uploads n objects and returns the SQS events that notify
// them.
func benchBatches(tb testing.TB, s3c *s3.Client, n int) ([]events.SQSEvent, int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		tb.Fatal(err)
	}
	content, perObject := benchContent()
	var batches []events.SQSEvent
	var msgs []msg
	for i := range n {
		key := fmt.Sprintf("bench/date=2024-01-%02d/part-%05d.jsonl", i%28+1, i)
		out, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), Body: strings.NewReader(content)})
		if err != nil {
			tb.Fatal(err)
		}
		o := object{Object: benchObject(key, int64(len(content)), strings.Trim(aws.ToString(out.ETag), `"`))}
		msgs = append(msgs, msg{id: fmt.Sprintf("m%05d", i), body: s3Body(o)})
		if len(msgs) == 10 || i == n-1 {
			batches = append(batches, sqsEvent(msgs...))
			msgs = nil
		}
	}
	return batches, n * perObject
}

// BenchmarkHandle runs the handler in this process against an in-process
// S3. "fauxqs" sends to the SQS stand-in, which bounds the rate on this
// machine; "discard" sends to a stub that accepts every entry at once, so
// that it measures s3ingest's own pipeline: reading, encoding and packing.
func BenchmarkHandle(b *testing.B) {
	n := benchObjects(b)
	s3c := localaws.FakeS3(b)
	sqsc := sqs.NewFromConfig(localaws.SQS(b))
	batches, records := benchBatches(b, s3c, n)
	for _, target := range []string{"fauxqs", "discard"} {
		b.Run(target, func(b *testing.B) {
			out := localaws.CreateQueue(b, sqsc, "", nil)
			var client sqsbatch.API = sqsc
			if target == "discard" {
				client = discardSQS{}
			}
			// As the function's default configuration gives it.
			runner, err := engine.New(context.Background(), s3c, client, engine.Options{Target: sqsbatch.Queue{URL: out}})
			if err != nil {
				b.Fatal(err)
			}
			h := New(runner, Options{Partitions: recordjson.PartitionsString, FileMetadata: true})
			var elapsed time.Duration
			for b.Loop() {
				elapsed = 0
				for _, ev := range batches {
					start := time.Now()
					resp, err := h.Handle(context.Background(), ev)
					elapsed += time.Since(start)
					if err != nil || len(resp.BatchItemFailures) > 0 {
						b.Fatalf("Handle: %v, %v", failures(resp), err)
					}
					if target == "fauxqs" {
						b.StopTimer()
						purge(b, sqsc, out)
						b.StartTimer()
					}
				}
			}
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(n)*benchObjectSize/(1<<20)/elapsed.Seconds(), "MiB/s")
		})
	}
}

// discardSQS accepts every entry without sending it anywhere.
type discardSQS struct {
	sqsbatch.API
}

func (discardSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576", "FifoQueue": "false"}}, nil
}

func (discardSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{Successful: make([]sqstypes.SendMessageBatchResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		out.Successful[i] = sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id}
	}
	return out, nil
}

// BenchmarkBootstrap runs the built bootstrap under aws-lambda-rie,
// reading from an S3 served by this process, and reports records/s, the
// bootstrap's peak RSS and its init time (cold start) as aws-lambda-rie
// reports it.
func BenchmarkBootstrap(b *testing.B) {
	n := benchObjects(b)
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	b.Cleanup(srv.Close)
	s3c := s3.NewFromConfig(localaws.Config(srv.URL), func(o *s3.Options) { o.UsePathStyle = true })
	sqsc := sqs.NewFromConfig(localaws.SQS(b))
	batches, records := benchBatches(b, s3c, n)
	out := localaws.CreateQueue(b, sqsc, "", nil)
	bootstrap := rie.Build(b, "./functions/s3ingest")
	fn := rie.Start(b, bootstrap,
		"OUTPUT_QUEUE_URL="+out, "S3_FORCE_PATH_STYLE=true", "AWS_ENDPOINT_URL_S3="+srv.URL,
		"AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_FUNCTION_TIMEOUT=900")
	ctx := context.Background()
	// The first invocation, of an s3:TestEvent, starts the function; an
	// empty batch is refused as no SQS event.
	if _, err := fn.Invoke(ctx, sqsEvent(msg{id: "warm-up", body: testEventBody})); err != nil {
		b.Fatal(err)
	}
	pid := processOf(b, bootstrap)
	var elapsed time.Duration
	for b.Loop() {
		elapsed = 0
		for _, ev := range batches {
			start := time.Now()
			answer, err := fn.Invoke(ctx, ev)
			elapsed += time.Since(start)
			if err != nil || !bytes.Equal(answer, []byte(`{"batchItemFailures":[]}`)) {
				b.Fatalf("invoke: %s, %v", answer, err)
			}
			b.StopTimer()
			purge(b, sqsc, out)
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(peakRSS(b, pid))/(1<<20), "peak-RSS-MiB")
	if ms, err := strconv.ParseFloat(strings.TrimSuffix(initReport(fn.Logs()), " ms"), 64); err == nil {
		b.ReportMetric(ms, "init-ms")
	}
	b.Logf("%d objects, %d records in %v; cold start: %s", n, records, elapsed, initReport(fn.Logs()))
}

func purge(tb testing.TB, c *sqs.Client, url string) {
	tb.Helper()
	if _, err := c.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		tb.Fatal(err)
	}
}

// processOf returns the pid of the process running the executable path.
func processOf(tb testing.TB, path string) int {
	tb.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if exe, err := os.Readlink(d + "/exe"); err == nil && exe == path {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	tb.Fatalf("no process runs %s", path)
	return 0
}

// peakRSS returns the peak resident set size (VmHWM) of a process, in
// bytes.
func peakRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// benchObject is an object as its notification names it.
func benchObject(key string, size int64, eTag string) s3event.Object {
	return s3event.Object{
		Bucket: testBucket, Key: key, Size: size, ETag: eTag, EventName: "ObjectCreated:Put",
		EventTime: time.Now().UTC().Truncate(time.Millisecond), Sequencer: "0055AED6DCD90281E5",
	}
}
