// Package chaos runs both functions under aws-lambda-rie, fed by local
// event source mappings, with a fault-injecting proxy (internal/testenv/faultproxy)
// between them and the stand-ins, and accounts for every record by its id:
// on the target once, on the target more than once (and whether a lost
// answer explains it), on the failure output with its code, or lost.
//
// `make test` runs a short version (TestChaos); `make chaos` a longer one
// that prints the table the README shows.
package chaos

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/faultproxy"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// IssueRates are the fault rates the targets are measured at: 10% of
// entries failed, 3% of SQS requests 500, 3% throttled, 2% of connections
// reset before and 2% after the request took effect, 3% of S3 requests
// 500, 10% of GetObject bodies cut short, 1% of answers delayed 2 s.
var IssueRates = faultproxy.Rates{
	EntryFailed: 0.10, SQS500: 0.03, SQSThrottled: 0.03, ResetBefore: 0.02, ResetAfter: 0.02,
	S3500: 0.03, BodyCut: 0.10, Delay: 0.01, DelayFor: 2 * time.Second,
}

// Config says where the stand-ins are, how much data to make and which
// faults to inject.
type Config struct {
	// SQSURL is fauxqs; MotoURL is moto_server (S3 and DynamoDB); RIE is
	// the aws-lambda-rie binary.
	SQSURL, MotoURL, RIE string
	// Dir holds the bootstraps and the functions' logs.
	Dir string
	// Seed seeds the proxies' faults and the data.
	Seed int64
	// Rates are the faults; the zero value injects none.
	Rates faultproxy.Rates
	// Claims gives both functions a claims table (CLAIMS_TABLE).
	Claims bool
	// FanoutObjects and FanoutRecords make the fanout dataset: that many
	// JSON Lines objects of that many records each, the last gzipped.
	FanoutObjects, FanoutRecords int
	// ChunkSize is fanout's CHUNK_SIZE; "" means 64KiB.
	ChunkSize string
	// IngestObjects and IngestRecords make s3ingest's objects.
	IngestObjects, IngestRecords int
	// Redeliver is the share of messages (chunk tasks, notifications)
	// delivered a second time after their first delivery succeeded, as SQS
	// standard queues and S3 notifications now and then do.
	Redeliver float64
	// Workers is how many instances of each function run at once; zero
	// means 2.
	Workers int
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// ConfigFromEnv reads the stand-ins' addresses as tools/with-local-aws
// exports them.
func ConfigFromEnv() (Config, error) {
	c := Config{SQSURL: os.Getenv(localaws.EnvSQS), MotoURL: os.Getenv(localaws.EnvMoto), RIE: os.Getenv(localaws.EnvRIE)}
	if c.SQSURL == "" || c.MotoURL == "" || c.RIE == "" {
		return c, fmt.Errorf("chaos: %s, %s and %s must be set: run it under tools/with-local-aws (make chaos)", localaws.EnvSQS, localaws.EnvMoto, localaws.EnvRIE)
	}
	return c, nil
}

// Result accounts for the records of one function's run.
type Result struct {
	Function string
	Claims   bool
	// Records is how many records the objects hold.
	Records int
	// Delivered counts the records on the target at least once.
	Delivered int
	// OnFailureOutput counts the records not delivered that are on the
	// failure output, by code in FailureCodes.
	OnFailureOutput int
	FailureCodes    map[string]int
	// Lost counts the records neither delivered nor on the failure output.
	Lost int
	// Duplicates counts the copies beyond the first; LostAnswerDuplicates
	// of them are explained by a SendMessageBatch that took effect but
	// whose answer was lost (which no sender can avoid).
	Duplicates, LostAnswerDuplicates int
	// DLQ counts the messages (tasks, notifications) in the source
	// queue's dead-letter queue.
	DLQ int
	// Invocations counts the SQS-event invocations of the function.
	Invocations int
	// Redelivered counts the messages delivered a second time.
	Redelivered int
	// SQSFaults and S3Faults are what the proxies did.
	SQSFaults, S3Faults faultproxy.Stats
	Duration            time.Duration
}

// OtherDuplicates are the duplicates no lost answer explains.
func (r Result) OtherDuplicates() int { return r.Duplicates - r.LostAnswerDuplicates }

// run is one function's part of a chaos run.
type run struct {
	c        Config
	name     string
	sqs      *sqs.Client // direct to fauxqs: the ESM's and the accounting's
	s3       *s3.Client  // direct to moto: set-up
	bucket   string
	sqsProxy *faultproxy.Proxy
	s3Proxy  *faultproxy.Proxy
	// ids of the records by object URI and offset, for the failure output.
	offsets map[string]map[int64]string
	records int
	table   string
	say     func(format string, a ...any)
}

// Run runs fanout and then s3ingest under c and returns their accounting.
func Run(ctx context.Context, c Config) ([]Result, error) {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var out []Result
	for _, name := range []string{"fanout", "s3ingest"} {
		res, err := runFunction(ctx, c, name)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func runFunction(ctx context.Context, c Config, name string) (Result, error) {
	start := time.Now()
	suffix := fmt.Sprintf("%d-%d", c.Seed, time.Now().UnixNano()%1e9)
	r := &run{
		c: c, name: name, offsets: map[string]map[int64]string{},
		sqs:    sqs.NewFromConfig(localaws.Config(c.SQSURL)),
		s3:     localaws.S3Client(c.MotoURL),
		bucket: "chaos-" + name + "-" + suffix,
		say:    func(format string, a ...any) { fmt.Fprintf(c.Log, "chaos: "+name+": "+format+"\n", a...) },
	}
	var err error
	// One proxy per service and function, so that what each function met
	// is counted apart.
	if r.sqsProxy, err = faultproxy.New(c.SQSURL, faultproxy.Options{Rates: sqsRates(c.Rates), Seed: c.Seed}); err != nil {
		return Result{}, err
	}
	defer r.sqsProxy.Close()
	if r.s3Proxy, err = faultproxy.New(c.MotoURL, faultproxy.Options{Rates: s3Rates(c.Rates), Seed: c.Seed + 1}); err != nil {
		return Result{}, err
	}
	defer r.s3Proxy.Close()
	if _, err := r.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(r.bucket)}); err != nil {
		return Result{}, fmt.Errorf("chaos: create bucket: %w", err)
	}
	if c.Claims {
		r.table = "chaos-" + suffix
		if err := localaws.CreateClaimsTable(ctx, dynamodb.NewFromConfig(localaws.Config(c.MotoURL)), r.table); err != nil {
			return Result{}, err
		}
	}
	q, err := r.queues(ctx, suffix)
	if err != nil {
		return Result{}, err
	}
	bin, err := rie.BuildBootstrap(mkdir(filepath.Join(c.Dir, name)), "./functions/"+name)
	if err != nil {
		return Result{}, err
	}
	env := []string{
		"AWS_ENDPOINT_URL_SQS=" + r.sqsProxy.URL(), "AWS_ENDPOINT_URL_S3=" + r.s3Proxy.URL(), "AWS_ENDPOINT_URL_DYNAMODB=" + c.MotoURL,
		"S3_FORCE_PATH_STYLE=true", "AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_LAMBDA_FUNCTION_NAME=" + name,
		"FAILURE_QUEUE_URL=" + q.failure,
	}
	if r.table != "" {
		env = append(env, "CLAIMS_TABLE="+r.table)
	}
	res := Result{Function: name, Claims: c.Claims}
	var source string
	if name == "fanout" {
		if err := r.fanoutData(ctx); err != nil {
			return res, err
		}
		env = append(env, "TARGET_QUEUE_URL="+q.target, "WORK_QUEUE_URL="+q.source, "INLINE_MAX_BYTES=4KiB", "CHUNK_SIZE="+cmp.Or(c.ChunkSize, "64KiB"))
		source = q.source
	} else {
		notes, err := r.ingestData(ctx)
		if err != nil {
			return res, err
		}
		env = append(env, "OUTPUT_QUEUE_URL="+q.target)
		for _, body := range notes {
			if _, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.source), MessageBody: aws.String(body)}); err != nil {
				return res, fmt.Errorf("chaos: notify: %w", err)
			}
		}
		source = q.source
	}
	res.Records = r.records

	fns := make([]*rie.Runtime, c.Workers)
	for i := range fns {
		logf, err := os.Create(filepath.Join(c.Dir, fmt.Sprintf("%s-%d.log", name, i)))
		if err != nil {
			return res, err
		}
		defer logf.Close()
		if fns[i], err = rie.Run(c.RIE, bin, env, logf); err != nil {
			return res, err
		}
		defer fns[i].Close()
	}
	r.say("%d records, %d instances, faults %+v, claims %v", r.records, c.Workers, c.Rates, c.Claims)
	if name == "fanout" {
		if err := r.request(ctx, fns[0]); err != nil {
			return res, err
		}
	}
	if res.Invocations, res.Redelivered, err = r.drain(ctx, fns, source, q.sourceARN); err != nil {
		return res, err
	}
	if err := r.account(ctx, q, &res); err != nil {
		return res, err
	}
	res.SQSFaults, res.S3Faults = r.sqsProxy.Stats(), r.s3Proxy.Stats()
	res.Duration = time.Since(start)
	r.say("done in %s: %d delivered, %d on the failure output, %d lost, %d duplicates (%d from lost answers), %d in the DLQ",
		res.Duration.Round(time.Second), res.Delivered, res.OnFailureOutput, res.Lost, res.Duplicates, res.LostAnswerDuplicates, res.DLQ)
	return res, nil
}

