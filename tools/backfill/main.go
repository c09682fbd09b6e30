// Command backfill runs a backfill on the local stand-ins as
// docs/backfills.md shows it: preview, a paced start over two functions,
// `s3sqs status -watch`, pause, resume, a new rate, and the accounting.
// Run it with `make backfill`, which starts the stand-ins.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/s3sqs/s3sqs/internal/testenv/backfill"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

func main() {
	var c backfill.Config
	flag.IntVar(&c.Objects, "objects", 24, "objects in the dataset")
	flag.IntVar(&c.Records, "records", 500, "records per object")
	flag.IntVar(&c.Rate, "rate", 300, "the run's MAX_RATE at its start, messages/s")
	flag.IntVar(&c.Raised, "raised", 600, "the rate `s3sqs set` gives it after the resume")
	flag.DurationVar(&c.Pause, "pause", 0, "how long the run stays paused (default 6s)")
	flag.Parse()
	c.MotoURL, c.SQSURL, c.RIE = os.Getenv(localaws.EnvMoto), os.Getenv(localaws.EnvSQS), os.Getenv(localaws.EnvRIE)
	if c.MotoURL == "" || c.SQSURL == "" || c.RIE == "" {
		fmt.Fprintf(os.Stderr, "backfill: %s, %s and %s must be set: run it with `make backfill` (tools/with-local-aws)\n", localaws.EnvMoto, localaws.EnvSQS, localaws.EnvRIE)
		os.Exit(2)
	}
	c.Dir, _ = filepath.Abs(filepath.Join(".local", "backfill"))
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := backfill.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
	if !res.OK() {
		os.Exit(1)
	}
}
