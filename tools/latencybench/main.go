// Command latencybench measures how throughput holds when every S3 and SQS
// request takes longer, as it does in a Region: it runs the s3sqs CLI (fanout
// in record and chunk mode, and ingest) as a subprocess, through a proxy
// with a fixed delay on every request, at the defaults and at a sweep of
// hand-tuned settings, and prints one Markdown table of records/s, the
// ratios to the best swept setting and to the same mode's 0 ms defaults,
// and the subprocess's peak RSS (its VmHWM, polled; see watchPeakRSS).
//
// S3 is rclone/gofakes3 in a child process (a copy of this program) and SQS
// the fauxqs that tools/with-local-aws starts; a proxy sits in front of
// each, and the CLI reaches them through AWS_ENDPOINT_URL_S3 and
// AWS_ENDPOINT_URL_SQS. The default proxy (streamProxy) holds every answer
// for the delay once the upstream's headers have come and then streams
// it, so a GetObject's first byte comes the delay late; -proxy faultproxy
// uses internal/testenv/faultproxy instead, which reads every answer whole
// before its delay, as the first tables were measured.
//
// The sweep suits the CLI it measures: when `s3sqs fanout -h` lists
// -fixed-in-flight (requests in flight that size themselves, with a fixed
// value as a choice), settings are fixed ones, for ingest too when it has
// -read-concurrency; otherwise fanout's -max-in-flight and -concurrency as
// they were, and ingest at its defaults only. -bin measures a CLI built
// elsewhere, so that one copy of this tool prints the table before and
// after a change. -shape chooses the dataset. -repeat runs each cell
// several times, in rounds that try every setting of a row once so that a
// slow spell of the machine falls on all of them, and the table shows
// medians: one run of a cell can be 40% off the next on a 2-core machine.
// `make bench-latency` runs it:
//
//	tools/with-local-aws go run ./tools/latencybench [-shape default|large|small] [-latencies 0,20,50] [-sweep auto] [-repeat 1] [-bin path/to/s3sqs] [-proxy stream|faultproxy]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

func main() {
	if localaws.ServeS3Child() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "latencybench: %v\n", err)
		os.Exit(1)
	}
}

// setting is one hand-tuned setting: -max-in-flight and -concurrency
// (fanout) or -read-concurrency (ingest), with -fixed-in-flight when the
// CLI sizes its requests in flight itself. The zero value is the CLI's
// defaults.
type setting struct {
	inFlight, concurrency int
	fixed                 bool
}

// flags are the CLI flags of s for mode.
func (s setting) flags(mode string) []string {
	if s == (setting{}) {
		return nil
	}
	var a []string
	if s.fixed {
		a = append(a, "-fixed-in-flight")
	}
	conc := "-concurrency"
	if mode == modeIngest {
		conc = "-read-concurrency"
	}
	return append(a, "-max-in-flight", strconv.Itoa(s.inFlight), conc, strconv.Itoa(s.concurrency))
}

// label is s as the table shows it.
func (s setting) label(mode string) string {
	if s == (setting{}) {
		return "defaults"
	}
	return strings.Join(s.flags(mode), " ")
}

// options are the command's flags.
type options struct {
	shape                    string
	objects, records, record int
	latencies                []time.Duration
	// sweep is what -sweep says, or nil for the sweep that suits the CLI
	// (see env.sweeps).
	sweep  []setting
	swept  bool
	modes  []string
	warmUp bool
	bin    string
	proxy  string
	// repeat is how many times each cell runs; the table shows the
	// median.
	repeat int
}

// The modes measured: fanout's two and s3ingest's.
const (
	modeRecord = "record"
	modeChunk  = "chunk"
	modeIngest = "ingest"
)

// The proxies -proxy chooses from.
const (
	proxyStream = "stream"
	proxyFault  = "faultproxy"
)

