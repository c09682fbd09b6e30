package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

func TestNextSteps(t *testing.T) {
	prefix := worktask.Plan{RunID: "r", Source: dataset.Source{Bucket: "b", Prefix: "p/"}, Step: 4}
	got := nextSteps(prefix, dataset.Cursor{After: "p/x"}, nil)
	if len(got) != 1 || got[0].Cursor.After != "p/x" || got[0].Step != 5 {
		t.Errorf("prefix: %+v, want one step from p/x", got)
	}

	// 30,000 keys of about 60 bytes, 10,000 already planned: the rest in
	// steps that each fit a 256 KiB message, in order, none lost.
	var keys []string
	for i := range 30_000 {
		keys = append(keys, fmt.Sprintf("exports/date=2024-01-01/région=ü/part-%06d.jsonl", i))
	}
	list := worktask.Plan{RunID: "r", Source: dataset.Source{Bucket: "b", Keys: keys}, Step: 1}
	got = nextSteps(list, dataset.Cursor{Index: 10_000}, &worktask.Overrides{Mode: worktask.ModeChunk})
	if len(got) < 2 {
		t.Fatalf("%d steps for 20,000 keys, want them cut to fit a message", len(got))
	}
	var rest []string
	for _, s := range got {
		e, err := s.Entry(false)
		if err != nil || len(e.Body) > 256<<10 {
			t.Errorf("step of %d keys: %d bytes (%v), want under 256 KiB", len(s.Source.Keys), len(e.Body), err)
		}
		if ov, _ := json.Marshal(s.Overrides); s.Cursor != (dataset.Cursor{}) || s.Step != 2 || string(ov) != `{"mode":"chunk"}` {
			t.Errorf("step %+v: want the keys left from their start, step 2, the overrides", s.Cursor)
		}
		rest = append(rest, s.Source.Keys...)
	}
	if !slices.Equal(rest, keys[10_000:]) {
		t.Errorf("the steps carry %d keys, want the 20,000 left in order", len(rest))
	}
	if got := nextSteps(list, dataset.Cursor{Index: 30_000}, nil); len(got) != 0 {
		t.Errorf("%d steps after the last key, want none", len(got))
	}
	long := worktask.Plan{RunID: "r", Source: dataset.Source{Bucket: "b", Keys: []string{strings.Repeat("k", 1024)}}, Step: 1}
	if got := nextSteps(long, dataset.Cursor{}, nil); len(got) != 1 || len(got[0].Source.Keys) != 1 {
		t.Errorf("one long key: %d steps", len(got))
	}
}
