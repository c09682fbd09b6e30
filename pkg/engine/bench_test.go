package engine_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestMain(m *testing.M) {
	if localaws.ServeS3Child() {
		return
	}
	os.Exit(m.Run())
}

// BenchmarkRun sends 1,000,000 JSON Lines records of 200 bytes (one
// object, 8 MiB chunks read four at a time) to fauxqs in record mode and in
// chunk mode, inline, and reports records/s, SQS requests per 1,000
// records and the peak RSS of this process. The object lives in an S3
// stand-in in a child process. Run it with `make bench-go BENCH=BenchmarkRun`.
func BenchmarkRun(b *testing.B) {
	const n = 1_000_000
	s3c := localaws.S3Client(localaws.StartS3Child(b))
	sqsc := sqs.NewFromConfig(localaws.SQS(b))
	ctx := b.Context()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	uploadRecords(b, s3c, "bench", "records.jsonl", n)
	for _, mode := range []worktask.Mode{worktask.ModeRecord, worktask.ModeChunk} {
		b.Run(string(mode), func(b *testing.B) {
			target := localaws.CreateQueue(b, sqsc, "-target", nil)
			r, err := engine.New(ctx, s3c, sqsc, engine.Options{
				Target: sqsbatch.Queue{URL: target}, Mode: mode, Planning: engine.Planning{InlineMaxBytes: 1 << 40}, Plan: dataset.PlanOptions{},
			})
			if err != nil {
				b.Fatal(err)
			}
			var rep engine.Report
			var peak int64
			start := time.Now()
			for b.Loop() {
				localaws.ResetPeakRSS(b)
				rep, err = r.Run(ctx, engine.Request{Source: dataset.Source{Bucket: "bench", Key: "records.jsonl"}})
				if err != nil || rep.RecordsSent != n {
					b.Fatalf("run: %v, %+v", err, rep)
				}
				peak = max(peak, localaws.PeakRSS(b))
				if _, err := sqsc.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(target)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "records/s")
			b.ReportMetric(float64(rep.Requests)*1000/n, "requests/1k-records")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		})
	}
}

// uploadRecords writes n JSON Lines records of 200 bytes with a multipart
// upload, part by part.
func uploadRecords(b *testing.B, c *s3.Client, bucket, key string, n int) {
	b.Helper()
	ctx := b.Context()
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		b.Fatal(err)
	}
	var parts []types.CompletedPart
	var buf bytes.Buffer
	pad := strings.Repeat("p", 200)
	flush := func() {
		num := int32(len(parts) + 1)
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mu.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf.Bytes())})
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		buf.Reset()
	}
	for i := range n {
		line := fmt.Sprintf(`{"id":%d,"value":"record %d","pad":"`, i, i)
		buf.WriteString(line)
		buf.WriteString(pad[:200-len(line)-3])
		buf.WriteString("\"}\n")
		if buf.Len() >= 16<<20 {
			flush()
		}
	}
	if buf.Len() > 0 {
		flush()
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: mu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRunWideRate runs one run at MaxRate 300 and 1000 messages per
// second over 1, 2 and 4 concurrent Runners (as that many invocations
// would, each with its own Pacer sharing the run's budget in a claims
// table on moto_server), sending twenty seconds' worth of records to
// fauxqs, and prints a table of the rate asked for, the rate achieved over
// the whole run and their ratio. The budget's windows are whole seconds,
// each spent early in its second when the senders are faster than the
// rate: a run that starts late in a second and ends early in one takes
// about a second less than its messages' share, which is why the run is
// long enough for that second to stay within a few percent. Run it with
// `tools/with-local-aws go test -run '^$' -bench BenchmarkRunWideRate ./pkg/engine/`.
func BenchmarkRunWideRate(b *testing.B) {
	s3c := localaws.FakeS3(b)
	sqsc := sqs.NewFromConfig(localaws.SQS(b))
	ctx := b.Context()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	client, table := localaws.ClaimsTable(b)
	runs := runstate.NewTable(&serialDB{c: client}, table, runstate.TableOptions{})
	var rows []string
	for _, rate := range []int64{300, 1000} {
		const seconds = 20
		n := int(rate) * seconds
		key := fmt.Sprintf("rate-%d.jsonl", rate)
		var body strings.Builder
		for i := range n {
			fmt.Fprintf(&body, `{"value":"r%07d"}`+"\n", i)
		}
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(key), Body: strings.NewReader(body.String())}); err != nil {
			b.Fatal(err)
		}
		obj := dataset.Object{Bucket: "bench", Key: key, Size: int64(body.Len())}
		for _, runners := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("rate=%d/runners=%d", rate, runners), func(b *testing.B) {
				target := localaws.CreateQueue(b, sqsc, "-target", nil)
				opts := engine.Options{Target: sqsbatch.Queue{URL: target}, Control: engine.Control{Runs: runs, MaxRate: rate},
					Plan: dataset.PlanOptions{ChunkSize: int64(body.Len()/32 + 1)}}
				rs := make([]*engine.Runner, runners)
				for i := range rs {
					var err error
					if rs[i], err = engine.New(ctx, s3c, sqsc, opts); err != nil {
						b.Fatal(err)
					}
				}
				var achieved float64
				for b.Loop() {
					runID := engine.NewRunID()
					tasks, err := rs[0].Tasks(ctx, runID, obj, worktask.Overrides{})
					if err != nil {
						b.Fatal(err)
					}
					var sent atomic.Int64
					var wg sync.WaitGroup
					start := time.Now()
					for i, r := range rs {
						var mine []worktask.Task
						for j := i; j < len(tasks); j += runners {
							mine = append(mine, tasks[j])
						}
						wg.Go(func() {
							for _, res := range r.RunTasks(ctx, mine, 0) {
								if res.Err != nil || res.Continuation != nil {
									b.Errorf("task: %+v", res)
								}
								sent.Add(res.Messages)
							}
						})
					}
					wg.Wait()
					if sent.Load() != int64(n) {
						b.Fatalf("sent %d messages, want %d", sent.Load(), n)
					}
					achieved = float64(n) / time.Since(start).Seconds()
				}
				b.ReportMetric(achieved, "msgs/s")
				b.ReportMetric(achieved/float64(rate), "ratio")
				rows = append(rows, fmt.Sprintf("%8d %8d %12.0f %7.3f", rate, runners, achieved, achieved/float64(rate)))
			})
		}
	}
	fmt.Printf("%8s %8s %12s %7s\n", "target", "runners", "achieved/s", "ratio")
	for _, r := range rows {
		fmt.Println(r)
	}
}
