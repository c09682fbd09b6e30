// Package backfill runs a backfill on the local stand-ins as a user runs
// one on AWS, for `make backfill` and docs/backfills.md: it previews a
// dataset with `s3sqs fanout -dry-run`, starts a paced run that queues its
// tasks for two fanout functions under aws-lambda-rie, watches it with
// `s3sqs status -watch`, pauses, resumes and changes its rate, and then
// accounts for every record: each on the target once, the work DLQ empty.
package backfill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
)

// Config says where the stand-ins are and how large the backfill is.
type Config struct {
	// MotoURL serves S3 and the claims table; SQSURL the queues (fauxqs).
	MotoURL, SQSURL string
	// RIE is the aws-lambda-rie binary.
	RIE string
	// Dir holds the built binaries and the functions' logs.
	Dir string
	// Objects and Records are the dataset's objects and records in each;
	// zero means 24 and 500.
	Objects, Records int
	// Rate is the run's MAX_RATE at its start, and Raised the rate `s3sqs
	// set` gives it after the resume; zero means 300 and 600.
	Rate, Raised int
	// Pause is how long the run stays paused; zero means 6 s.
	Pause time.Duration
	// Invocations is how many fanout functions take tasks from the work
	// queue at once (aws-lambda-rie runs one invocation at a time, so each
	// is a function of its own); zero means 2.
	Invocations int
}

// Result is what the backfill did and how every record ended.
type Result struct {
	// Transcript is the commands run and what they printed.
	Transcript string
	// Records is the dataset's records; Delivered the distinct ones on
	// the target and Duplicates the deliveries beyond the first.
	Records, Delivered, Duplicates int
	// WorkDLQ is how many tasks reached the work queue's DLQ.
	WorkDLQ int
	// Status is the last `s3sqs status -json` of the run.
	Status map[string]any
}

// RunID names the backfill's run.
const RunID = "backfill-2026-11"

const bucket = "backfill-lake"

