package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is a small report as tools/throughput writes it.
const sample = `{
  "date": "2026-01-02T03:04:05Z",
  "command": "throughput -entries 100",
  "machine": {"cpus": 2, "gomaxprocs": 2, "goos": "linux", "goarch": "amd64", "cpuModel": "Test CPU", "goVersion": "go1.26.0"},
  "entryBytes": 1024,
  "notes": ["ignored by the plot"],
  "series": [
    {"name": "sender", "latencyMs": 0, "entries": 100, "points": [
      {"inFlight": 1, "recordsPerSecond": 20000, "runs": [19000, 20000, 21000], "requests": 10},
      {"inFlight": 2, "recordsPerSecond": 40000, "runs": [40000, 39000, 41000], "requests": 10}]},
    {"name": "hand-made", "latencyMs": 0, "entries": 100, "points": [
      {"inFlight": 1, "recordsPerSecond": 21000, "runs": [21000, 21000, 21000], "requests": 10},
      {"inFlight": 2, "recordsPerSecond": 39000, "runs": [39000, 39000, 39000], "requests": 10}]},
    {"name": "sender", "latencyMs": 10, "entries": 50, "points": [
      {"inFlight": 1, "recordsPerSecond": 870, "runs": [870, 870, 870], "requests": 5},
      {"inFlight": 2, "recordsPerSecond": 1700, "runs": [1700, 1700, 1700], "requests": 5}]},
    {"name": "hand-made", "latencyMs": 10, "entries": 50, "points": [
      {"inFlight": 1, "recordsPerSecond": 880, "runs": [880, 880, 880], "requests": 5},
      {"inFlight": 2, "recordsPerSecond": 1680, "runs": [1680, 1680, 1680], "requests": 5}]}
  ]
}`

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "throughput.json"), filepath.Join(dir, "throughput.svg")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{
		"<svg", "</svg>",
		// The legend, the axes' labels and the caption.
		"sender, 0 ms added", "hand-made, 0 ms added", "sender, 10 ms added", "hand-made, 10 ms added",
		"requests in flight", "records/s",
		"2026-01-02 linux/amd64, 2 CPUs (Test CPU)",
		"throughput -entries 100: 100 entries a run at 0 ms, 50 entries a run at 10 ms; each point is the median of 3 runs, its bar spans them.",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG has no %q", want)
		}
	}
}

func TestReadReportRefuses(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
	}{
		{"not JSON", `{"series": [`, "decode report"},
		{"no series", `{"series": []}`, "no series"},
		{"no points", `{"series": [{"name": "sender", "latencyMs": 10, "points": []}]}`, "sender at 10 ms has no points"},
		{"zero records/s", `{"series": [{"name": "sender", "points": [{"inFlight": 4, "recordsPerSecond": 0}]}]}`, "4 in flight, 0 records/s"},
		{"zero run", `{"series": [{"name": "sender", "points": [{"inFlight": 4, "recordsPerSecond": 5, "runs": [5, 0, 6]}]}]}`, "runs [5 0 6]"},
		{"zero in flight", `{"series": [{"name": "sender", "points": [{"inFlight": 0, "recordsPerSecond": 5}]}]}`, "0 in flight, 5 records/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readReport(strings.NewReader(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one that says %q", err, tt.wantErr)
			}
		})
	}
}

func TestTicks125(t *testing.T) {
	var labels []string
	minor := 0
	for _, tk := range (ticks125{}).Ticks(700, 23000) {
		if tk.Label == "" {
			minor++
			continue
		}
		labels = append(labels, tk.Label)
	}
	if got, want := strings.Join(labels, " "), "1k 2k 5k 10k 20k"; got != want || minor != 9 {
		t.Errorf("labels %q and %d minor ticks, want %q and 9 (700 to 900, 3k, 4k, 6k to 9k)", got, minor, want)
	}
}
