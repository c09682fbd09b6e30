package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// report holds the fields of tools/throughput's report that the plot
// draws. The JSON tags are tools/throughput's (tools/throughput/report.go,
// in the root module, which this module does not import).
type report struct {
	Date       time.Time `json:"date"`
	Command    string    `json:"command"`
	Machine    machine   `json:"machine"`
	EntryBytes int       `json:"entryBytes"`
	Series     []series  `json:"series"`
}

// machine is where the report was made.
type machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUModel   string `json:"cpuModel,omitempty"`
	GoVersion  string `json:"goVersion"`
}

// series is one line of the plot.
type series struct {
	Name      string  `json:"name"`
	LatencyMS float64 `json:"latencyMs"`
	Entries   int     `json:"entries"`
	Points    []point `json:"points"`
}

// point is one point of a line.
type point struct {
	InFlight         int       `json:"inFlight"`
	RecordsPerSecond float64   `json:"recordsPerSecond"`
	Runs             []float64 `json:"runs"`
}

// readReport decodes a report and checks that it can be drawn: at least
// one series, and in every series points with positive in-flight counts
// and records/s, in every run too (both axes are logarithmic).
func readReport(r io.Reader) (report, error) {
	var rep report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return report{}, fmt.Errorf("decode report: %w", err)
	}
	if len(rep.Series) == 0 {
		return report{}, errors.New("the report has no series")
	}
	var errs []error
	for _, s := range rep.Series {
		if len(s.Points) == 0 {
			errs = append(errs, fmt.Errorf("series %s at %v ms has no points", s.Name, s.LatencyMS))
		}
		for _, p := range s.Points {
			if p.InFlight <= 0 || p.RecordsPerSecond <= 0 || slices.ContainsFunc(p.Runs, func(run float64) bool { return run <= 0 }) {
				errs = append(errs, fmt.Errorf("series %s at %v ms: %d in flight, %v records/s, runs %v: want all > 0",
					s.Name, s.LatencyMS, p.InFlight, p.RecordsPerSecond, p.Runs))
			}
		}
	}
	return rep, errors.Join(errs...)
}
