package fanout_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
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
			r, err := fanout.New(ctx, s3c, sqsc, fanout.Options{
				Target: sqsbatch.Queue{URL: target}, Mode: mode, InlineMaxBytes: 1 << 40, Plan: dataset.PlanOptions{},
			})
			if err != nil {
				b.Fatal(err)
			}
			var rep fanout.Report
			var peak int64
			start := time.Now()
			for b.Loop() {
				localaws.ResetPeakRSS(b)
				rep, err = r.Run(ctx, fanout.Request{Source: dataset.Source{Bucket: "bench", Key: "records.jsonl"}})
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
