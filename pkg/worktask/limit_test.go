package worktask_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestLimit reads limits as a request writes them and judges failures
// against them: a count from 0, a share judged once the whole is large
// enough, off; anything else refused by name.
func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		json                 string
		failed, total, least int64
		exceeded             bool
	}{
		{`"10"`, 10, 100, 0, false},
		{`10`, 11, 100, 0, true},
		{`"0"`, 1, 1, 0, true},
		{`"0"`, 0, 1000, 0, false},
		{`"10%"`, 11, 100, 100, true},
		{`"10%"`, 10, 100, 100, false},
		{`"10%"`, 99, 99, 100, false},
		{`"0.5%"`, 6, 1000, 100, true},
		{`"100%"`, 1000, 1000, 100, false},
		{`"off"`, 1000, 1000, 0, false},
		{`"OFF"`, 1000, 1000, 0, false},
	} {
		var ov worktask.Overrides
		if err := json.Unmarshal([]byte(`{"maxFailures":`+tc.json+`}`), &ov); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if err := ov.Validate(); err != nil {
			t.Errorf("%s: %v", tc.json, err)
			continue
		}
		if got := ov.MaxFailures.Exceeded(tc.failed, tc.total, tc.least); got != tc.exceeded {
			t.Errorf("%s: %d of %d exceeded = %v, want %v", tc.json, tc.failed, tc.total, got, tc.exceeded)
		}
	}
	for _, bad := range []string{`"-1"`, `"0%"`, `"101%"`, `"ten"`, `"5 %%"`, `true`} {
		var ov worktask.Overrides
		err := json.Unmarshal([]byte(`{"maxFailedObjects":`+bad+`}`), &ov)
		if err == nil {
			err = ov.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "maxFailedObjects") && !strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("%s: %v, want an error naming maxFailedObjects", bad, err)
		}
	}
	if l := worktask.LimitOf(""); !l.IsZero() || l.Exceeded(1, 1, 0) {
		t.Errorf("the zero limit is given or bounds: %+v", l)
	}
	b, err := json.Marshal(worktask.Overrides{MaxFailures: worktask.LimitOf("10%")})
	if err != nil || string(b) != `{"maxFailures":"10%"}` {
		t.Errorf("marshal: %s, %v", b, err)
	}
}
