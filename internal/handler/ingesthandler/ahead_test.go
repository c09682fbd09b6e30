package ingesthandler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/s3fault"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// loggedS3 logs, in order, each GetObject's start and each body's close,
// and holds the GETs of slow for a while, so that the reads opened ahead
// of it surely start before it ends.
type loggedS3 struct {
	engine.S3API
	slow string

	mu     sync.Mutex
	events []string
}

func (l *loggedS3) log(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *loggedS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	key := aws.ToString(in.Key)
	l.log("get " + key)
	if key == l.slow {
		time.Sleep(200 * time.Millisecond)
	}
	out, err := l.S3API.GetObject(ctx, in, opts...)
	if err == nil {
		out.Body = s3fault.OnClose(out.Body, func() { l.log("close " + key) })
	}
	return out, err
}

// TestReadAhead reads a batch of three small objects one at a time
// (ReadConcurrency 1): the GETs of the second and third start while the
// first is read, each object is read with one GET, and every record
// arrives; the third, deleted after its notification, is skipped as
// not-found as it is without a read ahead.
func TestReadAhead(t *testing.T) {
	f := newFixture(t, "", nil)
	var objs []object
	for _, k := range []string{"a", "b", "c"} {
		objs = append(objs, f.put(k+".jsonl", fmt.Sprintf(`{"k":%q,"n":1}`+"\n"+`{"k":%q,"n":2}`+"\n", k, k)))
	}
	if _, err := f.s3.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: aws.String("c.jsonl")}); err != nil {
		t.Fatal(err)
	}
	o := f.defaults()
	o.ingest.ReadConcurrency = 1
	logged := &loggedS3{S3API: f.s3, slow: "a.jsonl"}
	resp, err := f.handler(o, nil, logged).Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(objs...)}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, failures %v", err, resp.BatchItemFailures)
	}
	checkOutput(t, f.sqs, f.out, wantRecords(t, objs[0], objs[1]))
	logged.mu.Lock()
	events := slices.Clone(logged.events)
	logged.mu.Unlock()
	closeA := slices.Index(events, "close a.jsonl")
	for _, k := range []string{"b.jsonl", "c.jsonl"} {
		if i := slices.Index(events, "get "+k); i < 0 || closeA < 0 || i > closeA {
			t.Errorf("events %q: %s's GET did not start before a's read ended", events, k)
		}
	}
	gets := map[string]int{}
	for _, e := range events {
		if k, ok := strings.CutPrefix(e, "get "); ok {
			gets[k]++
		}
	}
	// c's GET opened ahead failed: its read made its own, which failed
	// the same way.
	if want := map[string]int{"a.jsonl": 1, "b.jsonl": 1, "c.jsonl": 2}; !cmp.Equal(gets, want) {
		t.Errorf("GETs by key %v, want %v", gets, want)
	}
	if s := summaryOf(t, f.summary); s.Skipped[engine.SkipNotFound] != 1 {
		t.Errorf("summary skipped %v, want c as %s", s.Skipped, engine.SkipNotFound)
	}
}
