package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/simulate"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// stepAnswerLost passes every SendMessageBatch on to SQS, but answers the
// first one that carries a planning step with an error, as when the
// connection resets after SQS took the request.
type stepAnswerLost struct {
	sqsbatch.API
	lost bool
}

func (s *stepAnswerLost) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.API.SendMessageBatch(ctx, in, opts...)
	for _, e := range in.Entries {
		if _, perr := worktask.ParsePlan(aws.ToString(e.MessageBody)); perr == nil && err == nil && !s.lost {
			s.lost = true
			return nil, errors.New("connection reset after the request was sent")
		}
	}
	return out, err
}

// TestPlanStepRedeliveredKeepsItsExtent delivers a planning step of three
// keys twice: the first delivery runs out of time after the first key and
// queues a next step for the other two, but the answer to that send is
// lost, so the step fails and comes back; the second delivery has time for
// all three keys. It plans to where the first one stopped and queues the
// same next step, so that the run counts the one next step SQS holds, and
// each key's task once. Planning the three keys, it left the first
// delivery's step on the queue counted nowhere (status said done while it
// waited), and that step, run, counted the last two keys' tasks again.
func TestPlanStepRedeliveredKeepsItsExtent(t *testing.T) {
	m := newModels(t)
	keys := []string{"k0.jsonl", "k1.jsonl", "k2.jsonl"}
	for _, k := range keys {
		m.put(k, 10)
	}
	runs := runstate.NewTable(simulate.NewDynamoModel(nil), "runs", runstate.TableOptions{})
	opts := engine.Options{
		Target: sqsbatch.Queue{URL: m.target, MaxMessageSize: 1 << 20}, WorkQueueURL: m.work, Planning: engine.Planning{Concurrency: 1},
		Claims: simulate.NewClaimsModel(nil), Control: engine.Control{Runs: runs}, Send: sqsbatch.Options{MaxAttempts: 1},
	}
	opts.Plan.ChunkSize = 1 << 10
	step := worktask.Plan{RunID: "run-1", Source: dataset.Source{Bucket: "lake", Keys: keys}, Step: 1}

	ctx, stop := workContext(t)
	defer stop()
	progress := &engine.Progress{}
	first := opts
	first.Progress = progress
	r, err := engine.New(t.Context(), gatedS3{S3API: m.s3, planned: progress, stopWork: stop}, &stepAnswerLost{API: simulate.NewSQSClient(m.sqs)}, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PlanStep(ctx, step); err == nil {
		t.Fatal("first delivery succeeded; want its lost answer to fail it")
	}

	r, err = engine.New(t.Context(), m.s3, simulate.NewSQSClient(m.sqs), opts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.PlanStep(t.Context(), step)
	if err != nil || !rep.PlanContinued {
		t.Fatalf("second delivery: %+v, %v; want the next step queued again", rep, err)
	}
	// Run every planning step the work queue holds, each once (the claims
	// store would skip a second message of one).
	ran := map[string]bool{}
	for _, msg := range m.sqs.Messages(m.work) {
		p, err := worktask.ParsePlan(msg.Body)
		if err != nil || ran[p.ID()] {
			continue
		}
		ran[p.ID()] = true
		if _, err := r.PlanStep(t.Context(), p); err != nil {
			t.Fatalf("step %d: %v", p.Step, err)
		}
	}
	run, err := runs.Get(t.Context(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if run.TasksPlanned != 3 || run.Objects != 3 || run.StepsQueued != 2 || run.StepsDone != 2 || len(ran) != 1 {
		t.Errorf("run counts %+v after %d distinct steps ran; want one next step run, 3 tasks and objects planned, 2 steps queued and done", run.Counters, len(ran))
	}
	var tasks []string
	for _, msg := range m.sqs.Messages(m.work) {
		if task, err := worktask.Parse(msg.Body); err == nil {
			tasks = append(tasks, task.Chunk.Key)
		}
	}
	if got := strings.Join(tasks, ","); strings.Count(got, "k1") == 0 || strings.Count(got, "k2") == 0 {
		t.Errorf("work queue tasks of %s; want each key's", got)
	}
}