// Run runs the backfill. An error means something could not run; how the
// records ended is in the Result.
func Run(ctx context.Context, c Config) (*Result, error) {
	c.defaults()
	st, err := wire(ctx, c)
	if err != nil {
		return nil, err
	}
	cli, err := buildCLI(c.Dir)
	if err != nil {
		return nil, err
	}
	boot, err := rie.BuildBootstrap(filepath.Join(c.Dir, "fanout"), "./functions/fanout")
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "AWS_ENDPOINT_URL_S3="+c.MotoURL, "AWS_ENDPOINT_URL_DYNAMODB="+c.MotoURL, "AWS_ENDPOINT_URL_SQS="+c.SQSURL)
	fnEnv := []string{
		"AWS_ENDPOINT_URL_S3=" + c.MotoURL, "AWS_ENDPOINT_URL_SQS=" + c.SQSURL, "AWS_ENDPOINT_URL_DYNAMODB=" + c.MotoURL,
		"S3_FORCE_PATH_STYLE=true", "CLAIMS_TABLE=" + st.claims, "AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_LAMBDA_FUNCTION_NAME=fanout",
		"TARGET_QUEUE_URL=" + st.target, "WORK_QUEUE_URL=" + st.work, "FAILURE_QUEUE_URL=" + st.failed,
	}
	var fns []*rie.Runtime
	defer func() {
		for _, fn := range fns {
			fn.Close()
		}
	}()
	for i := range c.Invocations {
		logf, err := os.Create(filepath.Join(c.Dir, fmt.Sprintf("fanout-%d.log", i+1)))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		fn, err := rie.Run(c.RIE, boot, fnEnv, logf)
		if err != nil {
			return nil, err
		}
		fns = append(fns, fn)
	}

	res := &Result{Records: c.Objects * c.Records}
	tr := transcript{names: strings.NewReplacer(st.work, "$WORK_QUEUE_URL", st.workDLQ, "$WORK_DLQ_URL", st.target, "$TARGET_QUEUE_URL",
		st.failed, "$FAILURE_QUEUE_URL", st.claims, "$CLAIMS_TABLE")}
	sh := func(args ...string) (string, error) { return tr.run(ctx, cli, env, args...) }
	source := []string{"-bucket", bucket, "-prefix", "exports/2026-11/", "-s3-path-style", "-target-queue-url", st.target}
	if _, err := sh(append(append([]string{"fanout"}, source...), "-max-rate", fmt.Sprint(c.Rate),
		"-work-queue-url", st.work, "-dry-run", "-invocations", fmt.Sprint(c.Invocations))...); err != nil {
		return nil, err
	}
	if _, err := sh(append(append([]string{"fanout"}, source...), "-run-id", RunID, "-max-rate", fmt.Sprint(c.Rate),
		"-work-queue-url", st.work, "-claims-table", st.claims)...); err != nil {
		return nil, err
	}

	// The functions take the tasks while the watch and the steering run.
	polling, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	g, gctx := errgroup.WithContext(polling)
	for i, fn := range fns {
		p := &esm.Poller{Client: st.sqs, QueueURL: st.work, QueueARN: fmt.Sprintf("arn:aws:sqs:us-east-1:000000000000:backfill-work-%d", i), BatchSize: 1,
			Invoke: func(ctx context.Context, ev events.SQSEvent) ([]byte, error) { return fn.Invoke(ctx, ev) }}
		g.Go(func() error {
			for gctx.Err() == nil {
				if _, err := p.Poll(gctx); err != nil && gctx.Err() == nil {
					return err
				}
			}
			return nil
		})
	}
	status := []string{"status", "-run-id", RunID, "-claims-table", st.claims}
	watch := make(chan error, 1)
	go func() {
		_, err := tr.runAsync(ctx, cli, env, append(status, "-watch", "-every", "2s")...)
		watch <- err
	}()
	steps := []struct {
		after time.Duration
		args  []string
	}{
		{4 * time.Second, []string{"pause", "-run-id", RunID, "-claims-table", st.claims}},
		{c.Pause, []string{"resume", "-run-id", RunID, "-claims-table", st.claims, "-work-queue-url", st.work}},
		{2 * time.Second, []string{"set", "-run-id", RunID, "-claims-table", st.claims, "-max-rate", fmt.Sprint(c.Raised)}},
	}
	for _, s := range steps {
		select {
		case <-time.After(s.after):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if _, err := sh(s.args...); err != nil {
			return nil, err
		}
	}
	select {
	case err = <-watch:
	case <-time.After(5 * time.Minute):
		err = errors.New("backfill: the run did not end in 5 minutes")
	}
	stopPolling()
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tr.String())
	}
	out, err := sh(append(status, "-json")...)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(out), &res.Status); err != nil {
		return nil, fmt.Errorf("backfill: status -json printed %q: %w", out, err)
	}
	if err := res.account(ctx, st); err != nil {
		return nil, err
	}
	res.Transcript = tr.String()
	return res, nil
}

func (c *Config) defaults() {
	if c.Objects <= 0 {
		c.Objects = 24
	}
	if c.Records <= 0 {
		c.Records = 500
	}
	if c.Rate <= 0 {
		c.Rate = 300
	}
	if c.Raised <= 0 {
		c.Raised = 600
	}
	if c.Pause <= 0 {
		c.Pause = 6 * time.Second
	}
	if c.Invocations <= 0 {
		c.Invocations = 2
	}
}

// account reads the target and the work DLQ: every record id once.
func (r *Result) account(ctx context.Context, st *stack) error {
	seen := map[string]int{}
	for _, m := range localaws.ReceiveAll(ctx, st.sqs, st.target, 30*time.Second) {
		id := m.MessageAttributes["s3sqs-record-id"]
		if id.StringValue == nil {
			return fmt.Errorf("backfill: a message without s3sqs-record-id: %s", aws.ToString(m.Body))
		}
		seen[*id.StringValue]++
	}
	for _, n := range seen {
		r.Delivered++
		r.Duplicates += n - 1
	}
	visible, inFlight, err := localaws.Depth(ctx, st.sqs, st.workDLQ)
	if err != nil {
		return err
	}
	r.WorkDLQ = visible + inFlight
	return nil
}

// Print writes the transcript and the accounting.
func (r *Result) Print(w io.Writer) {
	fmt.Fprint(w, r.Transcript)
	fmt.Fprintf(w, "\naccounted: %d records, %d delivered, %d sent twice, %d tasks in the work DLQ\n", r.Records, r.Delivered, r.Duplicates, r.WorkDLQ)
}

// OK reports whether every record arrived and no task reached the DLQ.
func (r *Result) OK() bool { return r.Delivered == r.Records && r.WorkDLQ == 0 }

type stack struct {
	sqs                           *sqs.Client
	work, workDLQ, target, failed string
	claims                        string
}