// shapes are the datasets -shape names: objects x records. The default is
// the shape of the first table; large is one object of many chunks, whose
// chunks are read one after another within each lane; small is many
// objects of one short chunk, each read behind its own first-byte wait.
var shapes = map[string][2]int{
	"default": {20, 5000},
	"large":   {1, 100000},
	"small":   {400, 250},
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("latencybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.StringVar(&o.shape, "shape", "default", "dataset: default (20 objects x 5000 records), large (1 x 100000) or small (400 x 250)")
	fs.IntVar(&o.objects, "objects", 0, "JSON Lines objects in the dataset (default: the shape's)")
	fs.IntVar(&o.records, "records", 0, "records per object (default: the shape's)")
	fs.IntVar(&o.record, "record", 1024, "bytes per record, newline excluded")
	lat := fs.String("latencies", "0,20,50", "comma-separated added latencies, in ms, on every S3 and SQS request")
	sweep := fs.String("sweep", "auto", "space-separated settings `INFLIGHTxCONCURRENCY` tried beside the defaults, empty for none; auto: 16/64/128/256 x 4/8 with -fixed-in-flight for fanout and ingest when the CLI has it, else 16/64/128 x 4/8 for fanout only")
	modes := fs.String("modes", "record chunk ingest", "space-separated modes: record, chunk (fanout) and ingest (s3ingest)")
	fs.BoolVar(&o.warmUp, "warm-up", true, "run fanout once before the table, outside it (fauxqs is slower in its first seconds)")
	fs.StringVar(&o.bin, "bin", "", "the s3sqs CLI to measure (default: built from this module)")
	fs.IntVar(&o.repeat, "repeat", 1, "runs of each cell, in rounds that try every setting once; the table shows each cell's median records/s (and its highest peak RSS)")
	fs.StringVar(&o.proxy, "proxy", proxyStream, "the delaying proxy: stream (delays the first byte, then streams) or faultproxy (reads every answer whole, as the first tables did)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	shape, ok := shapes[o.shape]
	if !ok {
		return options{}, fmt.Errorf("-shape: unknown shape %q", o.shape)
	}
	o.objects, o.records = cmp.Or(o.objects, shape[0]), cmp.Or(o.records, shape[1])
	if o.objects < 1 || o.records < 1 || o.record < 64 {
		return options{}, fmt.Errorf("-objects and -records must be positive and -record at least 64")
	}
	if o.repeat < 1 {
		return options{}, fmt.Errorf("-repeat must be at least 1")
	}
	if o.proxy != proxyStream && o.proxy != proxyFault {
		return options{}, fmt.Errorf("-proxy: unknown proxy %q", o.proxy)
	}
	for _, s := range strings.Split(*lat, ",") {
		ms, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || ms < 0 {
			return options{}, fmt.Errorf("-latencies: %q is not a whole number of ms", s)
		}
		o.latencies = append(o.latencies, time.Duration(ms)*time.Millisecond)
	}
	var err error
	if o.sweep, o.swept, err = parseSweep(*sweep); err != nil {
		return options{}, err
	}
	for _, m := range strings.Fields(*modes) {
		if m != modeRecord && m != modeChunk && m != modeIngest {
			return options{}, fmt.Errorf("-modes: unknown mode %q", m)
		}
		o.modes = append(o.modes, m)
	}
	if len(o.modes) == 0 {
		return options{}, fmt.Errorf("-modes: no mode")
	}
	return o, nil
}

// parseSweep reads -sweep; swept is false for auto.
func parseSweep(sweep string) (_ []setting, swept bool, _ error) {
	if sweep == "auto" {
		return nil, false, nil
	}
	var out []setting
	for _, s := range strings.Fields(sweep) {
		var st setting
		if _, err := fmt.Sscanf(s, "%dx%d", &st.inFlight, &st.concurrency); err != nil || st.inFlight < 1 || st.concurrency < 1 {
			return nil, false, fmt.Errorf("-sweep: %q is not INFLIGHTxCONCURRENCY", s)
		}
		out = append(out, st)
	}
	return out, true, nil
}

func run(ctx context.Context, args []string, out, log io.Writer) error {
	o, err := parseArgs(args, log)
	if err != nil {
		return err
	}
	start := time.Now()
	env, err := setUp(ctx, o, log)
	if err != nil {
		return err
	}
	defer env.close()
	if o.warmUp {
		if _, err := env.measure(ctx, modeRecord, 0, setting{}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	var rows []row
	for _, m := range o.modes {
		for _, lat := range o.latencies {
			r, err := env.measureRow(ctx, m, lat, env.sweeps[m])
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	printTable(out, o, rows, time.Since(start))
	fmt.Fprintf(log, "latencybench: S3 proxy %s\nlatencybench: SQS proxy %s\n", env.s3p.Stats(), env.sqsp.Stats())
	return nil
}