// sqsRates and s3Rates split the rates between the two proxies: a proxy
// only draws the faults of its own service, but the request faults of both
// services share one draw.
func sqsRates(r faultproxy.Rates) faultproxy.Rates {
	r.S3500, r.BodyCut = 0, 0
	return r
}

func s3Rates(r faultproxy.Rates) faultproxy.Rates {
	return faultproxy.Rates{S3500: r.S3500, BodyCut: r.BodyCut, Delay: r.Delay, DelayFor: r.DelayFor}
}

func mkdir(dir string) string {
	os.MkdirAll(dir, 0o755)
	return dir
}

// queues of one run, on fauxqs.
type queues struct {
	source, sourceARN, dlq, target, failure string
}

func (r *run) queues(ctx context.Context, suffix string) (queues, error) {
	var q queues
	mk := func(name string, attrs map[string]string) (string, string, error) {
		out, err := r.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("chaos-" + r.name + "-" + name + "-" + suffix), Attributes: attrs})
		if err != nil {
			return "", "", fmt.Errorf("chaos: create queue %s: %w", name, err)
		}
		a, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", "", err
		}
		return aws.ToString(out.QueueUrl), a.Attributes["QueueArn"], nil
	}
	dlq, dlqARN, err := mk("dlq", nil)
	if err != nil {
		return q, err
	}
	q.dlq = dlq
	// A failed message comes back after 8 s (a short stand-in for six
	// times the function's timeout) and moves to the DLQ on its fifth
	// receive, as the stacks set it.
	attrs := map[string]string{"VisibilityTimeout": "8", "RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, dlqARN)}
	if q.source, q.sourceARN, err = mk("source", attrs); err != nil {
		return q, err
	}
	if q.target, _, err = mk("target", nil); err != nil {
		return q, err
	}
	if q.failure, _, err = mk("failure", nil); err != nil {
		return q, err
	}
	return q, nil
}

