package s3sqscdk_test

import (
	"testing"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// TestNotificationModeEnv checks that notification mode and its format
// reach fanout as MODE and NOTIFICATION_FORMAT, and that by default
// NOTIFICATION_FORMAT is not set.
func TestNotificationModeEnv(t *testing.T) {
	f := synth(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Mode: "notification", NotificationFormat: "eventbridge"}})
	vars := prop(f.res(t, f.id(f.s.FanoutFunction)).Properties, "Environment", "Variables").(map[string]any)
	if vars["MODE"] != "notification" || vars["NOTIFICATION_FORMAT"] != "eventbridge" {
		t.Errorf("fanout MODE %v, NOTIFICATION_FORMAT %v; want notification, eventbridge", vars["MODE"], vars["NOTIFICATION_FORMAT"])
	}

	off := synth(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Mode: "notification"}})
	vars = prop(off.res(t, off.id(off.s.FanoutFunction)).Properties, "Environment", "Variables").(map[string]any)
	if _, ok := vars["NOTIFICATION_FORMAT"]; ok || vars["MODE"] != "notification" {
		t.Errorf("notification mode without a format: MODE %v, NOTIFICATION_FORMAT %v; want notification, unset", vars["MODE"], vars["NOTIFICATION_FORMAT"])
	}
}

// TestClaimsTTLEnv checks that ClaimsTTL reaches both functions as the
// same CLAIMS_TTL (s3ingest's markers live that long and fanout's
// scheduled reconcile looks that far back), and that neither has it by
// default.
func TestClaimsTTLEnv(t *testing.T) {
	f := synth(t, s3sqscdk.Props{ClaimsTTL: "36h", Fanout: s3sqscdk.FanoutProps{ReconcileEveryMinutes: 60}})
	for _, fn := range []string{f.id(f.s.IngestFunction), f.id(f.s.FanoutFunction)} {
		if v := prop(f.res(t, fn).Properties, "Environment", "Variables", "CLAIMS_TTL"); v != "36h" {
			t.Errorf("%s CLAIMS_TTL = %v; want 36h", fn, v)
		}
	}

	def := synth(t, s3sqscdk.Props{})
	for _, fn := range []string{def.id(def.s.IngestFunction), def.id(def.s.FanoutFunction)} {
		vars := prop(def.res(t, fn).Properties, "Environment", "Variables").(map[string]any)
		if v, ok := vars["CLAIMS_TTL"]; ok {
			t.Errorf("%s CLAIMS_TTL = %v by default; want unset", fn, v)
		}
	}
}
