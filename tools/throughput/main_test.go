package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// TestRun measures every series and point on a few entries against the
// stand-in, so that `make plot` keeps working, and checks the report it
// writes; the figures themselves are only checked to be there.
func TestRun(t *testing.T) {
	localaws.Endpoint(t, localaws.EnvSQS)
	out := filepath.Join(t.TempDir(), "throughput.json")
	args := []string{"throughput", "-entries", "40", "-latency-entries", "20", "-latency", "0,10ms", "-repeat", "2", "-out", out}
	if err := run(t.Context(), args, os.Getenv, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if r.Date.IsZero() || r.Machine.CPUs <= 0 || r.Machine.GOOS == "" || r.EntryBytes != 1024 || len(r.Notes) == 0 {
		t.Errorf("date %v, machine %+v, entry bytes %d, notes %q: want all set", r.Date, r.Machine, r.EntryBytes, r.Notes)
	}
	if want := strings.Join(args, " "); r.Command != want {
		t.Errorf("command %q, want %q", r.Command, want)
	}
	type shape struct {
		Name      string
		LatencyMS float64
		Entries   int
	}
	var got []shape
	for _, s := range r.Series {
		got = append(got, shape{s.Name, s.LatencyMS, s.Entries})
	}
	want := []shape{{"sender", 0, 40}, {"hand-made", 0, 40}, {"sender", 10, 20}, {"hand-made", 10, 20}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("series (-want +got):\n%s", diff)
	}
	for _, s := range r.Series {
		var flights []int
		for _, p := range s.Points {
			flights = append(flights, p.InFlight)
			// Ten 1 KiB entries fit one request, whoever packs them.
			if p.RecordsPerSecond <= 0 || len(p.Runs) != 2 || p.Requests != s.Entries/10 {
				t.Errorf("%s %v ms, %d in flight: %.0f records/s, runs %v, %d requests; want > 0, 2 runs, %d requests",
					s.Name, s.LatencyMS, p.InFlight, p.RecordsPerSecond, p.Runs, p.Requests, s.Entries/10)
			}
		}
		if !slices.Equal(flights, []int{1, 2, 4, 8, 16, 32}) {
			t.Errorf("%s %v ms: in flight %v, want 1 to 32", s.Name, s.LatencyMS, flights)
		}
	}
}

// TestSlowRequests checks that the added latency is there: ten requests
// one at a time take at least ten times the latency.
func TestSlowRequests(t *testing.T) {
	localaws.Endpoint(t, localaws.EnvSQS)
	c := sqs.NewFromConfig(localaws.SQS(t))
	url := localaws.CreateQueue(t, c, "", nil)
	start := time.Now()
	requests, err := sendByHand(t.Context(), slowClient{API: c, latency: 20 * time.Millisecond}, url, 1, makeEntries(100))
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); requests != 10 || elapsed < 200*time.Millisecond {
		t.Errorf("%d requests in %v, want 10 in at least 200ms", requests, elapsed)
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    settings
		wantErr []string
	}{
		{
			name: "defaults",
			want: settings{Entries: 20_000, LatencyEntries: 4_000, Latencies: []time.Duration{0, 10 * time.Millisecond}, InFlight: inFlight, Repeat: 5},
		},
		{
			name: "set",
			args: []string{"-entries", "7", "-latency-entries", "3", "-latency", "1ms, 0 ,50ms", "-repeat", "1"},
			want: settings{Entries: 7, LatencyEntries: 3, Latencies: []time.Duration{time.Millisecond, 0, 50 * time.Millisecond}, InFlight: inFlight, Repeat: 1},
		},
		{
			name:    "every problem",
			args:    []string{"-entries", "0", "-latency-entries", "-1", "-latency", "10ms,-1ms,soon", "-repeat", "0", "extra"},
			wantErr: []string{`unexpected arguments ["extra"]`, "-entries 0", "-latency-entries -1", "-repeat 0", `"-1ms" is not`, `"soon" is not`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseArgs(tt.args, io.Discard)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one that says %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.set); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"one", []float64{5}, 5},
		{"odd, unsorted", []float64{9, 1, 4}, 4},
		{"even", []float64{10, 2, 4, 100}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.xs); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
		})
	}
}

func TestCPUModel(t *testing.T) {
	tests := []struct {
		name, cpuinfo, want string
	}{
		{"x86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7R13\nprocessor\t: 1\nmodel name\t: other\n", "AMD EPYC 7R13"},
		{"none", "processor\t: 0\nBogoMIPS\t: 50.00\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpuModel(strings.NewReader(tt.cpuinfo)); got != tt.want {
				t.Errorf("cpuModel = %q, want %q", got, tt.want)
			}
		})
	}
}

// unreachable is an API that fails the test if it is called.
type unreachable struct {
	sqsbatch.API
	t *testing.T
}

func (u unreachable) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	u.t.Error("request sent after the context was done")
	return &sqs.SendMessageBatchOutput{}, nil
}

// TestSlowClientHonoursContext checks that the wait ends when the context
// does, without sending.
func TestSlowClientHonoursContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := slowClient{API: unreachable{t: t}, latency: time.Hour}.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Minute {
		t.Errorf("error %v after %v, want a deadline exceeded at once", err, time.Since(start))
	}
}
