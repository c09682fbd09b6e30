package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// versionedStack is a stack whose bucket is a versioned one on moto, with
// keys of several versions under h/ (one since deleted, one a prefix of
// another). It returns each key's version ids, oldest first.
func versionedStack(t *testing.T, targetSuffix string) (*fanoutstack.Stack, map[string][]string) {
	t.Helper()
	st := fanoutstack.New(t, targetSuffix)
	st.S3 = localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	st.Bucket = localaws.VersionedBucket(t, st.S3, "history")
	ctx := t.Context()
	want := map[string][]string{}
	for i := range 12 {
		key := []string{"h/a.jsonl", "h/a.jsonl2", "h/b.jsonl", "h/gone.jsonl"}[i%4]
		out, err := st.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key),
			Body: strings.NewReader(fmt.Sprintf(`{"v":%d}`+"\n", i))})
		if err != nil {
			t.Fatal(err)
		}
		want[key] = append(want[key], aws.ToString(out.VersionId))
	}
	if _, err := st.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String("h/gone.jsonl")}); err != nil {
		t.Fatal(err)
	}
	return st, want
}

// announced returns, by key, the version ids the notifications in msgs
// name, in the order received, and fails t when a record id comes twice.
func announced(t *testing.T, msgs []sqstypes.Message) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	if _, ids := fanoutstack.Received(msgs); len(ids) != len(msgs) {
		t.Errorf("%d record ids in %d messages, want each once", len(ids), len(msgs))
	}
	for _, m := range msgs {
		b := aws.ToString(m.Body)
		n, err := s3event.Parse([]byte(b))
		if err != nil || len(n.Objects) != 1 {
			t.Fatalf("Parse = %+v, %v\n%s", n, err, b)
		}
		o := n.Objects[0]
		got[o.Key] = append(got[o.Key], o.VersionID)
	}
	return got
}

// TestReplayVersionsFIFO replays every version under a prefix to a FIFO
// target, inline and through the work queue: each key's versions, the
// deleted key's too, arrive once each, oldest first, in the key's one
// message group.
func TestReplayVersionsFIFO(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprint("queued=", queued), func(t *testing.T) {
			st, want := versionedStack(t, ".fifo")
			opts := engine.Options{Mode: worktask.ModeNotification}
			if queued {
				opts.Planning.InlineMaxBytes = 1
			}
			h, _ := st.Handler(t, opts, nil)
			rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{
				"bucket": st.Bucket, "prefix": "h/", "versions": true, "runId": "history"})
			if rep.Objects != 12 || rep.Queued != queued {
				t.Errorf("report %+v; want 12 object versions, queued %v", rep, queued)
			}
			if queued {
				var batch events.SQSEvent
				for i, m := range localaws.Drain(t, st.SQS, st.Work, time.Second) {
					batch.Records = append(batch.Records, taskMessage(fmt.Sprint("t", i), aws.ToString(m.Body)))
				}
				if len(batch.Records) != 4 {
					t.Fatalf("%d tasks on the work queue, want one per key", len(batch.Records))
				}
				resp := fanoutstack.Invoke[events.SQSEventResponse](t, h, t.Context(), batch)
				if len(resp.BatchItemFailures) != 0 {
					t.Fatalf("failures %v", resp.BatchItemFailures)
				}
			}
			msgs := localaws.Drain(t, st.SQS, st.Target, 2*time.Second)
			groups := map[string]string{}
			for _, m := range msgs {
				n, _ := s3event.Parse([]byte(aws.ToString(m.Body)))
				key, group := n.Objects[0].Key, m.Attributes["MessageGroupId"]
				if g, ok := groups[key]; ok && g != group {
					t.Errorf("%s in groups %s and %s, want one", key, g, group)
				}
				groups[key] = group
			}
			if diff := cmp.Diff(want, announced(t, msgs)); diff != "" {
				t.Errorf("versions announced by key, in order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplayVersionsStandard replays every version of named keys to a
// standard queue: one task and one notification per version, each once.
func TestReplayVersionsStandard(t *testing.T) {
	st, want := versionedStack(t, "")
	h, _ := st.Handler(t, engine.Options{}, nil)
	keys := []string{"h/a.jsonl", "h/gone.jsonl"}
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{
		"bucket": st.Bucket, "keys": keys, "versions": true, "mode": "notification", "runId": "history"})
	if rep.Objects != 6 || rep.Chunks != 6 || rep.RecordsSent != 6 {
		t.Errorf("report %+v; want 6 versions, a task each, 6 sent", rep)
	}
	got := announced(t, localaws.Drain(t, st.SQS, st.Target, 2*time.Second))
	for _, k := range keys {
		slices.Sort(got[k])
		slices.Sort(want[k])
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("%s: announced %v, want %v", k, got[k], want[k])
		}
	}
	if len(got) != len(keys) {
		t.Errorf("announced %v, want only %v", got, keys)
	}
}

// TestReplayVersionsRefused refuses every version outside notification
// mode and with a manifest, before anything is listed.
func TestReplayVersionsRefused(t *testing.T) {
	st, _ := versionedStack(t, "")
	for _, c := range []struct {
		name string
		opts engine.Options
		req  map[string]any
		want string
	}{
		{"record mode", engine.Options{}, map[string]any{"bucket": st.Bucket, "prefix": "h/", "versions": true}, "needs mode notification"},
		{"chunk mode asked", engine.Options{Mode: worktask.ModeNotification}, map[string]any{"bucket": st.Bucket, "prefix": "h/", "versions": true, "mode": "chunk"}, "needs mode notification"},
		{"manifest", engine.Options{Mode: worktask.ModeNotification}, map[string]any{"manifest": "s3://" + st.Bucket + "/m.json", "versions": true}, "versions is not used with manifest"},
	} {
		h, _ := st.Handler(t, c.opts, nil)
		payload, err := json.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Invoke(t.Context(), payload); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Invoke = %v, want %q", c.name, err, c.want)
		}
	}
	if msgs := localaws.Drain(t, st.SQS, st.Target, time.Second); len(msgs) != 0 {
		t.Errorf("target holds %d messages, want none", len(msgs))
	}
}

