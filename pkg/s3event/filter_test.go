package s3event_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// now is the clock of the filter tests.
var now = time.Date(2024, 1, 3, 0, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return now }

// ev describes one record of a test S3 event.
type ev struct {
	key, name, version, etag, seq string
	at                            time.Time
}

// s3Body returns an S3 event notification body holding recs.
func s3Body(tb testing.TB, recs ...ev) string {
	tb.Helper()
	var records []any
	for _, r := range recs {
		name := r.name
		if name == "" {
			name = "ObjectCreated:Put"
		}
		obj := map[string]any{"key": s3event.EncodeKey(r.key), "size": 1}
		if r.version != "" {
			obj["versionId"] = r.version
		}
		if r.etag != "" {
			obj["eTag"] = r.etag
		}
		if r.seq != "" {
			obj["sequencer"] = r.seq
		}
		at := r.at
		if at.IsZero() {
			at = now.Add(-time.Hour)
		}
		records = append(records, map[string]any{
			"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
			"eventTime": at.Format("2006-01-02T15:04:05.000Z"), "eventName": name,
			"s3": map[string]any{"bucket": map[string]any{"name": "bkt"}, "object": obj},
		})
	}
	b, err := json.Marshal(map[string]any{"Records": records})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// summary renders a Result as lines that are easy to compare.
func summary(r *s3event.Result) []string {
	var out []string
	for _, it := range r.Accepted {
		out = append(out, fmt.Sprintf("accept %s %s", it.MessageID, it.Object.Key))
	}
	for _, s := range r.Skipped {
		out = append(out, fmt.Sprintf("skip %s %s %s", s.MessageID, s.Object.Key, s.Reason))
	}
	for _, f := range r.Failed {
		out = append(out, fmt.Sprintf("fail %s %T", f.MessageID, f.Err))
	}
	for _, id := range r.TestEvents {
		out = append(out, "test "+id)
	}
	return out
}

func TestFilterApplyMixedBatch(t *testing.T) {
	msgs := []s3event.Message{
		{ID: "m1", Body: string(readTestdata(t, "sns-s3-put.json"))},
		{ID: "m2", Body: string(readTestdata(t, "s3-delete.json"))},
		{ID: "m3", Body: string(readTestdata(t, "s3-test-event.json"))},
		{ID: "m4", Body: string(readTestdata(t, "s3-bad-escape.json"))},
		{ID: "m5", Body: string(readTestdata(t, "malformed-truncated.json"))},
		{ID: "m6", Body: string(readTestdata(t, "sns-s3-put.json"))},
		{ID: "m7", Body: string(readTestdata(t, "eventbridge-restore-completed.json"))},
		{ID: "m8", Body: string(readTestdata(t, "eventbridge-object-created.json"))},
		{ID: "m9", Body: string(readTestdata(t, "unrecognized-eventbridge-ec2.json"))},
	}
	res := s3event.Filter{Now: fixedNow, MaxFileAge: s3event.DefaultMaxFileAge}.Apply(msgs)
	want := []string{
		"accept m1 dt=2024-01-01/a b+c.csv",
		"accept m1 dt=2024-01-01/x=y%z.csv",
		"accept m4 good one.csv",
		"accept m4 also good.csv",
		"skip m2 events/date=2024-01-01/part 0001.csv deletion",
		"skip m7 example-key event-type",
		"skip m8 example-key too-old",
		"skip m6 dt=2024-01-01/a b+c.csv duplicate",
		"skip m6 dt=2024-01-01/x=y%z.csv duplicate",
		"fail m4 *s3event.RecordError",
		"fail m4 *s3event.RecordError",
		"fail m5 *s3event.MalformedError",
		"fail m9 *s3event.UnrecognizedError",
		"test m3",
	}
	if diff := cmp.Diff(want, summary(res)); diff != "" {
		t.Errorf("Apply (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"m4", "m5", "m9"}, res.FailedMessageIDs()); diff != "" {
		t.Errorf("FailedMessageIDs (-want +got):\n%s", diff)
	}
	for _, s := range res.Skipped {
		if s.Detail == "" {
			t.Errorf("skipped %s %s has no Detail", s.MessageID, s.Object.Key)
		}
		if s.Reason == s3event.SkipDuplicate && !strings.Contains(s.Detail, "m1") {
			t.Errorf("duplicate Detail = %q, want it to name m1", s.Detail)
		}
	}
}

func TestFilterApply(t *testing.T) {
	old := now.Add(-8 * 24 * time.Hour)
	tests := []struct {
		name   string
		filter s3event.Filter
		msgs   func(t *testing.T) []s3event.Message
		want   []string
	}{
		{
			name:   "deletions kept when asked, marked",
			filter: s3event.Filter{KeepDeletions: true},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "k", etag: "e"}, ev{key: "k", name: "ObjectRemoved:Delete"}, ev{key: "j", name: "LifecycleExpiration:Delete"})}}
			},
			want: []string{"accept a k", "accept a k deletion", "accept a j deletion"},
		},
		{
			name:   "event types: explicit list, with s3: prefix and exact names",
			filter: s3event.Filter{EventTypes: []string{"s3:ObjectCreated:Copy", "ObjectRestore:*"}},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t,
					ev{key: "put", name: "ObjectCreated:Put"}, ev{key: "copy", name: "ObjectCreated:Copy"},
					ev{key: "restore", name: "ObjectRestore:Completed"}, ev{key: "del", name: "ObjectRemoved:Delete"})}}
			},
			want: []string{"accept a copy", "accept a restore", "skip a put event-type", "skip a del deletion"},
		},
		{
			name:   "event types: star keeps all but deletions",
			filter: s3event.Filter{EventTypes: []string{"*"}},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "tag", name: "ObjectTagging:Put"}, ev{key: "del", name: "ObjectRemoved:Delete"})}}
			},
			want: []string{"accept a tag", "skip a del deletion"},
		},
		{
			name:   "prefix and suffix on the decoded key",
			filter: s3event.Filter{Prefix: "in/dt=", Suffix: ".csv"},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "in/dt=1/a b.csv"}, ev{key: "out/dt=1/a.csv"}, ev{key: "in/dt=1/a.json"})}}
			},
			want: []string{"accept a in/dt=1/a b.csv", "skip a out/dt=1/a.csv prefix", "skip a in/dt=1/a.json suffix"},
		},
		{
			// A DLQ redriven after a week must not lose its objects.
			name:   "max age: off by default",
			filter: s3event.Filter{},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "new", at: now.Add(-6 * 24 * time.Hour)}, ev{key: "old", at: old})}}
			},
			want: []string{"accept a new", "accept a old"},
		},
		{
			name:   "max age: Bahir's 7 days",
			filter: s3event.Filter{MaxFileAge: s3event.DefaultMaxFileAge},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "new", at: now.Add(-6 * 24 * time.Hour)}, ev{key: "old", at: old})}}
			},
			want: []string{"accept a new", "skip a old too-old"},
		},
		{
			name:   "max age: custom",
			filter: s3event.Filter{MaxFileAge: time.Hour},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "new", at: now.Add(-time.Minute)}, ev{key: "old", at: now.Add(-2 * time.Hour)})}}
			},
			want: []string{"accept a new", "skip a old too-old"},
		},
		{
			name:   "max age: negative turns it off",
			filter: s3event.Filter{MaxFileAge: -1},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "old", at: old})}}
			},
			want: []string{"accept a old"},
		},
		{
			name:   "max age: no event time is never too old",
			filter: s3event.Filter{MaxFileAge: time.Hour},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{{ID: "a", Body: `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`}}
			},
			want: []string{"accept a k"},
		},
		{
			name:   "batch order kept without SortByTime",
			filter: s3event.Filter{},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{
					{ID: "a", Body: s3Body(t, ev{key: "3", at: now.Add(-1 * time.Hour)}, ev{key: "1", at: now.Add(-3 * time.Hour)})},
					{ID: "b", Body: s3Body(t, ev{key: "2", at: now.Add(-2 * time.Hour)})},
				}
			},
			want: []string{"accept a 3", "accept a 1", "accept b 2"},
		},
		{
			name:   "SortByTime orders across messages, ties keep batch order",
			filter: s3event.Filter{SortByTime: true},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{
					{ID: "a", Body: s3Body(t, ev{key: "3", at: now.Add(-1 * time.Hour)}, ev{key: "1", at: now.Add(-3 * time.Hour)})},
					{ID: "b", Body: s3Body(t, ev{key: "2", at: now.Add(-2 * time.Hour)}, ev{key: "1-tie", at: now.Add(-3 * time.Hour)})},
				}
			},
			want: []string{"accept a 1", "accept b 1-tie", "accept b 2", "accept a 3"},
		},
		{
			name:   "duplicates: version, else eTag, and sequencer decide",
			filter: s3event.Filter{},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{
					{ID: "a", Body: s3Body(t, ev{key: "v", version: "1", etag: "x", seq: "01"}, ev{key: "e", etag: "x", seq: "01"})},
					{ID: "b", Body: s3Body(t,
						ev{key: "v", version: "1", etag: "other", seq: "01"}, // same version: duplicate
						ev{key: "v", version: "2", etag: "x", seq: "02"},     // new version
						ev{key: "e", etag: "x", seq: "01"},                   // same eTag and sequencer: duplicate
						ev{key: "e", etag: "x", seq: "02"},                   // same content written again
						ev{key: "e", etag: "y", seq: "03"},                   // new content
					)},
				}
			},
			want: []string{
				"accept a v", "accept a e", "accept b v", "accept b e", "accept b e",
				"skip b v duplicate", "skip b e duplicate",
			},
		},
		{
			name:   "duplicates: a deletion is not a duplicate of a creation",
			filter: s3event.Filter{KeepDeletions: true},
			msgs: func(t *testing.T) []s3event.Message {
				// moto sends no sequencer or version, and the same eTag for
				// a put and the delete that follows it.
				return []s3event.Message{{ID: "a", Body: s3Body(t, ev{key: "k", etag: "x"}, ev{key: "k", etag: "x", name: "ObjectRemoved:Delete"})}}
			},
			want: []string{"accept a k", "accept a k deletion"},
		},
		{
			name:   "FileNameOnly: same file name in other directories is a duplicate",
			filter: s3event.Filter{FileNameOnly: true},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{
					{ID: "a", Body: s3Body(t, ev{key: "x/part-0.csv", seq: "01"}, ev{key: "x/part-1.csv"})},
					{ID: "b", Body: s3Body(t, ev{key: "y/part-0.csv", seq: "02"}, ev{key: "part-1.csv"})},
				}
			},
			want: []string{"accept a x/part-0.csv", "accept a x/part-1.csv", "skip b y/part-0.csv duplicate", "skip b part-1.csv duplicate"},
		},
		{
			name:   "EventBridge raw keys through the filter's Options",
			filter: s3event.Filter{Options: s3event.Options{EventBridgeKeysRaw: true}, MaxFileAge: -1, EventTypes: []string{"ObjectCreated:*"}},
			msgs: func(t *testing.T) []s3event.Message {
				return []s3event.Message{
					{ID: "put", Body: string(readTestdata(t, "moto-eventbridge-put.json"))},
					{ID: "tags", Body: string(readTestdata(t, "moto-eventbridge-tags-added.json"))},
				}
			},
			want: []string{"accept put " + motoKey, "skip tags " + motoKey + " event-type"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.filter
			f.Now = fixedNow
			res := f.Apply(tt.msgs(t))
			got := summary(res)
			for i, it := range res.Accepted {
				if it.Object.Deletion {
					got[i] += " deletion"
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterApplyDefaultClock(t *testing.T) {
	body := s3Body(t, ev{key: "k", at: time.Now().Add(-time.Minute)})
	res := s3event.Filter{}.Apply([]s3event.Message{{ID: "a", Body: body}})
	if len(res.Accepted) != 1 {
		t.Errorf("Apply with the default clock: %v, want k accepted", summary(res))
	}
}

func TestFilterApplyEmpty(t *testing.T) {
	res := s3event.Filter{}.Apply(nil)
	if len(summary(res)) != 0 || res.FailedMessageIDs() != nil {
		t.Errorf("Apply(nil) = %v", summary(res))
	}
}

func TestSkipReasonString(t *testing.T) {
	for r, want := range map[s3event.SkipReason]string{
		s3event.SkipEventType: "event-type", s3event.SkipDeletion: "deletion", s3event.SkipPrefix: "prefix",
		s3event.SkipSuffix: "suffix", s3event.SkipTooOld: "too-old", s3event.SkipDuplicate: "duplicate", 0: "SkipReason(0)",
	} {
		if got := r.String(); got != want {
			t.Errorf("SkipReason(%d).String() = %q, want %q", r, got, want)
		}
	}
}

func TestCheckEventType(t *testing.T) {
	for _, ok := range []string{"*", "ObjectCreated:*", "s3:ObjectCreated:Put", "ObjectRemoved:DeleteMarkerCreated", "ObjectRestore:*",
		"LifecycleTransition", "s3:Replication:*", "ObjectTagging:Put", "Object*"} {
		if err := s3event.CheckEventType(ok); err != nil {
			t.Errorf("CheckEventType(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"ObjectCreate:*", "ObjectCreated", "ObjectCreated:PutObject", "PutObject", "s3:*:Put", "objectcreated:*", ""} {
		err := s3event.CheckEventType(bad)
		if err == nil || !strings.Contains(err.Error(), "is not an S3 event type") || !strings.Contains(err.Error(), "ObjectCreated:*, ObjectRemoved:*") {
			t.Errorf("CheckEventType(%q): %v; want an error listing the families", bad, err)
		}
	}
}
