package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/iamrecord"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// operatorStack is a deployed stack as the stand-ins hold it: the outputs
// the docs' operator example names, as variables.
type operatorStack struct {
	vars map[string]string
	// arns binds the ARNs the template's operator policy names (a
	// resource's logical ID and attribute) to the stand-ins'.
	arns map[string]string
}

// TestOperatorPolicy runs the operator's example of docs/deploy-cdk.md
// (each `s3sqs` line of the code block under "Operating a run") against
// the stand-ins, as a stack with datasets my-lake/exports/ holds them,
// through proxies that record the IAM action and resource of every
// request; then it holds template.yaml's OperatorPolicy (which the SAM
// parity check holds equal to the CDK stack's) to the calls: every call
// is allowed by it, and every action of it is used by a call, but for a
// few named with the flag they serve, so that the policy is what the
// documented commands need. A call outside
// the stack is refused by the same check, so that it can fail.
func TestOperatorPolicy(t *testing.T) {
	stack := newOperatorStack(t)
	// moto_server stands in for all three services: unlike fauxqs it has
	// ListDeadLetterSourceQueues, which redrive -dlq calls (without it,
	// redrive falls back to reading every queue's RedrivePolicy).
	rec := iamrecord.Start(t, localaws.Endpoint(t, localaws.EnvMoto), iamrecord.Options{})
	for _, v := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Setenv(v, rec.URL())
	}

	examples := operatorExamples(t, "../../docs/deploy-cdk.md")
	if len(examples) < 8 {
		t.Fatalf("found %d commands under \"Operating a run\" in deploy-cdk.md; the scan is broken", len(examples))
	}
	var calls []iamrecord.Call
	for _, ex := range examples {
		args := stack.expand(t, ex)
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s\n%s", ex, code, errOut, out)
		}
		calls = append(calls, rec.Calls()...)
	}
	verdict := checkPolicy(t, stack, calls)
	for _, d := range verdict.Denied {
		t.Errorf("the operator policy does not allow %s on %s (%s)", d.Action, d.Resource, d.Operation)
	}
	// Actions the policy grants for what the example does not show, each
	// for a flag of a command it shows.
	beyond := map[string]string{
		"sqs:GetQueueUrl":             "fanout -target-queue-name",
		"s3:ListBucketVersions":       "fanout -versions (replays of every version)",
		"s3:GetObjectVersion":         "reads pinned to a version (fanout -keys of a versioned bucket, redrive -reread)",
		"sqs:ChangeMessageVisibility": "redrive hands back a message it could not send",
	}
	for _, s := range verdict.Unused {
		action, _, _ := strings.Cut(s, " on ")
		if _, ok := beyond[action]; ok {
			continue
		}
		t.Errorf("no documented command uses this action of the operator policy: %s", s)
	}

	// The check can fail: a call on the output queue, which no command
	// of the example touches, and a read outside the dataset's prefix.
	outside := []iamrecord.Call{
		{Action: "sqs:SendMessage", Resource: stack.arns["OutputQueue.Arn"], Operation: "SendMessage"},
		{Action: "s3:GetObject", Resource: "arn:aws:s3:::my-lake/private/a.jsonl", Operation: "GET object"},
		{Action: "s3:ListBucket", Resource: "arn:aws:s3:::my-lake", Context: map[string]string{"s3:prefix": "private/"}, Operation: "ListObjects"},
	}
	if v := checkPolicy(t, stack, outside); len(v.Denied) != len(outside) {
		t.Errorf("calls outside the stack: %d denied, want %d: %+v", len(v.Denied), len(outside), v.Denied)
	}
}

// policyVerdict is what tools/samparity/operator.py answers.
type policyVerdict struct {
	Denied []iamrecord.Call `json:"denied"`
	Unused []string         `json:"unused"`
}

// checkPolicy asks tools/samparity/operator.py to evaluate calls against
// template.yaml's OperatorPolicy at the test stack's parameters.
func checkPolicy(t *testing.T, stack operatorStack, calls []iamrecord.Call) policyVerdict {
	t.Helper()
	in, err := json.Marshal(map[string]any{
		"parameters": map[string]string{"DatasetBucket1": "my-lake", "DatasetPrefixes1": "exports/", "KeyPrefix": "incoming/"},
		"bind":       stack.arns,
		"calls":      calls,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", "../../tools/samparity/operator.py", "../../template.yaml")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("operator.py: %v\n%s", err, stderr.String())
	}
	var v policyVerdict
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("operator.py: %v\n%s", err, out)
	}
	return v
}

