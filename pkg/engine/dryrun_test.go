package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/fanoutstack"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// billingSQS passes every call to SQS and counts the SendMessageBatch
// requests to one queue and the requests SQS bills for them.
type billingSQS struct {
	sqsbatch.API
	queue            string
	mu               sync.Mutex
	requests, billed int64
}

func (b *billingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if aws.ToString(in.QueueUrl) == b.queue {
		n := 0
		for _, e := range in.Entries {
			n += len(aws.ToString(e.MessageBody))
			for k, a := range e.MessageAttributes {
				n += len(k) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
			}
		}
		b.mu.Lock()
		b.requests++
		b.billed += int64(sqsbatch.BilledRequests(n))
		b.mu.Unlock()
	}
	return b.API.SendMessageBatch(ctx, in, opts...)
}

// keys lists the bucket's keys, sorted.
func keys(t *testing.T, st *fanoutstack.Stack) []string {
	t.Helper()
	out, err := st.S3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, aws.ToString(o.Key))
	}
	slices.Sort(ks)
	return ks
}

// checkNothingSent fails when any of the stack's queues holds a message.
func checkNothingSent(t *testing.T, st *fanoutstack.Stack) {
	t.Helper()
	for _, q := range []string{st.Target, st.Work, st.Failure} {
		visible, inFlight, err := localaws.Depth(t.Context(), st.SQS, q)
		if err != nil {
			t.Fatal(err)
		}
		got := localaws.ReceiveAll(t.Context(), st.SQS, q, time.Second)
		if visible+inFlight > 0 || len(got) > 0 {
			t.Errorf("queue %s holds %d messages (%d in flight), received %d, after a dry run", q, visible, inFlight, len(got))
		}
	}
}

// putDataset writes objects of JSON Lines records of random sizes, a few
// larger than big bytes and, with bad, a few whose msg_attributes cannot
// be mapped.
func putDataset(t *testing.T, st *fanoutstack.Stack, prefix string, objects, records, big int, bad bool, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	for o := range objects {
		var b strings.Builder
		for i := range records {
			v := strings.Repeat("v", 20+r.IntN(100))
			switch {
			case bad && i%97 == 13:
				fmt.Fprintf(&b, `{"value":"%s","msg_attributes":"not an object"}`+"\n", v)
				continue
			case big > 0 && i%89 == 7:
				v = strings.Repeat("B", big+r.IntN(200))
			}
			fmt.Fprintf(&b, `{"value":"%s","msg_attributes":{"n":"%d"}}`+"\n", v, i)
		}
		st.Put(t, fmt.Sprintf("%s%03d.jsonl", prefix, o), b.String())
	}
}

