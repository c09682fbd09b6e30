package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// benchCase is one function configuration to measure.
type benchCase struct {
	mode       worktask.Mode
	cc         int    // CHUNK_CONCURRENCY; 0: unset
	inflight   int    // MAX_IN_FLIGHT; 0: unset
	queue      int    // the target's MaximumMessageSize; 0: the default, 1 MiB
	mem        int    // AWS_LAMBDA_FUNCTION_MEMORY_SIZE in MB
	gomemlimit string // GOMEMLIMIT; "": unset
}

// parseCase reads mode[/key=value...].
func parseCase(s string) (benchCase, error) {
	parts := strings.Split(s, "/")
	c := benchCase{mode: worktask.Mode(parts[0]), mem: 128}
	if c.mode != worktask.ModeRecord && c.mode != worktask.ModeChunk {
		return c, fmt.Errorf("case %q: mode %q is not record or chunk", s, parts[0])
	}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return c, fmt.Errorf("case %q: %q is not key=value", s, p)
		}
		var err error
		switch k {
		case "cc":
			c.cc, err = positive(v)
		case "inflight":
			c.inflight, err = positive(v)
		case "mem":
			c.mem, err = positive(v)
		case "queue":
			var n int64
			if n, err = settings.ParseSize(v); err == nil && (n < 1024 || n > 1<<20) {
				err = errors.New("not between 1KiB and 1MiB")
			}
			c.queue = int(n)
		case "gomemlimit":
			c.gomemlimit = v
		default:
			err = errors.New("unknown key (cc, inflight, queue, mem, gomemlimit)")
		}
		if err != nil {
			return c, fmt.Errorf("case %q: %s: %v", s, k, err)
		}
	}
	return c, nil
}

func positive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive whole number", v)
	}
	return n, nil
}

// String writes the case as parseCase reads it.
func (c benchCase) String() string {
	s := string(c.mode)
	if c.cc > 0 {
		s += "/cc=" + strconv.Itoa(c.cc)
	}
	if c.inflight > 0 {
		s += "/inflight=" + strconv.Itoa(c.inflight)
	}
	if c.queue > 0 {
		s += "/queue=" + sizeName(c.queue)
	}
	if c.mem != 128 {
		s += "/mem=" + strconv.Itoa(c.mem)
	}
	if c.gomemlimit != "" {
		s += "/gomemlimit=" + c.gomemlimit
	}
	return s
}

// env is the function's environment for the case, on top of this
// process's (which points SQS at the stand-in).
func (c benchCase) env(s3URL, target string) []string {
	env := []string{
		"AWS_ENDPOINT_URL_S3=" + s3URL, "S3_FORCE_PATH_STYLE=true",
		"TARGET_QUEUE_URL=" + target, "MODE=" + string(c.mode),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=900", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(c.mem),
		"GODEBUG=gctrace=1",
	}
	if c.cc > 0 {
		env = append(env, "CHUNK_CONCURRENCY="+strconv.Itoa(c.cc))
	}
	if c.inflight > 0 {
		env = append(env, "MAX_IN_FLIGHT="+strconv.Itoa(c.inflight))
	}
	if c.gomemlimit != "" {
		env = append(env, "GOMEMLIMIT="+c.gomemlimit)
	}
	return env
}

func sizeName(n int) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n)
}

// row is one measured run.
type row struct {
	c        benchCase
	records  int64
	requests int64
	seconds  float64
	peakRSS  int64 // bytes
	fileRSS  int64 // bytes: the mapped files (the binary's code) at the end
	gc       gcTrace
}

// gcTrace sums up a process's GODEBUG=gctrace=1 lines.
type gcTrace struct {
	cycles   int
	peakHeap int // MiB: the largest heap at the start or end of a cycle
	peakGoal int // MiB
}

// gcLine matches the heap figures of a gctrace line: "4->5->2 MB, 5 MB goal".
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

// parseGCTrace reads the gctrace lines among a process's output.
func parseGCTrace(out string) gcTrace {
	var t gcTrace
	for _, line := range strings.Split(out, "\n") {
		m := gcLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t.cycles++
		for _, f := range m[1:3] {
			n, _ := strconv.Atoi(f)
			t.peakHeap = max(t.peakHeap, n)
		}
		goal, _ := strconv.Atoi(m[4])
		t.peakGoal = max(t.peakGoal, goal)
	}
	return t
}

// statusKB reads a figure in kB, such as VmHWM (the peak resident set
// size), from a /proc/<pid>/status file and returns it in bytes.
func statusKB(status []byte, name string) (int64, error) {
	for _, line := range bytes.Split(status, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte(name+":"))
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(v)), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, v, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in the process's status", name)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// printTable writes the rows, one per run.
func printTable(w io.Writer, o options, records int64, rows []row) {
	fmt.Fprintf(w, "\none JSON Lines object of %.0f MiB (%d records of %d B), the fanout bootstrap under aws-lambda-rie, %d cores;\n"+
		"S3 is gofakes3 in a child process and SQS fauxqs, beside it on the same cores; \"-\" is the default\n\n",
		mib(o.size), records, o.record, runtime.NumCPU())
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tqueue max\tCHUNK_CONCURRENCY\tMAX_IN_FLIGHT\tmemory MB\tGOMEMLIMIT\trecords\trequests\tseconds\trecords/s\tpeak RSS MiB\tof which files\tpeak heap MiB\tGCs\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%.1f\t%.0f\t%.1f\t%.1f\t%d\t%d\t\n",
			r.c.mode, sizeName(cmp.Or(r.c.queue, 1<<20)), orDash(r.c.cc), orDash(r.c.inflight), r.c.mem, cmpDash(r.c.gomemlimit),
			r.records, r.requests, r.seconds, float64(r.records)/r.seconds, mib(r.peakRSS), mib(r.fileRSS), r.gc.peakHeap, r.gc.cycles)
	}
	tw.Flush()
}

func orDash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func cmpDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
