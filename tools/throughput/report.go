package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Series names, as they appear in the report.
const (
	// seriesSender is pkg/sqsbatch's Sender.
	seriesSender = "sender"
	// seriesHandMade is a plain loop of SendMessageBatch calls of ten
	// entries, on as many goroutines as the Sender has requests in flight.
	seriesHandMade = "hand-made"
)

// report is what docs/throughput.json holds. tools/plot reads it with its
// own copy of the fields it draws, so a renamed tag here must be renamed
// there too.
type report struct {
	// Date is when the measurement started, in UTC.
	Date time.Time `json:"date"`
	// Command is the command line the report was made with.
	Command string  `json:"command"`
	Machine machine `json:"machine"`
	// EntryBytes is the size of each entry's body.
	EntryBytes int `json:"entryBytes"`
	// Notes say how the figures were taken.
	Notes  []string `json:"notes"`
	Series []series `json:"series"`
}

// machine describes where the report was made.
type machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	// CPUModel is the first "model name" of /proc/cpuinfo; empty where
	// there is no such file.
	CPUModel  string `json:"cpuModel,omitempty"`
	GoVersion string `json:"goVersion"`
}

// series is one way of sending at one added latency, measured at each
// number of requests in flight.
type series struct {
	// Name is seriesSender or seriesHandMade.
	Name string `json:"name"`
	// LatencyMS is the latency added to every SendMessageBatch request,
	// in milliseconds.
	LatencyMS float64 `json:"latencyMs"`
	// Entries is the number of entries sent in each run.
	Entries int     `json:"entries"`
	Points  []point `json:"points"`
}

// point is the measurement at one number of requests in flight.
type point struct {
	// InFlight is the most SendMessageBatch requests in flight at once.
	InFlight int `json:"inFlight"`
	// RecordsPerSecond is the median of Runs.
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// Runs are the records/s of each run, in the order they ran: entries
	// sent divided by the wall time from the first entry to the last
	// answer.
	Runs []float64 `json:"runs"`
	// Requests is the number of SendMessageBatch requests of a run, the
	// most of any run.
	Requests int `json:"requests"`
}

// thisMachine describes the machine this process runs on.
func thisMachine() machine {
	m := machine{
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		GoVersion:  runtime.Version(),
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		m.CPUModel = cpuModel(f)
	}
	return m
}

// cpuModel returns the value of the first "model name" line of a
// /proc/cpuinfo, or "" when it has none.
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// writeReport writes r as indented JSON to path, creating its folder if
// need be.
func writeReport(path string, r report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
