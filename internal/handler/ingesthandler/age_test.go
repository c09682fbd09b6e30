package ingesthandler

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/runtime/lambdaenv"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestHandleOldNotification sends a notification ten days old, as a DLQ
// redriven after a week holds: with the function's default configuration
// its object is delivered; with MAX_FILE_AGE=7d it is skipped, the message
// succeeds, and the skip is counted in the summary and its metric and
// logged as a warning that names the object.
func TestHandleOldNotification(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		skipped bool
	}{
		{name: "default", env: map[string]string{}},
		{name: "MAX_FILE_AGE=7d", env: map[string]string{settings.MaxFileAge.Env: "7d"}, skipped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "", nil)
			a := f.put("events/redriven.jsonl", `{"id":1}`+"\n"+`{"id":2}`+"\n")
			a.EventTime = a.EventTime.Add(-10 * 24 * time.Hour)
			env := lambdaenv.New(func(name string) string { return tc.env[name] })
			o := f.defaults()
			o.ingest.Filter = env.Filter(true)
			if err := env.Err(); err != nil {
				t.Fatal(err)
			}
			h := f.handler(o, nil, nil)
			resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "m1", body: s3Body(a)}))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff([]string{}, failures(resp)); diff != "" {
				t.Errorf("batchItemFailures (-want +got):\n%s", diff)
			}
			want, delivered, tooOld := wantRecords(t, a), 1, 0
			if tc.skipped {
				want, delivered, tooOld = map[string]map[string]any{}, 0, 1
			}
			checkOutput(t, f.sqs, f.out, want)
			// summaryOf also checks that the SkippedTooOld metric agrees.
			if s := summaryOf(t, f.summary); s.ObjectsDelivered != delivered || s.Skipped[s3event.SkipTooOld.String()] != tooOld {
				t.Errorf("summary %+v; want %d object delivered and %d too old", s, delivered, tooOld)
			}
			var warned []string
			for line := range strings.Lines(f.logs.String()) {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "older than the maximum file age") {
					warned = append(warned, line)
				}
			}
			switch {
			case !tc.skipped && len(warned) > 0:
				t.Errorf("warned of a skip with no age limit:\n%s", warned)
			case tc.skipped && (len(warned) != 1 || !strings.Contains(warned[0], `"key":"events/redriven.jsonl"`) || !strings.Contains(warned[0], `"bucket":"`+testBucket+`"`)):
				t.Errorf("warnings %q; want one that names the object", warned)
			}
		})
	}
}
