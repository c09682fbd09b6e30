// Package demo runs the whole pipeline locally, as `make demo` shows it:
// moto_server produces S3 → SNS → SQS notifications, both functions run
// under aws-lambda-rie, local event source mappings feed them, and every
// generated record is accounted for at the end.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Config says where the stand-ins are and how much data to make.
type Config struct {
	// MotoURL serves S3, SNS and the ingest queue (notifications).
	MotoURL string
	// SQSURL serves the work, target, output and failure queues (fauxqs).
	SQSURL string
	// RIE is the aws-lambda-rie binary.
	RIE string
	// Dir holds the built bootstraps and the functions' logs.
	Dir string
	// Records is the number of records per generated object.
	Records int
	// FanoutObjects is the number of objects in the fanout dataset.
	FanoutObjects int
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// ConfigFromEnv reads the stand-ins' addresses as tools/with-local-aws
// exports them.
func ConfigFromEnv() (Config, error) {
	c := Config{
		MotoURL: os.Getenv(localaws.EnvMoto),
		SQSURL:  os.Getenv(localaws.EnvSQS),
		RIE:     os.Getenv(localaws.EnvRIE),
	}
	if c.MotoURL == "" || c.SQSURL == "" || c.RIE == "" {
		return c, fmt.Errorf("demo: %s, %s and %s must be set: run it with `make demo` (tools/with-local-aws)", localaws.EnvMoto, localaws.EnvSQS, localaws.EnvRIE)
	}
	return c, nil
}

// queues of the local stack.
type stack struct {
	motoS3                                *s3.Client
	motoSQS                               *sqs.Client
	sqs                                   *sqs.Client
	bucket                                string
	ingest, ingestDLQ, ingestARN          string
	work, workDLQ, target, output, failed string
	// claims is the claims table both functions share, as in the stacks.
	claims string
}

const bucket = "demo-lake"

// Run builds and runs the demo, writes its summary to out, and returns the
// accounting. It returns an error when something could not run; a record
// that is not accounted for shows in Summary.Missing.
func Run(ctx context.Context, c Config, out io.Writer) (*Summary, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Records <= 0 {
		c.Records = 200
	}
	if c.FanoutObjects <= 0 {
		c.FanoutObjects = 4
	}
	start := time.Now()
	say := func(format string, a ...any) { fmt.Fprintf(c.Log, "demo: "+format+"\n", a...) }

	st, err := wire(ctx, c)
	if err != nil {
		return nil, err
	}
	say("wired moto (bucket %s → SNS → ingest queue + DLQ, claims table) and fauxqs (work, target, output, failure queues)", bucket)

	fns := map[string]*rie.Runtime{}
	for _, name := range []string{"s3ingest", "fanout"} {
		dir := filepath.Join(c.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		bin, err := rie.BuildBootstrap(dir, "./functions/"+name)
		if err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(c.Dir, name+".log"))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		env := []string{
			"AWS_ENDPOINT_URL_S3=" + c.MotoURL, "AWS_ENDPOINT_URL_SQS=" + c.SQSURL, "S3_FORCE_PATH_STYLE=true",
			"AWS_ENDPOINT_URL_DYNAMODB=" + c.MotoURL, "CLAIMS_TABLE=" + st.claims, "OFFLOAD_S3_URI=s3://" + bucket + "/offload/",
			"AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_LAMBDA_FUNCTION_NAME=" + name,
			"OUTPUT_QUEUE_URL=" + st.output, "MAX_FILE_AGE=off",
			"TARGET_QUEUE_URL=" + st.target, "WORK_QUEUE_URL=" + st.work, "FAILURE_QUEUE_URL=" + st.failed,
			"INLINE_MAX_BYTES=4KiB", "CHUNK_SIZE=8KiB",
			// The demo's fanout records are in the Spark SQS sink's
			// columns: their value is the body (by default a record is
			// sent whole).
			"BODY_FIELD=value", "ATTRIBUTES_FIELD=msg_attributes",
		}
		fn, err := rie.Run(c.RIE, bin, env, logf)
		if err != nil {
			return nil, err
		}
		defer fn.Close()
		fns[name] = fn
	}
	say("built both bootstraps and started them under aws-lambda-rie (logs in %s)", shownPath(c.Dir))

	gen, err := generate(ctx, st, c)
	if err != nil {
		return nil, err
	}
	say("uploaded %d objects (%d records); moto sends their notifications", len(gen.objects), gen.total())

	sum := &Summary{gen: gen}
	// s3ingest: poll the ingest queue until it and its retries are done.
	ingest := &esm.Poller{Client: st.motoSQS, QueueURL: st.ingest, QueueARN: st.ingestARN, BatchSize: 10, Invoke: invoker(fns["s3ingest"])}
	t0 := time.Now()
	if sum.Ingest, err = drain(ctx, ingest, st.motoSQS, st.ingest); err != nil {
		return nil, err
	}
	sum.IngestTime = time.Since(t0)
	say("s3ingest: %s", plural(sum.Ingest.Invocations, "invocation"))

	// fanout: a direct request for the prefix, then its work queue.
	t0 = time.Now()
	answer, err := fns["fanout"].Invoke(ctx, map[string]any{"bucket": bucket, "prefix": "fanout/", "runId": "demo"})
	if err != nil {
		return nil, fmt.Errorf("demo: fanout request: %w", err)
	}
	if err := json.Unmarshal(answer, &sum.FanoutPlan); err != nil {
		return nil, fmt.Errorf("demo: fanout answered %s: %w", answer, err)
	}
	work := &esm.Poller{Client: st.sqs, QueueURL: st.work, QueueARN: "arn:aws:sqs:us-east-1:000000000000:demo-work", BatchSize: 5, Invoke: invoker(fns["fanout"])}
	if sum.Fanout, err = drain(ctx, work, st.sqs, st.work); err != nil {
		return nil, err
	}
	sum.FanoutTime = time.Since(t0)
	say("fanout: %s: the request, which queued %s, and %d from the work queue", plural(sum.Fanout.Invocations+1, "invocation"), plural(sum.FanoutPlan.TasksQueued, "task"), sum.Fanout.Invocations)

	// The record SQS refused for its NUL character is fixed as a user
	// would: sent again from the failure output, the character replaced.
	if sum.Redrive, err = redriveRefused(ctx, st); err != nil {
		return nil, err
	}
	say("redrive: %s of the failure output sent again (InvalidCharacters, with U+FFFD)", plural(sum.Redrive.Sent, "record"))

	if err := sum.collect(ctx, st, fns); err != nil {
		return nil, err
	}
	sum.Total = time.Since(start)
	sum.Print(out)
	return sum, nil
}

// shownPath is dir relative to the working directory when it is below it,
// so that the demo's output reads the same on every clone.
func shownPath(dir string) string {
	wd, err := os.Getwd()
	if err != nil {
		return dir
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return dir
	}
	return rel
}

// redriveRefused sends the failure output's InvalidCharacters records to
// the target again, as `s3sqs redrive -from-queue ... -code
// InvalidCharacters -replace-invalid-characters` does; the other failures
// stay where they are.
func redriveRefused(ctx context.Context, st *stack) (*redrive.Summary, error) {
	r, err := redrive.New(ctx, st.motoS3, st.sqs, redrive.Options{
		TargetQueueURL: st.target,
		Codes:          redrive.CodeFilter{Only: []string{"InvalidCharacters"}},
		Send:           sqsbatch.Options{ReplaceInvalidCharacters: true},
		Visibility:     2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("demo: redrive: %w", err)
	}
	sum, err := r.FailureQueue(ctx, st.failed)
	if err != nil {
		return nil, fmt.Errorf("demo: redrive: %w", err)
	}
	return sum, nil
}

// invoker invokes fn with an SQS event through the Lambda runtime API.
func invoker(fn *rie.Runtime) esm.InvokeFunc {
	return func(ctx context.Context, ev events.SQSEvent) ([]byte, error) {
		return fn.Invoke(ctx, ev)
	}
}

// drain polls until the queue has had nothing visible or in flight for a
// few seconds, so that retried messages have come back and gone to the DLQ.
func drain(ctx context.Context, p *esm.Poller, c *sqs.Client, url string) (esm.Stats, error) {
	var total esm.Stats
	idle := 0
	for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); {
		st, err := p.Poll(ctx)
		if err != nil {
			return total, err
		}
		total.Add(st)
		if st.Received > 0 {
			idle = 0
			continue
		}
		visible, inFlight, err := localaws.Depth(ctx, c, url)
		if err != nil {
			return total, err
		}
		if visible == 0 && inFlight == 0 {
			if idle++; idle >= 2 {
				return total, nil
			}
		}
	}
	return total, errors.New("demo: the queue did not drain in 4 minutes")
}

// wire creates what the stacks create, on the stand-ins.
func wire(ctx context.Context, c Config) (*stack, error) {
	moto := localaws.Config(c.MotoURL)
	st := &stack{
		motoS3:  s3.NewFromConfig(moto, func(o *s3.Options) { o.UsePathStyle = true }),
		motoSQS: sqs.NewFromConfig(moto),
		sqs:     sqs.NewFromConfig(localaws.Config(c.SQSURL)),
		bucket:  bucket,
	}
	snsc := sns.NewFromConfig(moto)
	suffix := fmt.Sprint(time.Now().Unix())
	mk := func(cl *sqs.Client, name string, attrs map[string]string) (string, string, error) {
		out, err := cl.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-" + suffix), Attributes: attrs})
		if err != nil {
			return "", "", fmt.Errorf("demo: create queue %s: %w", name, err)
		}
		a, err := cl.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", "", err
		}
		return aws.ToString(out.QueueUrl), a.Attributes["QueueArn"], nil
	}
	redrive := func(arn string, n int) string {
		return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, arn, n)
	}
	var dlqARN, workDLQARN string
	var err error
	if st.ingestDLQ, dlqARN, err = mk(st.motoSQS, "demo-ingest-dlq", nil); err != nil {
		return nil, err
	}
	// A short visibility timeout so that failed messages come back, and
	// reach the DLQ, within the demo's minutes.
	if st.ingest, st.ingestARN, err = mk(st.motoSQS, "demo-ingest", map[string]string{"VisibilityTimeout": "2", "RedrivePolicy": redrive(dlqARN, 2)}); err != nil {
		return nil, err
	}
	if st.workDLQ, workDLQARN, err = mk(st.sqs, "demo-work-dlq", nil); err != nil {
		return nil, err
	}
	if st.work, _, err = mk(st.sqs, "demo-work", map[string]string{"VisibilityTimeout": "5", "RedrivePolicy": redrive(workDLQARN, 3)}); err != nil {
		return nil, err
	}
	for _, q := range []struct {
		url  *string
		name string
	}{{&st.target, "demo-target"}, {&st.output, "demo-output"}, {&st.failed, "demo-failure"}} {
		if *q.url, _, err = mk(st.sqs, q.name, nil); err != nil {
			return nil, err
		}
	}
	st.claims = "demo-claims-" + suffix
	if err := localaws.CreateClaimsTable(ctx, dynamodb.NewFromConfig(moto), st.claims); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if _, err := st.motoS3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		var owned *s3types.BucketAlreadyOwnedByYou
		if !errors.As(err, &owned) {
			return nil, fmt.Errorf("demo: create bucket: %w", err)
		}
	}
	topic, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("demo-uploads-" + suffix)})
	if err != nil {
		return nil, fmt.Errorf("demo: create topic: %w", err)
	}
	if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(st.ingestARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		return nil, fmt.Errorf("demo: subscribe: %w", err)
	}
	_, err = st.motoS3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{TopicConfigurations: []s3types.TopicConfiguration{{
			TopicArn: topic.TopicArn,
			Events:   []s3types.Event{"s3:ObjectCreated:*"},
			Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
				{Name: s3types.FilterRuleNamePrefix, Value: aws.String("ingest/")}}}},
		}}},
	})
	if err != nil {
		return nil, fmt.Errorf("demo: bucket notification: %w", err)
	}
	return st, nil
}

// short shortens a long key for the summary.
func short(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 && len(key) > 48 {
		return "…" + key[len(key)-40:]
	}
	return key
}
