package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/simulate"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The tests in this file run the engine's run paths against the
// in-process S3 and SQS models of internal/testenv/simulate, which its
// conformance tests hold to the stand-ins: they need no stand-in (run them
// with the stand-ins' variables unset), and the target's attributes are
// given, not fetched.

// models is an engine over the in-process models: a bucket "lake", a
// target queue and a work queue.
type models struct {
	s3     *simulate.S3Model
	sqs    *simulate.SQSModel
	target string
	work   string
}

func newModels(t *testing.T) *models {
	t.Helper()
	m := &models{s3: simulate.NewS3Model(), sqs: simulate.NewSQSModel(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	m.s3.CreateBucket("lake", false)
	m.target = m.sqs.CreateQueue("target", 0, false)
	m.work = m.sqs.CreateQueue("work", 0, false)
	return m
}

// runner returns a Runner over the models, reading through s3c (the S3
// model when nil), with 1 KiB chunks.
func (m *models) runner(t *testing.T, opts engine.Options, s3c engine.S3API) *engine.Runner {
	t.Helper()
	if s3c == nil {
		s3c = m.s3
	}
	opts.Target = sqsbatch.Queue{URL: m.target, MaxMessageSize: 1 << 20}
	opts.Plan.ChunkSize = 1 << 10
	r, err := engine.New(t.Context(), s3c, simulate.NewSQSClient(m.sqs), opts)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	return r
}

// put writes an object of n JSON Lines records of 21 bytes and returns
// them.
func (m *models) put(key string, n int) []string {
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"key":"%s","n":"%03d"}`, key[:1], i))
	}
	m.s3.Put("lake", key, []byte(strings.Join(recs, "\n")+"\n"), "")
	return recs
}

// bodies returns the bodies url's queue holds, sorted.
func (m *models) bodies(url string) []string {
	var out []string
	for _, msg := range m.sqs.Messages(url) {
		out = append(out, msg.Body)
	}
	slices.Sort(out)
	return out
}

// tasks returns the chunk tasks on the work queue, and fails on anything
// else there.
func (m *models) tasks(t *testing.T) []worktask.Task {
	t.Helper()
	var out []worktask.Task
	for _, msg := range m.sqs.Messages(m.work) {
		task, err := worktask.Parse(msg.Body)
		if err != nil {
			t.Fatalf("work queue message %s: %v", msg.Body, err)
		}
		out = append(out, task)
	}
	return out
}

// TestRunInline sends a small dataset in the invocation that plans it:
// every record once, under its record id, nothing on the work queue.
func TestRunInline(t *testing.T) {
	m := newModels(t)
	want := append(m.put("a.jsonl", 120), m.put("b.jsonl", 30)...)
	slices.Sort(want)
	r := m.runner(t, engine.Options{WorkQueueURL: m.work}, nil)
	rep, err := r.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: "lake", All: true}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queued || rep.Objects != 2 || rep.Chunks < 3 || rep.RecordsSent != int64(len(want)) || rep.TasksQueued != 0 {
		t.Errorf("report %+v; want 2 objects in 3 chunks or more, %d records sent here", rep, len(want))
	}
	if diff := cmp.Diff(want, m.bodies(m.target)); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	ids := map[string]bool{}
	for _, msg := range m.sqs.Messages(m.target) {
		ids[msg.Attributes[engine.AttrRecordID]] = true
	}
	a, err := dataset.Head(t.Context(), m.s3, "lake", "a.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	if first := engine.RecordID(a, 0); len(ids) != len(want) || !ids[first] {
		t.Errorf("%d record ids for %d records, a.jsonl's first (%s) among them: %v", len(ids), len(want), first, ids[first])
	}
	if n := len(m.sqs.Messages(m.work)); n != 0 {
		t.Errorf("%d messages on the work queue; want none", n)
	}
}

// TestRunToWorkQueue sends a dataset larger than InlineMaxBytes: its chunk
// tasks go to the work queue and nothing to the target, until the tasks
// are run, which sends every record once.
func TestRunToWorkQueue(t *testing.T) {
	m := newModels(t)
	want := append(m.put("a.jsonl", 120), m.put("b.jsonl", 30)...)
	slices.Sort(want)
	r := m.runner(t, engine.Options{WorkQueueURL: m.work, Planning: engine.Planning{InlineMaxBytes: 1 << 10}}, nil)
	rep, err := r.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: "lake", All: true}})
	if err != nil {
		t.Fatal(err)
	}
	tasks := m.tasks(t)
	if !rep.Queued || rep.RecordsSent != 0 || rep.TasksQueued != len(tasks) || len(tasks) != rep.Chunks || len(tasks) < 3 {
		t.Fatalf("report %+v with %d tasks on the work queue; want every chunk queued, nothing sent", rep, len(tasks))
	}
	if n := len(m.sqs.Messages(m.target)); n != 0 {
		t.Fatalf("%d messages on the target before any task ran", n)
	}
	for i, res := range r.RunTasks(t.Context(), tasks, 0) {
		if res.Err != nil || res.Continuation != nil {
			t.Errorf("task %s: %v, continuation %v", tasks[i].ID(), res.Err, res.Continuation)
		}
	}
	if diff := cmp.Diff(want, m.bodies(m.target)); diff != "" {
		t.Errorf("target after the tasks ran (-want +got):\n%s", diff)
	}
}

// gatedS3 pins "k1.jsonl" only once an object has been planned, and then
// ends the work context: planning stops after the first key.
type gatedS3 struct {
	engine.S3API
	planned  *engine.Progress
	stopWork context.CancelFunc
}

func (g gatedS3) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if aws.ToString(in.Key) == "k1.jsonl" {
		for deadline := time.Now().Add(5 * time.Second); g.planned.ObjectsPlanned.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		g.stopWork()
	}
	return g.S3API.HeadObject(ctx, in, opts...)
}

// workContext returns a work context that stop ends while its send context
// (see partialbatch.SendContext) goes on, as a Lambda handler's do near the
// invocation's deadline.
func workContext(t *testing.T) (ctx context.Context, stop context.CancelFunc) {
	parent, cancel := context.WithTimeout(t.Context(), time.Hour)
	t.Cleanup(cancel)
	work, cancelWork := partialbatch.Deadlines(parent, time.Minute, nil)
	t.Cleanup(cancelWork)
	return context.WithCancel(work)
}

// TestPlanStepContinues runs a planning step of three keys whose work
// context ends once the first is planned: the first key's tasks and a next
// step that carries the two keys left go to the work queue; that step,
// run, plans the rest.
func TestPlanStepContinues(t *testing.T) {
	m := newModels(t)
	keys := []string{"k0.jsonl", "k1.jsonl", "k2.jsonl"}
	for _, k := range keys {
		m.put(k, 10)
	}
	ctx, stop := workContext(t)
	defer stop()
	progress := &engine.Progress{}
	r := m.runner(t, engine.Options{WorkQueueURL: m.work, Planning: engine.Planning{Concurrency: 1}, Progress: progress}, gatedS3{S3API: m.s3, planned: progress, stopWork: stop})
	step := worktask.Plan{RunID: "run-1", Source: dataset.Source{Bucket: "lake", Keys: keys}, Step: 1}
	rep, err := r.PlanStep(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Queued || !rep.PlanContinued || rep.Objects != 1 || rep.TasksQueued != 1 {
		t.Fatalf("report %+v; want k0's one task queued and planning continued", rep)
	}
	var next []worktask.Plan
	var queued []string
	for _, msg := range m.sqs.Messages(m.work) {
		if p, err := worktask.ParsePlan(msg.Body); err == nil {
			next = append(next, p)
			continue
		}
		task, err := worktask.Parse(msg.Body)
		if err != nil {
			t.Fatalf("work queue message %s: %v", msg.Body, err)
		}
		queued = append(queued, task.Chunk.Key)
	}
	if !cmp.Equal(queued, []string{"k0.jsonl"}) || len(next) != 1 || next[0].Step != 2 || !cmp.Equal(next[0].Source.Keys, keys[1:]) {
		t.Fatalf("work queue: tasks of %v, next steps %+v; want k0's task and one step 2 of k1 and k2", queued, next)
	}
	rep, err = m.runner(t, engine.Options{WorkQueueURL: m.work}, nil).PlanStep(t.Context(), next[0])
	if err != nil || rep.Objects != 2 || rep.PlanContinued || rep.TasksQueued != 2 {
		t.Errorf("next step: report %+v, %v; want k1 and k2 planned, one task each", rep, err)
	}
}

// cutS3 ends the work context once the reader has taken 100 bytes of an
// object's body.
type cutS3 struct {
	engine.S3API
	stopWork context.CancelFunc
}

func (c cutS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := c.S3API.GetObject(ctx, in, opts...)
	if err == nil {
		out.Body = &cutBody{ReadCloser: out.Body, stop: c.stopWork}
	}
	return out, err
}

// cutBody hands out its first 100 bytes, then ends the work context and
// hands out the rest.
type cutBody struct {
	io.ReadCloser
	stop context.CancelFunc
	read atomic.Int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.read.Load() >= 100 {
		b.stop()
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), 100)])
	b.read.Add(int64(n))
	return n, err
}

// TestRunTaskResumes runs a task whose work context ends part-way through
// its chunk: the records read are sent and the rest is its continuation,
// which, run, sends exactly the records the first run did not.
func TestRunTaskResumes(t *testing.T) {
	m := newModels(t)
	want := m.put("a.jsonl", 40) // 880 bytes: one chunk
	slices.Sort(want)
	ctx, stop := workContext(t)
	defer stop()
	plain := m.runner(t, engine.Options{}, nil)
	obj, err := dataset.Head(t.Context(), m.s3, "lake", "a.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := plain.Tasks(t.Context(), "run-1", obj, worktask.Overrides{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks %v (%v); want one", tasks, err)
	}
	res := m.runner(t, engine.Options{}, cutS3{S3API: m.s3, stopWork: stop}).RunTasks(ctx, tasks[:1], 0)[0]
	first := m.bodies(m.target)
	if res.Err != nil || res.Continuation == nil || res.RecordsSent != int64(len(first)) || len(first) == 0 || len(first) == len(want) {
		t.Fatalf("first run: %+v, %d of %d records on the target; want some sent and a continuation", res, len(first), len(want))
	}
	if c := res.Continuation; c.Chunk.ID() != tasks[0].Chunk.ID() || c.ResumeAt <= tasks[0].Chunk.Start {
		t.Fatalf("continuation %+v; want the same chunk from past its start", c)
	}
	res = plain.RunTasks(t.Context(), []worktask.Task{*res.Continuation}, 0)[0]
	if res.Err != nil || res.Continuation != nil || res.RecordsSent != int64(len(want)-len(first)) {
		t.Errorf("continuation: %+v; want the other %d records sent", res, len(want)-len(first))
	}
	if diff := cmp.Diff(want, m.bodies(m.target)); diff != "" {
		t.Errorf("target after both runs (-want +got): each record once\n%s", diff)
	}
}

// TestFailureFindsItsTask runs the tasks of two objects in one send, in
// which SQS's rules refuse one record of the second: the failure is
// charged to that task, at that record's offset, and the other task's
// records all arrive.
func TestFailureFindsItsTask(t *testing.T) {
	m := newModels(t)
	wantA := m.put("a.jsonl", 30)
	bad := `{"value":"x` + "\uffff" + `"}`
	m.s3.Put("lake", "b.jsonl", []byte(`{"value":"b0"}`+"\n"+bad+"\n"+`{"value":"b2"}`+"\n"), "")
	var failures bytes.Buffer
	r := m.runner(t, engine.Options{FailureWriter: &failures}, nil)
	var tasks []worktask.Task
	for _, key := range []string{"a.jsonl", "b.jsonl"} {
		obj, err := dataset.Head(t.Context(), m.s3, "lake", key, "")
		if err != nil {
			t.Fatal(err)
		}
		ts, err := r.Tasks(t.Context(), "run-1", obj, worktask.Overrides{})
		if err != nil || len(ts) != 1 {
			t.Fatalf("tasks of %s: %v (%v); want one", key, ts, err)
		}
		tasks = append(tasks, ts...)
	}
	res := r.RunTasks(t.Context(), tasks, 0)
	if res[0].Err != nil || res[0].RecordsFailed != 0 || res[0].RecordsSent != int64(len(wantA)) {
		t.Errorf("a's task: %+v; want its %d records sent", res[0], len(wantA))
	}
	if res[1].Err != nil || res[1].RecordsFailed != 1 || res[1].RecordsSent != 2 {
		t.Errorf("b's task: %+v; want 2 records sent, 1 failed", res[1])
	}
	var f engine.Failure
	if err := json.Unmarshal(failures.Bytes(), &f); err != nil {
		t.Fatalf("failure output %q: %v", failures.String(), err)
	}
	if f.Source != "s3://lake/b.jsonl" || f.Offset != 15 || f.Code != string(sqsbatch.RuleInvalidCharacters) {
		t.Errorf("failure %+v; want b.jsonl's record at offset 15, InvalidCharacters", f)
	}
	if got := len(m.sqs.Messages(m.target)); got != len(wantA)+2 {
		t.Errorf("%d messages on the target; want %d", got, len(wantA)+2)
	}
}