// object writes n JSON Lines records with ids prefix-<i> under key,
// gzipped if zip, and remembers each record's offset in the (decompressed)
// stream. It returns the object's size and ETag.
func (r *run) object(ctx context.Context, key, prefix string, n int, zip bool) (int64, string, error) {
	var plain bytes.Buffer
	offsets := map[int64]string{}
	for i := range n {
		id := prefix + "-" + strconv.Itoa(i)
		offsets[int64(plain.Len())] = id
		// Records of different sizes, so that chunk bounds fall mid-record.
		fmt.Fprintf(&plain, `{"id":%q,"pad":%q}`+"\n", id, bytes.Repeat([]byte{'x'}, 20+(i*37)%160))
	}
	body := plain.Bytes()
	if zip {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(body)
		zw.Close()
		body = z.Bytes()
	}
	out, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		return 0, "", fmt.Errorf("chaos: put %s: %w", key, err)
	}
	r.offsets["s3://"+r.bucket+"/"+key] = offsets
	r.records += n
	return int64(len(body)), aws.ToString(out.ETag), nil
}

func (r *run) fanoutData(ctx context.Context) error {
	for i := range r.c.FanoutObjects {
		zip := i == r.c.FanoutObjects-1
		key := fmt.Sprintf("fanout/part-%03d.jsonl", i)
		if zip {
			key += ".gz"
		}
		if _, _, err := r.object(ctx, key, fmt.Sprintf("f%d", i), r.c.FanoutRecords, zip); err != nil {
			return err
		}
	}
	return nil
}