// TestReplayVersionsFiltered replays every version under a prefix with
// filters. To a standard queue a filter by size leaves out exactly the
// versions over it, counted; to a FIFO queue, where a key's versions go
// as one run, filters by size (the request's or the runner's) are
// refused before anything is sent, and a time filter is taken.
func TestReplayVersionsFiltered(t *testing.T) {
	st, _ := versionedStack(t, "")
	h, _ := st.Handler(t, engine.Options{}, nil)
	// Versions 0 to 9 are 8 bytes ({"v":0}), 10 and 11 are 9.
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{
		"bucket": st.Bucket, "prefix": "h/", "versions": true, "mode": "notification", "maxSize": 8, "runId": "filtered"})
	if rep.Objects != 10 || rep.RecordsSent != 10 || rep.ObjectsFiltered != 2 || rep.FilteredBy["maxSize"] != 2 || rep.BytesFiltered != 18 {
		t.Errorf("report %+v; want 10 versions sent, 2 of 9 bytes left out by maxSize", rep.Stats)
	}
	if n := len(localaws.Drain(t, st.SQS, st.Target, time.Second)); n != 10 {
		t.Errorf("%d notifications, want 10", n)
	}

	fifo, _ := versionedStack(t, ".fifo")
	for _, c := range []struct {
		name string
		opts engine.Options
		req  map[string]any
		want string
	}{
		{"the request's", engine.Options{}, map[string]any{"maxSize": 8}, "which minSize, maxSize and storageClasses could cut in the middle"},
		{"the runner's", engine.Options{Planning: engine.Planning{Filters: dataset.Filters{StorageClasses: []string{"STANDARD"}}}}, nil, "which minSize, maxSize and storageClasses could cut in the middle"},
		{"time", engine.Options{}, map[string]any{"modifiedBefore": "2100-01-01T00:00:00Z"}, ""},
	} {
		h, _ := fifo.Handler(t, c.opts, nil)
		req := map[string]any{"bucket": fifo.Bucket, "prefix": "h/", "versions": true, "mode": "notification"}
		for k, v := range c.req {
			req[k] = v
		}
		payload, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Invoke(t.Context(), payload)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s filters: Invoke = %v, want %q", c.name, err, c.want)
		}
	}
	if n := len(localaws.Drain(t, fifo.SQS, fifo.Target, time.Second)); n != 12 {
		t.Errorf("FIFO target holds %d notifications, want the 12 of the time-filtered replay alone", n)
	}
}

