package s3sqscdk_test

import (
	"testing"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// TestEventSourceScaling checks how the two event sources scale: standard
// mode (with or without MaximumConcurrency) or provisioned mode, writing
// only the poller counts that are set.
func TestEventSourceScaling(t *testing.T) {
	for _, tc := range []struct {
		name               string
		ingest             s3sqscdk.IngestProps
		fanout             s3sqscdk.FanoutProps
		wantIngest, wantFo map[string]any // ScalingConfig and ProvisionedPollerConfig; nil: absent
	}{
		{name: "standard mode, no limit"},
		{
			name:       "standard mode, maximum concurrency",
			ingest:     s3sqscdk.IngestProps{MaxConcurrency: 50},
			fanout:     s3sqscdk.FanoutProps{MaxConcurrency: 1000},
			wantIngest: map[string]any{"ScalingConfig": map[string]any{"MaximumConcurrency": 50.0}},
			wantFo:     map[string]any{"ScalingConfig": map[string]any{"MaximumConcurrency": 1000.0}},
		},
		{
			name:       "provisioned mode, both counts",
			ingest:     s3sqscdk.IngestProps{MinPollers: 2, MaxPollers: 2},
			fanout:     s3sqscdk.FanoutProps{MinPollers: 200, MaxPollers: 2000},
			wantIngest: map[string]any{"ProvisionedPollerConfig": map[string]any{"MinimumPollers": 2.0, "MaximumPollers": 2.0}},
			wantFo:     map[string]any{"ProvisionedPollerConfig": map[string]any{"MinimumPollers": 200.0, "MaximumPollers": 2000.0}},
		},
		{
			name:       "provisioned mode, one count each",
			ingest:     s3sqscdk.IngestProps{MinPollers: 10},
			fanout:     s3sqscdk.FanoutProps{MaxPollers: 100},
			wantIngest: map[string]any{"ProvisionedPollerConfig": map[string]any{"MinimumPollers": 10.0}},
			wantFo:     map[string]any{"ProvisionedPollerConfig": map[string]any{"MaximumPollers": 100.0}},
		},
		{
			name:       "one path provisioned, the other limited",
			ingest:     s3sqscdk.IngestProps{MaxConcurrency: 5},
			fanout:     s3sqscdk.FanoutProps{MinPollers: 20, MaxPollers: 100},
			wantIngest: map[string]any{"ScalingConfig": map[string]any{"MaximumConcurrency": 5.0}},
			wantFo:     map[string]any{"ProvisionedPollerConfig": map[string]any{"MinimumPollers": 20.0, "MaximumPollers": 100.0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, s3sqscdk.Props{Ingest: tc.ingest, Fanout: tc.fanout})
			for _, c := range []struct {
				path, queue string
				want        map[string]any
			}{
				{"ingest", f.id(f.s.IngestQueue), tc.wantIngest},
				{"fanout", f.id(f.s.WorkQueue), tc.wantFo},
			} {
				esm := f.mapping(t, c.queue)
				got := map[string]any{}
				for _, k := range []string{"ScalingConfig", "ProvisionedPollerConfig"} {
					if v, ok := esm[k]; ok {
						got[k] = v
					}
				}
				want := c.want
				if want == nil {
					want = map[string]any{}
				}
				if canon(got) != canon(want) {
					t.Errorf("%s event source scaling:\n got %s\nwant %s", c.path, canon(got), canon(want))
				}
			}
		})
	}
}
