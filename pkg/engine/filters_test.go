package engine_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
)

// TestFiltersQueuedRun runs two queued requests through a runner whose
// filters (Options.Planning.Filters, a function's MIN_OBJECT_SIZE) keep objects of
// 50 bytes or more: one that gives no filter of its own gets the runner's;
// one that gives its own minSize and keyRegex keeps those. Each delivers
// exactly the objects its filters keep, and its run record counts what
// they left out, by filter, for status.
func TestFiltersQueuedRun(t *testing.T) {
	c := newControlled(t, 1, engine.Options{Planning: engine.Planning{InlineMaxBytes: 1, Filters: dataset.Filters{MinSize: 50}}})
	c.st.Put(t, "flt/small.jsonl", `{"o":"small"}`+"\n")
	c.st.Put(t, "flt/other.jsonl", `{"o":"other"}`+"\n")
	c.st.Put(t, "flt/large.jsonl", strings.Repeat(`{"o":"large"}`+"\n", 5))
	reqs := map[string]engine.Request{
		"flt-default": {Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "flt/"}, RunID: "flt-default"},
		"flt-own": {Source: dataset.Source{Bucket: c.st.Bucket, Prefix: "flt/",
			Filters: dataset.Filters{MinSize: 1, KeyRegex: "small"}}, RunID: "flt-own"},
	}
	for id, req := range reqs {
		if rep, err := c.handlers[0].HandleRequest(t.Context(), req); err != nil || !rep.Queued {
			t.Fatalf("request %s: %+v, %v", id, rep, err)
		}
	}
	ctx, stop := context.WithCancel(t.Context())
	wait := c.consume(ctx, t)
	runs := map[string]runstate.Run{}
	for id := range reqs {
		runs[id] = c.waitFor(t, id, 30*time.Second, "the run done", finished)
	}
	stop()
	wait()
	if r := runs["flt-default"]; r.Objects != 1 || r.ObjectsFiltered != 2 || !maps.Equal(r.FilteredBy, map[string]int64{"minSize": 2}) || r.BytesFiltered != 28 {
		t.Errorf("run with the runner's filters: %d objects, %d filtered (%v, %d bytes); want 1, and 2 by minSize (28 bytes)", r.Objects, r.ObjectsFiltered, r.FilteredBy, r.BytesFiltered)
	}
	if r := runs["flt-own"]; r.Objects != 1 || r.ObjectsFiltered != 2 || !maps.Equal(r.FilteredBy, map[string]int64{"keyRegex": 2}) {
		t.Errorf("run with its own filters: %d objects, %d filtered (%v); want 1, and 2 by keyRegex", r.Objects, r.ObjectsFiltered, r.FilteredBy)
	}
	got := localaws.Bodies(localaws.Drain(t, c.st.SQS, c.st.Target, time.Second))
	slices.Sort(got)
	want := append(slices.Repeat([]string{`{"o":"large"}`}, 5), `{"o":"small"}`)
	if !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}
