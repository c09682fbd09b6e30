package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestShapes(t *testing.T) {
	tests := []struct {
		name             string
		args             []string
		objects, records int
	}{
		{"default", nil, 20, 5000},
		{"large", []string{"-shape", "large"}, 1, 100000},
		{"small", []string{"-shape", "small"}, 400, 250},
		{"small, fewer objects", []string{"-shape", "small", "-objects", "7"}, 7, 250},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseArgs(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.objects != tt.objects || o.records != tt.records {
				t.Errorf("%d x %d, want %d x %d", o.objects, o.records, tt.objects, tt.records)
			}
		})
	}
	if _, err := parseArgs([]string{"-shape", "huge"}, io.Discard); err == nil {
		t.Error("-shape huge: no error")
	}
}

// fakeCLI writes a script that prints help for fanout and ingest: fanout's
// lists fanoutFlags, ingest's ingestFlags.
func fakeCLI(t *testing.T, fanoutFlags, ingestFlags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "s3sqs")
	script := "#!/bin/sh\ncase $1 in\nfanout) echo '" + fanoutFlags + "' >&2; exit 2;;\ningest) echo '" + ingestFlags + "' >&2; exit 2;;\nesac\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSweeps checks that the sweep follows the flags the CLI lists: today's
// sweep without -fixed-in-flight, the fixed one with it, ingest's only when
// it has the flags.
func TestSweeps(t *testing.T) {
	o, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	old := fakeCLI(t, "-max-in-flight requests -concurrency chunks", "-format format")
	got, err := sweeps(t.Context(), old, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []setting{{16, 4, false}, {64, 4, false}, {128, 4, false}, {16, 8, false}, {64, 8, false}, {128, 8, false}}
	if !slices.Equal(got[modeRecord], want) || !slices.Equal(got[modeChunk], want) || len(got[modeIngest]) != 0 {
		t.Errorf("today's CLI: sweeps %v, want %v for fanout and none for ingest", got, want)
	}

	tuned := fakeCLI(t, "-max-in-flight requests -fixed-in-flight -concurrency chunks", "-max-in-flight n -fixed-in-flight -read-concurrency n")
	if got, err = sweeps(t.Context(), tuned, o); err != nil {
		t.Fatal(err)
	}
	var fixed []setting
	for _, c := range []int{4, 8} {
		for _, n := range []int{16, 64, 128, 256} {
			fixed = append(fixed, setting{n, c, true})
		}
	}
	slices.SortFunc(fixed, func(a, b setting) int { return a.concurrency - b.concurrency })
	for _, m := range []string{modeRecord, modeChunk, modeIngest} {
		if !slices.Equal(got[m], fixed) {
			t.Errorf("tuned CLI, %s: sweep %v, want %v", m, got[m], fixed)
		}
	}
	if f := (setting{64, 8, true}).flags(modeIngest); !slices.Equal(f, []string{"-fixed-in-flight", "-max-in-flight", "64", "-read-concurrency", "8"}) {
		t.Errorf("ingest flags %q", f)
	}

	o.sweep, o.swept = []setting{{32, 2, false}}, true
	if got, err = sweeps(t.Context(), tuned, o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[modeRecord], []setting{{32, 2, true}}) {
		t.Errorf("-sweep 32x2 on the tuned CLI: %v", got[modeRecord])
	}
	if _, err := sweeps(t.Context(), fakeCLI(t, "nothing", "nothing"), o); err == nil {
		t.Error("a program that is not the CLI: no error")
	}
}

// TestStreamProxy checks that the proxy holds the answer's headers for the
// delay and then streams the body: the client reads the first line while
// the upstream still holds back the second.
func TestStreamProxy(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	p, err := newStreamProxy(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const delay = 30 * time.Millisecond
	p.SetDelay(delay)
	t0 := time.Now()
	resp, err := http.Get(p.URL() + "/x")
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if took := time.Since(t0); took < delay {
		t.Errorf("headers after %v, want at least the delay, %v", took, delay)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	close(release) // only now may the upstream send the rest
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
	if s := p.Stats(); s != "{Requests:1 Delayed:1}" {
		t.Errorf("stats %s", s)
	}
}

// TestMedian checks that a cell's figure is its median run, not its best or
// its last, and carries the highest peak RSS of its runs.
func TestMedian(t *testing.T) {
	run := func(records int64, rss int64) result {
		return result{records: records, wall: time.Second, peakRSS: rss}
	}
	tests := []struct {
		name    string
		runs    []result
		rate    float64
		peakRSS int64
	}{
		{"one", []result{run(100, 5)}, 100, 5},
		{"odd", []result{run(300, 1), run(100, 9), run(200, 2)}, 200, 9},
		{"even takes the lower middle", []result{run(400, 1), run(100, 1), run(300, 4), run(200, 1)}, 200, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := median(tt.runs)
			if m.rate() != tt.rate || m.peakRSS != tt.peakRSS {
				t.Errorf("median: %.0f records/s, peak %d; want %.0f, %d", m.rate(), m.peakRSS, tt.rate, tt.peakRSS)
			}
		})
	}
	if _, err := parseArgs([]string{"-repeat", "0"}, io.Discard); err == nil {
		t.Error("-repeat 0: no error")
	}
}
