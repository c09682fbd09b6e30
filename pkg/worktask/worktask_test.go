package worktask

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

func TestParse(t *testing.T) {
	good := Task{RunID: "r1", ResumeAt: 40, Chunk: dataset.Chunk{
		Object: dataset.Object{Bucket: "lake", Key: "a b/c.jsonl", Size: 100, ETag: "e"},
		Index:  1, Count: 2, Start: 30, End: 100, Format: dataset.FormatJSONL,
	}}
	body, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(body)
	if err != nil || got.ID() != good.ID() || got.ResumeAt != 40 || got.Chunk.Key != "a b/c.jsonl" {
		t.Fatalf("Parse(%s) = %+v, %v; want the task back", body, got, err)
	}

	chunk := func(fields string) string {
		return `{"runId":"r1","chunk":{"bucket":"lake","key":"k.jsonl","size":100,"index":0,"count":1,"format":"jsonl",` + fields + `}}`
	}
	for _, tc := range []struct{ name, body, want string }{
		{"reversed range", chunk(`"start":50,"end":10`), "chunk range [50,10) is not a range"},
		{"negative start", chunk(`"start":-1,"end":10`), "chunk range [-1,10) is not a range"},
		{"index past count", `{"runId":"r","chunk":{"bucket":"b","key":"k","index":2,"count":2,"start":0,"end":1,"format":"text"}}`, "chunk index 2 of 2"},
		{"no count", `{"runId":"r","chunk":{"bucket":"b","key":"k","start":0,"end":1,"format":"text"}}`, "chunk index 0 of 0"},
		{"no key", `{"runId":"r","chunk":{"bucket":"b","count":1,"start":0,"end":1,"format":"text"}}`, "chunk.bucket and chunk.key are required"},
		{"auto format", `{"runId":"r","chunk":{"bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"auto"}}`, `chunk.format "auto" is not jsonl`},
		{"unknown format", `{"runId":"r","chunk":{"bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"xml"}}`, `chunk.format "xml" is not`},
		{"unknown compression", `{"runId":"r","chunk":{"bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"text","compression":"lz4"}}`, `chunk.compression "lz4"`},
		{"negative resume", `{"runId":"r","resumeAt":-3,"chunk":{"bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"text"}}`, "resumeAt -3 is negative"},
		{"unknown field", `{"runId":"r","resume":3,"chunk":{"bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"text"}}`, `unknown field "resume" (did you mean "resumeAt"?)`},
		{"wrong type", `{"runId":"r","chunk":{"bucket":"b","key":"k","count":"1","start":0,"end":1,"format":"text"}}`, "chunk.count: a string is not allowed here; want a number"},
		{"key twice", chunk(`"key":"other.jsonl","start":0,"end":10`), `duplicate field "chunk.key"`},
		{"field in another case", `{"runId":"r","chunk":{"Bucket":"b","key":"k","count":1,"start":0,"end":1,"format":"text"}}`, `unknown field "chunk.Bucket" (field names are case-sensitive: did you mean "chunk.bucket"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.body)
			var me *MalformedError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s): %v; want a *MalformedError that says %q", tc.body, err, tc.want)
			}
		})
	}
	for _, body := range []string{"", "not json", `{"Records":[]}`, `{"Type":"Notification"}`, `[1]`, `null`} {
		if _, err := Parse(body); !errors.Is(err, ErrNotTask) {
			t.Errorf("Parse(%q): %v; want ErrNotTask", body, err)
		}
	}
}

// FuzzParse checks that Parse never panics and that every task it accepts
// passes Validate and has a range that can be read.
func FuzzParse(f *testing.F) {
	f.Add(`{"runId":"r1","chunk":{"bucket":"lake","key":"k","size":9,"index":0,"count":1,"start":0,"end":9,"format":"jsonl"}}`)
	f.Add(`{"runId":"r1","resumeAt":4,"chunk":{"bucket":"lake","key":"k","index":1,"count":3,"start":4,"end":9,"format":"csv","csv":{"header":["a"]}},"overrides":{"mode":"chunk"}}`)
	f.Add(`{"chunk":{"start":9,"end":1}}`)
	f.Add(`{"chunk":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		task, err := Parse(body)
		if err != nil {
			var me *MalformedError
			if !errors.Is(err, ErrNotTask) && !errors.As(err, &me) {
				t.Fatalf("Parse(%q): %T %v; want ErrNotTask or *MalformedError", body, err, err)
			}
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatalf("Parse accepted %q, which Validate refuses: %v", body, err)
		}
		if c := task.Chunk; c.Start < 0 || c.End < c.Start || c.Index >= c.Count || task.ResumeAt < 0 {
			t.Fatalf("Parse accepted %q with chunk %+v", body, c)
		}
	})
}

func TestChainNext(t *testing.T) {
	// An object of 10 bytes in chunks of 4: [0,4) [4,8) [8,10).
	// The planner asks S3 for the Content-Encoding of an object it cuts.
	c := localaws.FakeS3(t)
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("chain")}); err != nil {
		t.Fatal(err)
	}
	put, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("chain"), Key: aws.String("k.jsonl"), Body: strings.NewReader("{}\n{}\n{}\n{")})
	if err != nil {
		t.Fatal(err)
	}
	etag := strings.Trim(aws.ToString(put.ETag), `"`)
	first := Task{RunID: "r", Chain: &Chain{Step: 4, Total: 10}, Chunk: dataset.Chunk{
		Object: dataset.Object{Bucket: "chain", Key: "k.jsonl", Size: 10, ETag: etag}, Count: 3, End: 4, Format: dataset.FormatJSONL}}
	planned := dataset.NewPlanner(c, dataset.PlanOptions{ChunkSize: 4})
	chunks, err := planned.Plan(t.Context(), first.Chunk.Object)
	if err != nil || len(chunks) != 3 {
		t.Fatalf("plan: %v %v", chunks, err)
	}
	at := first
	at.ResumeAt = 2
	for i := 1; i < 3; i++ {
		next, ok := at.Next()
		if !ok {
			t.Fatalf("no link after chunk %d", i-1)
		}
		if next.Chunk.ID() != chunks[i].ID() || next.Chunk.Index != i || next.ResumeAt != 0 {
			t.Errorf("link %d = %+v, want the planner's chunk %+v from its start", i, next.Chunk, chunks[i])
		}
		if err := next.Validate(); err != nil {
			t.Errorf("link %d: %v", i, err)
		}
		at = next
	}
	if _, ok := at.Next(); ok {
		t.Error("a link after the last chunk")
	}
	unchained := first
	unchained.Chain = nil
	if _, ok := unchained.Next(); ok {
		t.Error("a link after an unchained task")
	}
	bad := first
	bad.Chain = &Chain{Step: 0, Total: 10}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "chain step 0") {
		t.Errorf("a chain of step 0: %v", err)
	}
}