// ingestData writes s3ingest's objects and returns their notifications
// as S3 sends them to SQS.
func (r *run) ingestData(ctx context.Context) ([]string, error) {
	var notes []string
	for i := range r.c.IngestObjects {
		zip := i == r.c.IngestObjects-1
		key := fmt.Sprintf("ingest/date=2026-11-30/part %03d.jsonl", i)
		if zip {
			key += ".gz"
		}
		size, etag, err := r.object(ctx, key, fmt.Sprintf("i%d", i), r.c.IngestRecords, zip)
		if err != nil {
			return nil, err
		}
		notes = append(notes, notification(r.bucket, key, size, etag, fmt.Sprintf("%016X", int64(i)+1)))
	}
	return notes, nil
}

// notification is the S3 event notification of one new object.
func notification(bucket, key string, size int64, etag, sequencer string) string {
	rec := map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": localaws.Region,
		"eventTime": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "eventName": "ObjectCreated:Put",
		"s3": map[string]any{
			"s3SchemaVersion": "1.0", "configurationId": "chaos",
			"bucket": map[string]any{"name": bucket, "arn": "arn:aws:s3:::" + bucket},
			"object": map[string]any{"key": formKey(key), "size": size, "eTag": trimQuotes(etag), "sequencer": sequencer},
		},
	}
	b, _ := json.Marshal(map[string]any{"Records": []any{rec}})
	return string(b)
}