// TestDryRunNotification dry-runs replays, of the current versions and of
// every version, to a standard and a FIFO queue: the counts are the real
// run's, and the dry run sends nothing.
func TestDryRunNotification(t *testing.T) {
	for _, c := range []struct {
		fifo     string
		versions bool
		objects  int
	}{{"", false, 3}, {"", true, 12}, {".fifo", false, 3}, {".fifo", true, 12}} {
		t.Run(fmt.Sprintf("fifo=%q versions=%v", c.fifo, c.versions), func(t *testing.T) {
			st, _ := versionedStack(t, c.fifo)
			h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeNotification}, nil)
			req := map[string]any{"bucket": st.Bucket, "prefix": "h/", "versions": c.versions, "dryRun": true}
			dry := fanoutstack.Invoke[engine.Report](t, h, t.Context(), req)
			d := dry.DryRun
			if d == nil || d.Counted != engine.CountedExact || d.Objects != c.objects {
				t.Fatalf("dry run %+v, report %+v; want exact counts of %d objects", d, dry, c.objects)
			}
			if msgs := localaws.Drain(t, st.SQS, st.Target, time.Second); len(msgs) != 0 {
				t.Fatalf("the dry run sent %d messages", len(msgs))
			}
			delete(req, "dryRun")
			rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), req)
			got := [][2]int64{{d.Records, rep.RecordsRead}, {d.Messages, rep.Messages}, {d.Requests, rep.Requests},
				{int64(d.Chunks), int64(rep.Chunks)}, {int64(d.Objects), int64(rep.Objects)}, {d.Messages, int64(len(localaws.Drain(t, st.SQS, st.Target, time.Second)))}}
			for i, name := range []string{"records", "messages", "requests", "chunks", "objects", "messages received"} {
				if got[i][0] != got[i][1] {
					t.Errorf("%s: dry run %d, real run %d", name, got[i][0], got[i][1])
				}
			}
			if d.Messages != int64(c.objects) {
				t.Errorf("dry run counts %d messages, want one per object version (%d)", d.Messages, c.objects)
			}
		})
	}
}

// TestReplayVersionRefused has SQS refuse the newest version's
// notification of one key on a FIFO target: the failure names that
// version, at offset 0, under its own record id, as a task of that
// version alone would; the other versions arrive.
func TestReplayVersionRefused(t *testing.T) {
	st, want := versionedStack(t, ".fifo")
	poison := want["h/b.jsonl"][len(want["h/b.jsonl"])-1]
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeNotification, ReportS3URI: "s3://" + st.Bucket + "/runs/"}, refusing(func(body string) bool {
		// The notification, not the failure that carries it.
		return strings.HasPrefix(body, `{"Records"`) && strings.Contains(body, poison)
	}))
	rep := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "h/", "versions": true, "runId": "refused"})
	if rep.RecordsSent != 11 || rep.RecordsFailed != 1 {
		t.Errorf("report %+v; want 11 sent, 1 failed", rep)
	}
	fl := onlyFailure(t, st)
	obj, err := dataset.Head(t.Context(), st.S3, st.Bucket, "h/b.jsonl", poison)
	if err != nil {
		t.Fatal(err)
	}
	if fl.Source != obj.URI() || fl.Version != poison || fl.Offset != 0 || fl.RecordID != engine.RecordID(obj, 0) || fl.Code != "InvalidParameterValue" {
		t.Errorf("failure %+v; want version %s at offset 0", fl, poison)
	}
	want["h/b.jsonl"] = want["h/b.jsonl"][:len(want["h/b.jsonl"])-1]
	if diff := cmp.Diff(want, announced(t, localaws.Drain(t, st.SQS, st.Target, 2*time.Second))); diff != "" {
		t.Errorf("versions announced (-want +got):\n%s", diff)
	}

	// The run report holds the failed version as a task of its own, which
	// run again announces that version alone.
	list, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), Prefix: aws.String("runs/refused/failed/")})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("failed tasks in the run report: %v, %v; want 1", list, err)
	}
	got, err := st.S3.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(st.Bucket), Key: list.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	var ft engine.FailedTask
	if err := json.NewDecoder(got.Body).Decode(&ft); err != nil {
		t.Fatal(err)
	}
	if ft.Task.Versions || ft.Task.Chunk.Object != obj || len(ft.Failures) != 1 || ft.Failures[0].Offset != 0 {
		t.Fatalf("failed task %+v; want the version's own task, its offset 0", ft)
	}
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}})
	if err != nil {
		t.Fatal(err)
	}
	if res, missing := r.RunRecords(t.Context(), ft.Task, []int64{0}); res.Err != nil || len(missing) != 0 || res.Stats.RecordsSent != 1 {
		t.Fatalf("RunRecords = %+v, missing %v", res, missing)
	}
	again := announced(t, localaws.Drain(t, st.SQS, st.Target, 2*time.Second))
	if !cmp.Equal(again, map[string][]string{"h/b.jsonl": {poison}}) {
		t.Errorf("run again, the failed task announced %v; want %s alone", again, poison)
	}
}