// newOperatorStack creates the stack's queues, table and buckets on the
// stand-ins, with a dataset to plan, a refused record on the failure
// queue and a task on the work DLQ, so that each command of the example
// has work to do.
func newOperatorStack(t *testing.T) operatorStack {
	t.Helper()
	ctx := t.Context()
	s3c := motoS3(t)
	sqsc := sqs.NewFromConfig(localaws.Moto(t))
	_, table := localaws.ClaimsTable(t)
	source := "operator-source-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	for _, b := range []string{"my-lake", source} {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil && !strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
			t.Fatal(err)
		}
	}
	for _, o := range [][3]string{
		{"my-lake", "exports/2024/a.jsonl", "{\"n\":1}\n{\"n\":2}\n"},
		{"my-lake", "exports/2024/b.jsonl", "{\"n\":3}\n"},
		{source, "incoming/x.jsonl", "{\"n\":4}\n"},
	} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(o[0]), Key: aws.String(o[1]), Body: strings.NewReader(o[2])}); err != nil {
			t.Fatal(err)
		}
	}
	queues := map[string]string{}
	for _, q := range []string{"WorkDLQ", "WorkQueue", "FailureQueue", "TargetQueue", "IngestDLQ", "IngestQueue", "OutputQueue"} {
		var attrs map[string]string
		if dlq, ok := queues[strings.Replace(q, "Queue", "DLQ", 1)]; ok {
			attrs = map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + queueARN(t, sqsc, dlq) + `","maxReceiveCount":"3"}`}
		}
		queues[q] = localaws.CreateQueue(t, sqsc, "-"+strings.ToLower(q), attrs)
	}
	refused, _ := json.Marshal(engine.Failure{RunID: "backfill-1", Source: "s3://my-lake/exports/2024/a.jsonl", Code: "MessageTooLarge", Message: "refused", Body: `{"n":1}`})
	task := `{"kind":"chunk"}`
	notification := `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"` + source + `"},"object":{"key":"incoming/x.jsonl","size":8}}}]}`
	for q, body := range map[string]string{"FailureQueue": string(refused), "WorkDLQ": task, "IngestDLQ": notification} {
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queues[q]), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	s := operatorStack{
		vars: map[string]string{
			"WORK_QUEUE_URL": queues["WorkQueue"], "WORK_DLQ_URL": queues["WorkDLQ"], "FAILURE_QUEUE_URL": queues["FailureQueue"],
			"TARGET_QUEUE_URL": queues["TargetQueue"], "INGEST_QUEUE_URL": queues["IngestQueue"], "INGEST_DLQ_URL": queues["IngestDLQ"],
			"CLAIMS_TABLE_NAME": table, "SOURCE_BUCKET_NAME": source,
		},
		arns: map[string]string{
			"ClaimsTable.Arn": "arn:aws:dynamodb:" + localaws.Region + ":123456789012:table/" + table,
			"SourceBucket":    source,
		},
	}
	for q, url := range queues {
		s.arns[q+".Arn"] = queueARN(t, sqsc, url)
	}
	return s
}

// expand splits an example into the CLI's arguments with the stack's
// variables set, and adds -s3-path-style where the command reads S3 (the
// stand-in needs it).
func (s operatorStack) expand(t *testing.T, example string) []string {
	t.Helper()
	var args []string
	for _, w := range shellWords(example)[1:] {
		if m := docVar.FindStringSubmatch(w); m != nil {
			v, ok := s.vars[m[1]]
			if !ok {
				t.Fatalf("%s: no output %s in the test's stack", example, m[1])
			}
			w = v
		}
		args = append(args, w)
	}
	switch args[0] {
	case "fanout", "redrive", "reconcile":
		args = append(args, "-s3-path-style")
	}
	return args
}

// operatorExamples returns the `s3sqs` command lines of the first code
// block under the heading "Operating a run" of file, continuation lines
// joined.
func operatorExamples(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Operating a run\n")
	if !ok {
		t.Fatalf("%s has no section \"Operating a run\"", file)
	}
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var out []string
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && !strings.HasPrefix(line, "s3sqs ") {
			continue
		}
		cur += " " + strings.TrimSuffix(line, `\`)
		if !strings.HasSuffix(line, `\`) {
			out = append(out, strings.TrimSpace(cur))
			cur = ""
		}
	}
	return out
}
