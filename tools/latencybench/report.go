package main

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// row is one line of the table: a mode at one latency.
type row struct {
	mode     string
	latency  time.Duration
	defaults result
	best     *result // nil when nothing was swept
}

// printTable prints the table in Markdown. A ratio to 0 ms needs the same
// mode's 0 ms row.
func printTable(w io.Writer, o options, rows []row, took time.Duration) {
	fmt.Fprintf(w, "\n%s shape: %d objects x %d records of %d B (JSON Lines), s3sqs CLI as a subprocess, GOMAXPROCS=%d, %s proxy, %s (%s in all);\n"+
		"records/s is records over the subprocess's wall time; peak RSS is its VmHWM, read every 20 ms\n\n",
		o.shape, o.objects, o.records, o.record, runtime.GOMAXPROCS(0), o.proxy, runs(o.repeat), took.Round(time.Second))
	fmt.Fprintln(w, "| mode | added latency | defaults records/s | vs 0 ms | best setting (defaults or swept) | its records/s | defaults / best | peak RSS defaults | peak RSS best |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---:|---:|---:|---:|")
	zero := map[string]float64{}
	for _, r := range rows {
		if r.latency == 0 {
			zero[r.mode] = r.defaults.rate()
		}
	}
	for _, r := range rows {
		vs := "n/a"
		if z, ok := zero[r.mode]; ok {
			vs = fmt.Sprintf("%.2fx", r.defaults.rate()/z)
		}
		best, bestRate, ratio, bestRSS := "none swept", "", "", ""
		if r.mode == modeIngest {
			best = "no flag to tune"
		}
		if r.best != nil {
			best = "`" + r.best.setting.label(r.mode) + "`"
			bestRate = fmt.Sprintf("%.0f", r.best.rate())
			ratio = fmt.Sprintf("%.2fx", r.defaults.rate()/r.best.rate())
			bestRSS = fmt.Sprintf("%.0f MiB", mib(r.best.peakRSS))
		}
		fmt.Fprintf(w, "| %s | %d ms | %.0f | %s | %s | %s | %s | %.0f MiB | %s |\n", name(r.mode), r.latency.Milliseconds(),
			r.defaults.rate(), vs, best, bestRate, ratio, mib(r.defaults.peakRSS), bestRSS)
	}
}

func name(mode string) string {
	if mode == modeIngest {
		return "s3ingest"
	}
	return "fanout " + mode
}

// runs says how many runs each cell had.
func runs(n int) string {
	if n == 1 {
		return "one run of each cell"
	}
	return fmt.Sprintf("the median of %d runs of each cell, in rounds, with the highest peak RSS of them", n)
}