func TestParsePlan(t *testing.T) {
	step := Plan{RunID: "r1", Source: dataset.Source{Bucket: "lake", Prefix: "p/"}, Cursor: dataset.Cursor{After: "p/0042.jsonl"}, Step: 3}
	e, err := step.Entry(true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePlan(e.Body)
	if err != nil || got.ID() != step.ID() || got.Cursor != step.Cursor || got.Step != 3 {
		t.Fatalf("ParsePlan(%s) = %+v, %v; want the step back", e.Body, got, err)
	}
	if e.GroupID != step.ID() || e.DeduplicationID != step.ID() || len(step.ID()) != 32 {
		t.Errorf("FIFO entry ids %q %q, want the step's id", e.GroupID, e.DeduplicationID)
	}
	if _, err := Parse(e.Body); !errors.Is(err, ErrNotTask) {
		t.Errorf("a planning step read as a chunk task: %v", err)
	}
	moved := step
	moved.Cursor.After = "p/0043.jsonl"
	if moved.ID() == step.ID() {
		t.Error("two cursors, one id")
	}
	again := step
	again.Step = 4 // the same listing from the same place is the same step
	if again.ID() != step.ID() {
		t.Error("the step number changed the id")
	}
	for _, tc := range []struct{ name, body, want string }{
		{"no dataset", `{"runId":"r","plan":{"bucket":"b"},"cursor":{},"step":2}`, "names no dataset"},
		{"no run", `{"plan":{"bucket":"b","prefix":"p/"},"cursor":{},"step":2}`, "needs its runId"},
		{"unknown field", `{"runId":"r","plan":{"bucket":"b","prefix":"p/"},"cursor":{"startAfter":"x"},"step":2}`, `unknown field "startAfter"`},
		{"prefix twice", `{"runId":"r","plan":{"bucket":"b","prefix":"a/","prefix":"b/"},"cursor":{},"step":2}`, `duplicate field "plan.prefix"`},
		{"prefix in another case", `{"runId":"r","plan":{"bucket":"b","Prefix":"a/"},"cursor":{},"step":2}`, `unknown field "plan.Prefix"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan(tc.body)
			var me *MalformedError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParsePlan(%s): %v; want a *MalformedError that says %q", tc.body, err, tc.want)
			}
		})
	}
	for _, body := range []string{"", `{"Records":[]}`, `{"runId":"r","chunk":{}}`} {
		if _, err := ParsePlan(body); !errors.Is(err, ErrNotTask) {
			t.Errorf("ParsePlan(%q): %v; want ErrNotTask", body, err)
		}
	}
}

func TestTaskID(t *testing.T) {
	a := Task{RunID: "r1", Chunk: dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "k", ETag: "e"}, Count: 1, End: 9, Format: dataset.FormatText}}
	b := a
	b.RunID = "r2"
	if a.ID() == b.ID() {
		t.Error("the same chunk in two runs has one task id: a FIFO work queue would drop the second run's task")
	}
	again := a
	again.Chunk.Index = 0
	if again.ID() != a.ID() || len(a.ID()) != 32 {
		t.Errorf("task id %q is not deterministic or not 32 characters", a.ID())
	}
	resumed := a
	resumed.ResumeAt = 5
	if resumed.ID() != a.ID()+"-5" {
		t.Errorf("resumed task id %q, want %q", resumed.ID(), a.ID()+"-5")
	}
}

func TestParkedEntry(t *testing.T) {
	const body = `{"runId":"r","chunk":{}}`
	first, again := ParkedEntry("r", 1, body, true), ParkedEntry("r", 2, body, true)
	if first.Body != body || first.GroupID == "" || first.GroupID != again.GroupID {
		t.Errorf("FIFO entries %+v and %+v: want the body, and one group for one body", first, again)
	}
	if first.DeduplicationID == again.DeduplicationID || first.DeduplicationID != ParkedEntry("r", 1, body, true).DeduplicationID {
		t.Errorf("deduplication ids %q and %q: want one per parking, the same for the same parking", first.DeduplicationID, again.DeduplicationID)
	}
	if other := ParkedEntry("s", 1, body, true); other.DeduplicationID == first.DeduplicationID {
		t.Errorf("two runs' first parkings share deduplication id %q", first.DeduplicationID)
	}
	if std := ParkedEntry("r", 1, body, false); std.GroupID != "" || std.DeduplicationID != "" {
		t.Errorf("standard entry %+v: want no group or deduplication id", std)
	}
}
