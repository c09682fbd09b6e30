// Command latencybench measures how throughput holds when every S3 and SQS
// request takes longer, as it does in a Region: it runs the s3sqs CLI (fanout
// in record and chunk mode, and ingest) as a subprocess, through
// internal/testenv/faultproxy with a fixed delay on every answer, at the
// defaults and at a small sweep of hand-tuned settings, and prints one
// Markdown table of records/s, the ratios to the best swept setting and to
// the same mode's 0 ms defaults, and the subprocess's peak RSS (its VmHWM,
// polled; see watchPeakRSS).
//
// S3 is rclone/gofakes3 in a child process (a copy of this program) and SQS
// the fauxqs that tools/with-local-aws starts; a proxy sits in front of
// each, and the CLI reaches them through AWS_ENDPOINT_URL_S3 and
// AWS_ENDPOINT_URL_SQS. The proxy delays every SQS request and S3's
// GetObject, HeadObject, ListObjectsV2 and PutObject (the data path; its
// default operations), after it has read the whole upstream answer, so a
// GetObject's first byte comes at least the delay late. `make bench-latency`
// runs it:
//
//	tools/with-local-aws go run ./tools/latencybench [-objects 20] [-records 5000] [-latencies 0,20,50] [-sweep '16x4 64x4 128x4 16x8 64x8 128x8']
package main

import (
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

// setting is one hand-tuned fanout setting: -max-in-flight and
// -concurrency. The zero value is the CLI's defaults.
type setting struct{ inFlight, concurrency int }

func (s setting) String() string {
	if s == (setting{}) {
		return "defaults"
	}
	return fmt.Sprintf("-max-in-flight %d -concurrency %d", s.inFlight, s.concurrency)
}

// options are the command's flags.
type options struct {
	objects, records, record int
	latencies                []time.Duration
	sweep                    []setting
	modes                    []string
	warmUp                   bool
}

// The modes measured: fanout's two and s3ingest's.
const (
	modeRecord = "record"
	modeChunk  = "chunk"
	modeIngest = "ingest"
)

func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("latencybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.IntVar(&o.objects, "objects", 20, "JSON Lines objects in the dataset")
	fs.IntVar(&o.records, "records", 5000, "records per object")
	fs.IntVar(&o.record, "record", 1024, "bytes per record, newline excluded")
	lat := fs.String("latencies", "0,20,50", "comma-separated added latencies, in ms, on every S3 and SQS request")
	sweep := fs.String("sweep", "16x4 64x4 128x4 16x8 64x8 128x8", "space-separated fanout settings `INFLIGHTxCONCURRENCY` tried beside the defaults; empty for none")
	modes := fs.String("modes", "record chunk ingest", "space-separated modes: record, chunk (fanout) and ingest (s3ingest)")
	fs.BoolVar(&o.warmUp, "warm-up", true, "run fanout once before the table, outside it (fauxqs is slower in its first seconds)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.objects < 1 || o.records < 1 || o.record < 64 {
		return options{}, fmt.Errorf("-objects and -records must be positive and -record at least 64")
	}
	for _, s := range strings.Split(*lat, ",") {
		ms, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || ms < 0 {
			return options{}, fmt.Errorf("-latencies: %q is not a whole number of ms", s)
		}
		o.latencies = append(o.latencies, time.Duration(ms)*time.Millisecond)
	}
	for _, s := range strings.Fields(*sweep) {
		var st setting
		if _, err := fmt.Sscanf(s, "%dx%d", &st.inFlight, &st.concurrency); err != nil || st.inFlight < 1 || st.concurrency < 1 {
			return options{}, fmt.Errorf("-sweep: %q is not INFLIGHTxCONCURRENCY", s)
		}
		o.sweep = append(o.sweep, st)
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
			r, err := env.measureRow(ctx, m, lat, o.sweep)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	printTable(out, o, rows, time.Since(start))
	fmt.Fprintf(log, "latencybench: S3 proxy %v\nlatencybench: SQS proxy %v\n", env.s3p.Stats(), env.sqsp.Stats())
	return nil
}