// TestReplayVersionsResume runs a key's versions task from where an
// earlier attempt stopped, after the key's oldest version, already sent,
// was deleted (as a lifecycle rule deletes noncurrent versions): the
// attempt announces the versions after it, none skipped. A versions task
// in record mode is refused, not read.
func TestReplayVersionsResume(t *testing.T) {
	st, want := versionedStack(t, ".fifo")
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Mode: worktask.ModeNotification, Target: sqsbatch.Queue{URL: st.Target},
		WorkQueueURL: st.Work, FailureQueueURL: st.Failure})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), engine.Request{Source: dataset.Source{Bucket: st.Bucket, Key: "h/a.jsonl", Versions: true}, RunID: "resume", Queue: true}); err != nil {
		t.Fatal(err)
	}
	msgs := localaws.Drain(t, st.SQS, st.Work, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d tasks queued, want 1", len(msgs))
	}
	task, err := worktask.Parse(aws.ToString(msgs[0].Body))
	if err != nil || !task.Versions || task.Chunk.End != 3 {
		t.Fatalf("task %+v, %v; want the key's 3 versions", task, err)
	}
	vs := want["h/a.jsonl"]
	if _, err := st.S3.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String("h/a.jsonl"), VersionId: aws.String(vs[0])}); err != nil {
		t.Fatal(err)
	}
	task.ResumeAt = 1
	res := r.RunTasks(t.Context(), []worktask.Task{task}, 1)
	if res[0].Err != nil || res[0].Stats.RecordsSent != 2 {
		t.Fatalf("result %+v; want the 2 versions after the first sent", res[0])
	}
	if diff := cmp.Diff(map[string][]string{"h/a.jsonl": vs[1:]}, announced(t, localaws.Drain(t, st.SQS, st.Target, 2*time.Second))); diff != "" {
		t.Errorf("announced (-want +got):\n%s", diff)
	}

	task.ResumeAt = 0
	task.Overrides = &worktask.Overrides{Mode: worktask.ModeRecord}
	var malformed *worktask.MalformedError
	if res := r.RunTasks(t.Context(), []worktask.Task{task}, 1); !errors.As(res[0].Err, &malformed) || res[0].Stats.RecordsRead != 0 {
		t.Errorf("a versions task in record mode: %+v; want it refused as malformed, nothing read", res[0])
	}
}

// TestDryRunNotificationSampled estimates a replay of every version from
// a sample of its keys: scaled by versions, not bytes, it counts what the
// run would send.
func TestDryRunNotificationSampled(t *testing.T) {
	st, _ := versionedStack(t, ".fifo")
	h, _ := st.Handler(t, engine.Options{Mode: worktask.ModeNotification}, nil)
	dry := fanoutstack.Invoke[engine.Report](t, h, t.Context(), map[string]any{"bucket": st.Bucket, "prefix": "h/", "versions": true,
		"dryRun": true, "dryRunOptions": map[string]any{"sampleChunks": 2}})
	d := dry.DryRun
	// Every key has 3 versions: 2 of the 4 keys' tasks stand for all 12.
	if d == nil || d.SampledChunks != 2 || d.Chunks != 4 || d.Messages != 12 || d.Records != 12 || d.Counted == engine.CountedExact {
		t.Errorf("dry run %+v; want 12 messages estimated from 2 of 4 tasks", d)
	}
}