// formKey encodes a key as S3 notifications do (form encoding, "/" kept).
func formKey(k string) string {
	var b bytes.Buffer
	for _, c := range []byte(k) {
		switch {
		case c == ' ':
			b.WriteByte('+')
		case c == '/' || c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func trimQuotes(s string) string { return string(bytes.Trim([]byte(s), `"`)) }

// request asks fanout for the dataset, as an asynchronous invocation
// would: a failed invocation is tried twice more.
func (r *run) request(ctx context.Context, fn *rie.Runtime) error {
	req := map[string]any{"bucket": r.bucket, "prefix": "fanout/", "runId": fmt.Sprintf("chaos-%d", r.c.Seed)}
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var answer []byte
		if answer, err = fn.Invoke(ctx, req); err == nil {
			r.say("request answered %s", answer)
			return nil
		}
		r.say("request attempt %d failed: %v", attempt, err)
	}
	return fmt.Errorf("chaos: the fanout request failed three times: %w", err)
}

// drain feeds the source queue's messages to the function's instances, one
// local event source mapping each, until the queue has stayed empty with
// nothing in flight. A share of the messages that succeeded on their first
// receive are sent again (Config.Redeliver). It returns the number of
// invocations and of messages sent again.
func (r *run) drain(ctx context.Context, fns []*rie.Runtime, url, arn string) (int, int, error) {
	var (
		invocations, redelivered atomic.Int64
		busy                     atomic.Int64
		done                     atomic.Bool
		mu                       sync.Mutex
		rnd                      = rand.New(rand.NewPCG(uint64(r.c.Seed), 2))
	)
	again := func(ctx context.Context, ev events.SQSEvent, answer []byte) {
		var resp events.SQSEventResponse
		if json.Unmarshal(answer, &resp) != nil {
			return
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range ev.Records {
			mu.Lock()
			pick := rnd.Float64() < r.c.Redeliver
			mu.Unlock()
			if !pick || failed[m.MessageId] || m.Attributes["ApproximateReceiveCount"] != "1" || m.MessageAttributes["chaos-copy"].StringValue != nil {
				continue
			}
			copyAttr := map[string]sqstypes.MessageAttributeValue{"chaos-copy": {DataType: aws.String("String"), StringValue: aws.String(m.MessageId)}}
			if _, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(m.Body), MessageAttributes: copyAttr}); err == nil {
				redelivered.Add(1)
			}
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, fn := range fns {
		p := &esm.Poller{Client: r.sqs, QueueURL: url, QueueARN: arn, BatchSize: 5, Invoke: func(ctx context.Context, ev events.SQSEvent) ([]byte, error) {
			busy.Add(1)
			defer busy.Add(-1)
			answer, err := fn.Invoke(ctx, ev)
			if err == nil {
				again(ctx, ev, answer)
			}
			return answer, err
		}}
		g.Go(func() error {
			for !done.Load() {
				st, err := p.Poll(ctx)
				if err != nil {
					return err
				}
				invocations.Add(int64(st.Invocations))
			}
			return nil
		})
	}
	g.Go(func() error {
		defer done.Store(true)
		idle := 0
		for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			visible, inFlight, err := localaws.Depth(ctx, r.sqs, url)
			if err != nil {
				return err
			}
			// Empty, with no invocation running, three checks in a row.
			if visible == 0 && inFlight == 0 && busy.Load() == 0 {
				if idle++; idle >= 3 {
					return nil
				}
			} else {
				idle = 0
			}
		}
		return errors.New("chaos: the source queue did not drain in 10 minutes")
	})
	err := g.Wait()
	return int(invocations.Load()), int(redelivered.Load()), err
}

// account reads the target, the failure output and the DLQ, and fills in
// res.
func (r *run) account(ctx context.Context, q queues, res *Result) error {
	copies := map[string]int{}
	for _, m := range localaws.ReceiveAll(ctx, r.sqs, q.target, 5*time.Minute) {
		id, err := recordID(aws.ToString(m.Body))
		if err != nil {
			return err
		}
		copies[id]++
	}
	failed := map[string]string{}
	res.FailureCodes = map[string]int{}
	for _, m := range localaws.ReceiveAll(ctx, r.sqs, q.failure, 5*time.Minute) {
		var f engine.Failure
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); err != nil {
			return fmt.Errorf("chaos: failure output: %w", err)
		}
		id, ok := r.offsets[f.Source][f.Offset]
		if !ok {
			return fmt.Errorf("chaos: failure output names no record: %s at %d", f.Source, f.Offset)
		}
		failed[id] = f.Code
	}
	res.DLQ = len(localaws.ReceiveAll(ctx, r.sqs, q.dlq, 5*time.Minute))
	lostAnswers := map[string]int{}
	for _, e := range r.sqsProxy.LostAnswers() {
		if e.QueueURL != q.target {
			continue
		}
		if id, err := recordID(e.Body); err == nil {
			lostAnswers[id]++
		}
	}
	for _, offsets := range r.offsets {
		for _, id := range offsets {
			n := copies[id]
			switch {
			case n > 0:
				res.Delivered++
				res.Duplicates += n - 1
				res.LostAnswerDuplicates += min(n-1, lostAnswers[id])
			case failed[id] != "":
				res.OnFailureOutput++
				res.FailureCodes[failed[id]]++
			default:
				res.Lost++
			}
		}
	}
	return nil
}

// recordID returns the "id" field of a record's message body.
func recordID(body string) (string, error) {
	var rec struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &rec); err != nil || rec.ID == "" {
		return "", fmt.Errorf("chaos: a message on the target is not a generated record: %.200s", body)
	}
	return rec.ID, nil
}
