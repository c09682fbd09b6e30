// Command throughput measures the records/s of pkg/sqsbatch's Sender and
// of hand-made batches (a plain loop of SendMessageBatch calls of ten
// entries, on as many goroutines as the Sender has requests in flight)
// against the SQS stand-in, at 1 to 32 requests in flight and at each
// latency added to every request, and writes them as JSON for tools/plot.
// Entries are 1 KiB. `make plot` runs it and draws docs/throughput.svg:
//
//	tools/with-local-aws go run ./tools/throughput [-entries 20000] [-latency-entries 4000] [-latency 0,10ms] [-repeat 5] [-out docs/throughput.json]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// inFlight are the numbers of requests in flight measured.
var inFlight = []int{1, 2, 4, 8, 16, 32}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "throughput: %v\n", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	set settings
	out string
}

// parseArgs reads the flags of args (without the program name).
func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.set.Entries, "entries", 20_000, "entries of 1 KiB sent in each run without added latency")
	fs.IntVar(&o.set.LatencyEntries, "latency-entries", 4_000, "entries of 1 KiB sent in each run with added latency")
	latency := fs.String("latency", "0,10ms", "comma-separated `latencies` added to every SendMessageBatch request")
	fs.IntVar(&o.set.Repeat, "repeat", 5, "runs at each point; the report keeps the median")
	fs.StringVar(&o.out, "out", "docs/throughput.json", "write the JSON report to `file`")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if o.set.Entries <= 0 {
		errs = append(errs, fmt.Errorf("-entries %d: must be > 0", o.set.Entries))
	}
	if o.set.LatencyEntries <= 0 {
		errs = append(errs, fmt.Errorf("-latency-entries %d: must be > 0", o.set.LatencyEntries))
	}
	if o.set.Repeat <= 0 {
		errs = append(errs, fmt.Errorf("-repeat %d: must be > 0", o.set.Repeat))
	}
	for _, s := range strings.Split(*latency, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("-latency %q: %q is not a duration >= 0", *latency, s))
			continue
		}
		o.set.Latencies = append(o.set.Latencies, d)
	}
	o.set.InFlight = inFlight
	return o, errors.Join(errs...)
}

// run measures as args say against the SQS stand-in named by the
// environment and writes the report.
func run(ctx context.Context, args []string, getenv func(string) string, progress io.Writer) error {
	o, err := parseArgs(args[1:], progress)
	if err != nil {
		return err
	}
	endpoint := getenv(localaws.EnvSQS)
	if endpoint == "" {
		return fmt.Errorf("%s is not set: run it with tools/with-local-aws (make plot)", localaws.EnvSQS)
	}
	r := newReport(strings.Join(append([]string{filepath.Base(args[0])}, args[1:]...), " "), o.set)
	r.Series, err = measure(ctx, sqs.NewFromConfig(localaws.Config(endpoint)), o.set, progress)
	if err != nil {
		return err
	}
	if err := writeReport(o.out, r); err != nil {
		return err
	}
	fmt.Fprintf(progress, "throughput: wrote %s\n", o.out)
	return nil
}

// newReport returns a report without series, made now on this machine by
// command with set.
func newReport(command string, set settings) report {
	return report{
		Date:       time.Now().UTC().Truncate(time.Second),
		Command:    command,
		Machine:    thisMachine(),
		EntryBytes: entryBytes,
		Notes: []string{
			"The SQS stand-in (fauxqs, on node) runs on the same machine and shares its CPUs with the sender.",
			fmt.Sprintf("Each point is the median of %d runs, each a send of %d entries without added latency, "+
				"or of %d with added latency (where the wait dominates, and fewer keep the run short); "+
				"the queue is purged after every run.", set.Repeat, set.Entries, set.LatencyEntries),
			fmt.Sprintf("Each way first sends %d times unmeasured, to warm the stand-in up.", warmUps),
			"Added latency is a wait before each SendMessageBatch request, in the client.",
		},
	}
}