// wire creates the bucket, the dataset, the queues and the claims table.
func wire(ctx context.Context, c Config) (*stack, error) {
	moto := localaws.Config(c.MotoURL)
	s3c := s3.NewFromConfig(moto, func(o *s3.Options) { o.UsePathStyle = true })
	st := &stack{sqs: sqs.NewFromConfig(localaws.Config(c.SQSURL))}
	suffix := fmt.Sprint(time.Now().UnixNano())
	mk := func(name string, attrs map[string]string) (string, error) {
		out, err := st.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-" + suffix), Attributes: attrs})
		if err != nil {
			return "", fmt.Errorf("backfill: create queue %s: %w", name, err)
		}
		return aws.ToString(out.QueueUrl), nil
	}
	var err error
	if st.workDLQ, err = mk("backfill-work-dlq", nil); err != nil {
		return nil, err
	}
	a, err := st.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.workDLQ), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return nil, err
	}
	// Three receives, as the stacks' work queue allows, and a visibility
	// timeout as short as the functions' 30 s timeout permits.
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, a.Attributes["QueueArn"])
	if st.work, err = mk("backfill-work", map[string]string{"VisibilityTimeout": "35", "RedrivePolicy": policy}); err != nil {
		return nil, err
	}
	if st.target, err = mk("backfill-target", nil); err != nil {
		return nil, err
	}
	if st.failed, err = mk("backfill-failure", nil); err != nil {
		return nil, err
	}
	st.claims = "backfill-claims-" + suffix
	if err := localaws.CreateClaimsTable(ctx, dynamodb.NewFromConfig(moto), st.claims); err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
		return nil, fmt.Errorf("backfill: create bucket: %w", err)
	}
	for i := range c.Objects {
		key := fmt.Sprintf("exports/2026-11/part-%03d.jsonl", i)
		var b strings.Builder
		for j := range c.Records {
			fmt.Fprintf(&b, `{"order":%d,"part":%d,"value":"order %d of part %d"}`+"\n", j, i, j, i)
		}
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(b.String())}); err != nil {
			return nil, fmt.Errorf("backfill: upload %s: %w", key, err)
		}
	}
	return st, nil
}

// buildCLI builds the s3sqs command into dir.
func buildCLI(dir string) (string, error) {
	bin := filepath.Join(dir, "s3sqs")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/s3sqs")
	cmd.Dir = moduleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("backfill: build s3sqs: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot is the folder of go.mod, from the working directory up.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// transcript records the commands as a shell session shows them, each
// command's output after it; commands running at once write in turn.
type transcript struct {
	// names replaces the stand-ins' generated names with the variables
	// that hold them, so that the transcript reads the same on every run.
	names *strings.Replacer
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (t *transcript) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// run runs the CLI and writes the command and its output.
func (t *transcript) run(ctx context.Context, cli string, env []string, args ...string) (string, error) {
	var out bytes.Buffer
	err := t.exec(ctx, cli, env, &out, args)
	t.mu.Lock()
	fmt.Fprintf(&t.buf, "$ s3sqs %s\n%s", t.names.Replace(strings.Join(args, " ")), t.names.Replace(out.String()))
	t.mu.Unlock()
	return out.String(), err
}

// runAsync runs the CLI, writing its command at once and each line of its
// output as it comes, among the other commands'.
func (t *transcript) runAsync(ctx context.Context, cli string, env []string, args ...string) (string, error) {
	t.mu.Lock()
	fmt.Fprintf(&t.buf, "$ s3sqs %s &\n", t.names.Replace(strings.Join(args, " ")))
	t.mu.Unlock()
	var all bytes.Buffer
	w := &lineWriter{t: t, all: &all}
	err := t.exec(ctx, cli, env, w, args)
	return all.String(), err
}

func (t *transcript) exec(ctx context.Context, cli string, env []string, out io.Writer, args []string) error {
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("backfill: s3sqs %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

type lineWriter struct {
	t       *transcript
	all     *bytes.Buffer
	pending []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.all.Write(p)
	w.pending = append(w.pending, p...)
	if i := bytes.LastIndexByte(w.pending, '\n'); i >= 0 {
		w.t.mu.Lock()
		w.t.buf.WriteString(w.t.names.Replace(string(w.pending[:i+1])))
		w.t.mu.Unlock()
		w.pending = append(w.pending[:0], w.pending[i+1:]...)
	}
	return len(p), nil
}