// TestDryRunMatchesRun: a dry run of a small dataset sends and queues
// nothing and writes nothing to S3, and its exact counts are those of a
// real run of the same data (records, messages, requests and billed
// requests, offloaded and failed records), in record mode with records too
// large for the target failing or offloaded, and in chunk mode.
func TestDryRunMatchesRun(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mode    worktask.Mode
		offload bool
		fifo    string
	}{
		{"record", worktask.ModeRecord, false, ""},
		{"record+offload", worktask.ModeRecord, true, ""},
		{"chunk", worktask.ModeChunk, false, ""},
		// Each object is a chain whose links a run sends round by round,
		// and a record refused fails the later records of its group.
		{"fifo record", worktask.ModeRecord, false, ".fifo"},
		{"fifo chunk", worktask.ModeChunk, false, ".fifo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := fanoutstack.New(t, tt.fifo)
			// A target of 4 KiB, so that some records are too large and
			// chunk mode packs many messages.
			if _, err := st.SQS.SetQueueAttributes(t.Context(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(st.Target),
				Attributes: map[string]string{"MaximumMessageSize": "4096"}}); err != nil {
				t.Fatal(err)
			}
			putDataset(t, st, "in/", 5, 400, 5000, true, 1)
			opts := engine.Options{Mode: tt.mode, ChunkConcurrency: 1, Plan: dataset.PlanOptions{ChunkSize: 16 << 10},
				Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: st.Work, FailureQueueURL: st.Failure, Mapping: fanoutstack.SparkMapping}
			if tt.offload {
				opts.Offload.S3URI = "s3://lake/offload/"
			}
			bill := &billingSQS{API: st.SQS, queue: st.Target}
			r, err := engine.New(t.Context(), st.S3, bill, opts)
			if err != nil {
				t.Fatal(err)
			}
			before := keys(t, st)
			req := engine.Request{Source: dataset.Source{Bucket: "lake", Prefix: "in/"}, RunID: "dry-1"}
			dry, err := r.DryRun(t.Context(), req, engine.DryRunOptions{SampleChunks: 100})
			if err != nil {
				t.Fatal(err)
			}
			d := dry.DryRun
			if d == nil || d.Counted != engine.CountedExact || d.SampledChunks != d.Chunks || d.Chunks < 5 || dry.Queued || dry.RecordsSent != 0 {
				t.Fatalf("dry run report %+v, dryRun %+v; want exact counts of every chunk, nothing sent", dry, d)
			}
			checkNothingSent(t, st)
			if after := keys(t, st); !slices.Equal(before, after) {
				t.Errorf("bucket after the dry run: %v, before: %v", after, before)
			}
			if bill.requests != 0 {
				t.Fatalf("the dry run made %d requests to the target", bill.requests)
			}

			if wouldStop := d.Failed*10 > d.Records; wouldStop != (d.WouldStop != "") {
				t.Errorf("%d of %d records would fail; the dry run says the default budget would stop the run: %q", d.Failed, d.Records, d.WouldStop)
			}
			// The whole run, to compare with: no budget stops it.
			whole := engine.Request{Source: req.Source, RunID: "real-1"}
			whole.MaxFailures = worktask.LimitOf("off")
			rep, err := r.Run(t.Context(), whole)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Retries != 0 {
				t.Fatalf("the real run retried %d entries: its requests are not the packing's", rep.Retries)
			}
			got := [][2]int64{{d.Records, rep.RecordsRead}, {d.Messages, rep.Messages}, {d.Requests, rep.Requests},
				{d.BilledRequests, bill.billed}, {d.Offloaded, rep.RecordsOffloaded}, {d.Failed, rep.RecordsFailed},
				{d.Bytes, rep.BytesPlanned}, {int64(d.Chunks), int64(rep.Chunks)}, {int64(d.Objects), int64(rep.Objects)}}
			for i, name := range []string{"records", "messages", "requests", "billed requests", "offloaded", "failed", "bytes", "chunks", "objects"} {
				if got[i][0] != got[i][1] {
					t.Errorf("%s: dry run %d, real run %d", name, got[i][0], got[i][1])
				}
			}
			// The dataset must exercise what it is for.
			switch {
			case tt.offload && (d.Offloaded == 0 || d.Failed == 0):
				t.Errorf("offloaded %d, failed %d; want some of each", d.Offloaded, d.Failed)
			case tt.mode == worktask.ModeRecord && !tt.offload && d.Failed <= 20:
				t.Errorf("failed %d; want the unmappable and the oversize records", d.Failed)
			case tt.mode == worktask.ModeChunk && d.Messages >= d.Records/4:
				t.Errorf("chunk mode: %d messages for %d records", d.Messages, d.Records)
			}
			t.Logf("dry run: %+v", *d)
		})
	}
}

