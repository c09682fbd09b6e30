package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

const (
	bucket = "membench"
	key    = "records.jsonl"
)

// benchEnv is what every case shares: the S3 child holding the object, the
// built bootstrap and the target queues.
type benchEnv struct {
	s3      *localaws.S3Child
	sqs     *sqs.Client
	rieBin  string
	boot    string
	dir     string
	records int64
	queues  map[int]string // by MaximumMessageSize
	log     io.Writer
}

// setUp starts the S3 child, uploads the object and builds the bootstrap.
func setUp(ctx context.Context, o options, log io.Writer) (*benchEnv, error) {
	sqsURL, rieBin := os.Getenv(localaws.EnvSQS), os.Getenv(localaws.EnvRIE)
	if sqsURL == "" || rieBin == "" {
		return nil, fmt.Errorf("%s or %s is not set: run it with tools/with-local-aws (make membench)", localaws.EnvSQS, localaws.EnvRIE)
	}
	dir, err := os.MkdirTemp("", "membench")
	if err != nil {
		return nil, err
	}
	env := &benchEnv{sqs: sqs.NewFromConfig(localaws.Config(sqsURL)), rieBin: rieBin, dir: dir, queues: map[int]string{}, log: log}
	fmt.Fprintf(log, "membench: building the fanout bootstrap\n")
	if env.boot, err = rie.BuildBootstrap(dir, "./functions/fanout"); err != nil {
		env.close()
		return nil, err
	}
	if env.s3, err = localaws.RunS3Child(); err != nil {
		env.close()
		return nil, err
	}
	start := time.Now()
	if env.records, err = upload(ctx, localaws.S3Client(env.s3.URL), o.size, o.record); err != nil {
		env.close()
		return nil, fmt.Errorf("upload: %w", err)
	}
	fmt.Fprintf(log, "membench: uploaded s3://%s/%s: %d records of %d B (%.1f MiB) in %.1fs\n",
		bucket, key, env.records, o.record, mib(o.size), time.Since(start).Seconds())
	return env, nil
}

func (e *benchEnv) close() {
	for _, q := range e.queues {
		e.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(q)})
	}
	if e.s3 != nil {
		e.s3.Stop()
	}
	os.RemoveAll(e.dir)
}

// queue returns the target queue whose MaximumMessageSize is size (0: the
// stand-in's default, 1 MiB), creating it the first time.
func (e *benchEnv) queue(ctx context.Context, size int) (string, error) {
	if q, ok := e.queues[size]; ok {
		return q, nil
	}
	in := &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("membench-%d-%d", time.Now().UnixNano(), size))}
	if size > 0 {
		in.Attributes = map[string]string{string(sqstypes.QueueAttributeNameMaximumMessageSize): strconv.Itoa(size)}
	}
	out, err := e.sqs.CreateQueue(ctx, in)
	if err != nil {
		return "", err
	}
	e.queues[size] = aws.ToString(out.QueueUrl)
	return e.queues[size], nil
}

// measure runs one case in a new function process and returns its row.
func (e *benchEnv) measure(ctx context.Context, c benchCase) (row, error) {
	target, err := e.queue(ctx, c.queue)
	if err != nil {
		return row{}, err
	}
	fn, err := rie.Run(e.rieBin, e.boot, c.env(e.s3.URL, target), nil)
	if err != nil {
		return row{}, err
	}
	defer fn.Close()
	// The stand-in keeps every message in memory: it is emptied as the
	// case runs.
	stopPurging := localaws.PurgeEvery(ctx, e.sqs, target, time.Second)
	start := time.Now()
	out, err := fn.Invoke(ctx, map[string]string{"bucket": bucket, "key": key})
	wall := time.Since(start)
	stopPurging()
	e.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(target)})
	if err != nil {
		return row{}, fmt.Errorf("%w\n%s", err, tail(fn.Logs(), 20))
	}
	var rep engine.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return row{}, fmt.Errorf("answer %q: %w", out, err)
	}
	if rep.RecordsSent != e.records || rep.RecordsFailed != 0 {
		return row{}, fmt.Errorf("%d of %d records sent, %d failed", rep.RecordsSent, e.records, rep.RecordsFailed)
	}
	pid, err := fn.FunctionPID()
	if err != nil {
		return row{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return row{}, err
	}
	r := row{c: c, records: rep.RecordsSent, requests: rep.Requests, seconds: wall.Seconds()}
	if r.peakRSS, err = statusKB(status, "VmHWM"); err != nil {
		return row{}, err
	}
	if r.fileRSS, err = statusKB(status, "RssFile"); err != nil {
		return row{}, err
	}
	// The gctrace lines may come through the pipe after the answer.
	time.Sleep(200 * time.Millisecond)
	r.gc = parseGCTrace(fn.Logs())
	return r, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// upload writes JSON Lines records of size bytes (newline excluded) as one
// object of about total bytes, and returns the number of records.
func upload(ctx context.Context, c *s3.Client, total int64, size int) (int64, error) {
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return 0, err
	}
	n := total / int64(size+1)
	return n, localaws.UploadLines(ctx, c, bucket, key, func(yield func(string) bool) {
		for i := range n {
			if !yield(jsonRecord(i, size)) {
				return
			}
		}
	})
}

// jsonRecord is record i, a JSON object of size bytes. It has no "value"
// field, so that record mode sends it whole.
func jsonRecord(i int64, size int) string {
	head := fmt.Sprintf(`{"id":%d,"user":"u%06d","event":"page_view","text":"record %d","pad":"`, i, i%1000, i)
	return head + strings.Repeat("p", max(0, size-len(head)-2)) + `"}`
}
