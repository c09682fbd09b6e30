package records_test

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

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/records"
)

// BenchmarkReadS3 streams generated JSON Lines objects of 64 MiB and 1 GiB
// from an S3 stand-in through chunked reading with default settings, with
// one reader and with four in parallel. It reports MB/s, the CPU cost of
// reading, and the peak RSS of the reading process. The stand-in is
// gofakes3 in a child process, so that the objects are not in this
// process's memory; moto_server is too slow for ranged reads of a 1 GiB
// object (it copies the object for each range).
func BenchmarkReadS3(b *testing.B) {
	c := s3.NewFromConfig(localaws.Config(localaws.StartS3Child(b)), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := "bench-read"
	if _, err := c.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int64{64 << 20, 1 << 30} {
		key := fmt.Sprintf("gen/%d.jsonl", size)
		want := upload(b, c, bucket, key, size)
		obj, err := dataset.Head(b.Context(), c, bucket, key, "")
		if err != nil {
			b.Fatal(err)
		}
		chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{}).Plan(b.Context(), obj)
		if err != nil {
			b.Fatal(err)
		}
		for _, readers := range []int{1, 4} {
			b.Run(fmt.Sprintf("size=%dMiB/readers=%d", size>>20, readers), func(b *testing.B) {
				b.SetBytes(size)
				var peak int64
				cpu0 := localaws.CPUTime(b)
				for b.Loop() {
					// The peak is the reading's, not the generating's.
					localaws.ResetPeakRSS(b)
					var n atomic.Int64
					work := make(chan dataset.Chunk)
					var wg sync.WaitGroup
					for range readers {
						wg.Go(func() {
							for ch := range work {
								for _, err := range records.Read(b.Context(), c, ch, records.Options{}) {
									if err != nil {
										b.Error(err)
										return
									}
									n.Add(1)
								}
							}
						})
					}
					for _, ch := range chunks {
						work <- ch
					}
					close(work)
					wg.Wait()
					if n.Load() != want {
						b.Fatalf("read %d records, want %d", n.Load(), want)
					}
					peak = max(peak, localaws.PeakRSS(b))
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				// What the reading itself costs, whatever the stand-in's
				// speed: megabytes per second of this process's CPU time.
				b.ReportMetric(float64(size)*float64(b.N)/1e6/(localaws.CPUTime(b)-cpu0).Seconds(), "MB/cpu-s")
			})
		}
	}
}

func TestMain(m *testing.M) {
	if localaws.ServeS3Child() {
		return
	}
	os.Exit(m.Run())
}

// upload writes a JSON Lines object of about size bytes with a multipart
// upload, generating each 16 MiB part as it goes, and returns its number of
// records.
func upload(b *testing.B, c *s3.Client, bucket, key string, size int64) int64 {
	b.Helper()
	ctx := b.Context()
	start := time.Now()
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		b.Fatal(err)
	}
	const partSize = 16 << 20
	var parts []types.CompletedPart
	var recs, written int64
	pad := strings.Repeat("p", 120)
	var buf bytes.Buffer
	for part := int32(1); written < size; part++ {
		buf.Reset()
		for buf.Len() < partSize && written+int64(buf.Len()) < size {
			fmt.Fprintf(&buf, `{"id":%d,"user":"u%d","amount":%d.%02d,"tags":["a","b"],"pad":"%s"}`+"\n", recs, recs%1000, recs%997, recs%100, pad[:recs%120])
			recs++
		}
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mu.UploadId,
			PartNumber: aws.Int32(part), Body: bytes.NewReader(buf.Bytes())})
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(part)})
		written += int64(buf.Len())
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: mu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		b.Fatal(err)
	}
	b.Logf("uploaded %s: %d MiB, %d records in %v", key, written>>20, recs, time.Since(start).Round(time.Millisecond))
	return recs
}