// TestDryRunEstimates: a dataset of many more chunks than the sample is
// estimated from the sample, and says so; its estimates are within 5% of
// what a real run of it counts.
func TestDryRunEstimates(t *testing.T) {
	const tolerance = 0.05
	st := fanoutstack.New(t, "")
	putDataset(t, st, "big/", 24, 600, 0, false, 2)
	bill := &billingSQS{API: st.SQS, queue: st.Target}
	r, err := engine.New(t.Context(), st.S3, bill, engine.Options{Plan: dataset.PlanOptions{ChunkSize: 4 << 10},
		Target: sqsbatch.Queue{URL: st.Target}, FailureQueueURL: st.Failure})
	if err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Source: dataset.Source{Bucket: "lake", Prefix: "big/"}, RunID: "estimate-1"}
	dry, err := r.DryRun(t.Context(), req, engine.DryRunOptions{SampleChunks: 12})
	if err != nil {
		t.Fatal(err)
	}
	d := dry.DryRun
	if want := fmt.Sprintf("estimated from 12 of %d chunks", d.Chunks); d.Counted != want || d.SampledChunks != 12 || d.Chunks < 200 || d.SampledBytes >= d.Bytes/10 {
		t.Fatalf("dry run %+v; want %q from 12 chunks of at least 200", *d, want)
	}
	checkNothingSent(t, st)
	rep, err := r.Run(t.Context(), engine.Request{Source: req.Source, RunID: "estimate-real"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		est, real int64
	}{
		{"records", d.Records, rep.RecordsRead},
		{"messages", d.Messages, rep.Messages},
		{"requests", d.Requests, rep.Requests},
		{"billed requests", d.BilledRequests, bill.billed},
	} {
		if off := math.Abs(float64(c.est-c.real)) / float64(c.real); off > tolerance {
			t.Errorf("%s: estimated %d, the run counted %d: %.1f%% off, more than %.0f%%", c.name, c.est, c.real, off*100, tolerance*100)
		}
	}
	t.Logf("estimated %+v; the run: %d records, %d messages, %d requests, %d billed", *d, rep.RecordsRead, rep.Messages, rep.Requests, bill.billed)
}

// TestDryRunRequest: a request with dryRun set is a dry run through Run
// and Queue, and dryRunOptions are checked and refused without it.
func TestDryRunRequest(t *testing.T) {
	st := fanoutstack.New(t, "")
	putDataset(t, st, "in/", 2, 50, 0, false, 3)
	r, err := engine.New(t.Context(), st.S3, st.SQS, engine.Options{Target: sqsbatch.Queue{URL: st.Target}, WorkQueueURL: st.Work, FailureQueueURL: st.Failure})
	if err != nil {
		t.Fatal(err)
	}
	src := dataset.Source{Bucket: "lake", Prefix: "in/"}
	for _, queue := range []bool{false, true} {
		rep, err := r.Run(t.Context(), engine.Request{Source: src, DryRun: true, DryRunOptions: &engine.DryRunOptions{Invocations: 7}, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if rep.DryRun == nil || rep.DryRun.Records != 100 || rep.Queued || rep.TasksQueued != 0 {
			t.Errorf("report %+v; want a dry run of 100 records", rep)
		}
	}
	checkNothingSent(t, st)
	for _, tt := range []struct {
		req  string
		want string
	}{
		{`{"bucket":"lake","prefix":"in/","dryRunOptions":{"invocations":3}}`, `dryRunOptions: only with "dryRun": true`},
		{`{"bucket":"lake","prefix":"in/","dryRun":true,"dryRunOptions":{"memoryMB":64}}`, "dryRunOptions.memoryMB: want from 128 to 10240"},
		{`{"bucket":"lake","prefix":"in/","dryRun":true,"dryRunOptions":{"sqsPrice":-1}}`, "dryRunOptions.sqsPrice"},
		{`{"bucket":"lake","prefix":"in/","dryRun":true,"dryRunOptions":{"samples":3}}`, "samples"},
	} {
		if _, err := engine.DecodeRequest([]byte(tt.req)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error with %q", tt.req, err, tt.want)
		}
	}
	if _, err := engine.DecodeRequest([]byte(`{"bucket":"lake","prefix":"in/","dryRun":true,"dryRunOptions":{"invocations":3,"memoryMB":512}}`)); err != nil {
		t.Errorf("a good dry run request: %v", err)
	}
}
