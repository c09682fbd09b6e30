// Command membench measures the peak memory of the fanout function: it
// builds the bootstrap as Lambda runs it (internal/testenv/rie), starts it under
// aws-lambda-rie for each case, sends it a request for one large JSON Lines
// object (1 GiB of 1 KiB records by default) and prints, per case, the
// records sent, the seconds and records/s of the invocation, the peak RSS
// of the function's process (VmHWM from /proc/<pid>/status) and the peak Go
// heap and the number of collections from its GODEBUG=gctrace=1 lines.
//
// S3 is rclone/gofakes3 in a child process (a copy of this program), which
// holds the object in its own memory and serves ranged GETs at memory
// speed; SQS is the fauxqs that tools/with-local-aws starts, whose target
// queues are purged every second so that it holds little. `make membench`
// runs it:
//
//	tools/with-local-aws go run ./tools/membench [-size 1GiB] [-record 1024] [-cases 'record chunk chunk/queue=256KiB']
//
// A case is a mode (record or chunk) and, after slashes, settings:
// cc=N (CHUNK_CONCURRENCY), inflight=N (MAX_IN_FLIGHT), queue=256KiB (the
// target queue's MaximumMessageSize; 1 MiB otherwise), mem=N (the
// function's memory in MB, AWS_LAMBDA_FUNCTION_MEMORY_SIZE; 128 by
// default) and gomemlimit=V (GOMEMLIMIT, such as off).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// defaultCases are the cases measured without -cases: both modes at the
// defaults, and chunk mode to a queue of the old 256 KiB limit.
const defaultCases = "record chunk chunk/queue=256KiB"

func main() {
	if localaws.ServeS3Child() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "membench: %v\n", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	size   int64
	record int
	cases  []benchCase
	repeat int
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("membench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "1GiB", "size of the JSON Lines object (bytes, or with KiB, MiB, GiB)")
	record := fs.Int("record", 1024, "bytes per record, newline excluded")
	cases := fs.String("cases", defaultCases, "space-separated `cases`: mode[/cc=N][/inflight=N][/queue=SIZE][/mem=MB][/gomemlimit=V]")
	repeat := fs.Int("repeat", 1, "runs of each case; the table has every run")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := options{record: *record, repeat: *repeat}
	var err error
	if o.size, err = settings.ParseSize(*size); err != nil || o.size <= 0 {
		return options{}, fmt.Errorf("-size: %q is not a positive size", *size)
	}
	if o.record < 64 || int64(o.record) > o.size {
		return options{}, fmt.Errorf("-record: %d is not between 64 and -size", o.record)
	}
	if o.repeat < 1 {
		return options{}, fmt.Errorf("-repeat: %d is not positive", o.repeat)
	}
	for _, s := range strings.Fields(*cases) {
		c, err := parseCase(s)
		if err != nil {
			return options{}, fmt.Errorf("-cases: %w", err)
		}
		o.cases = append(o.cases, c)
	}
	if len(o.cases) == 0 {
		return options{}, fmt.Errorf("-cases: no case")
	}
	return o, nil
}

func run(ctx context.Context, args []string, out, log io.Writer) error {
	o, err := parseArgs(args, log)
	if err != nil {
		return err
	}
	env, err := setUp(ctx, o, log)
	if err != nil {
		return err
	}
	defer env.close()
	var rows []row
	for _, c := range o.cases {
		for range o.repeat {
			r, err := env.measure(ctx, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			fmt.Fprintf(log, "membench: %s: %d records in %.1fs, peak RSS %.1f MiB\n", c, r.records, r.seconds, mib(r.peakRSS))
			rows = append(rows, r)
		}
	}
	printTable(out, o, env.records, rows)
	return nil
}
