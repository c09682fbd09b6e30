// Command demo runs the whole s3sqs pipeline on local stand-ins and prints
// who got which record. Run it with `make demo`, which starts the
// stand-ins; see README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/s3sqs/s3sqs/internal/testenv/demo"
)

func main() {
	records := flag.Int("records", 500, "records per generated object")
	objects := flag.Int("fanout-objects", 8, "objects in the fanout dataset")
	flag.Parse()
	cfg, err := demo.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Records, cfg.FanoutObjects, cfg.Log = *records, *objects, os.Stderr
	cfg.Dir, _ = filepath.Abs(filepath.Join(".local", "demo"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := demo.Run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !sum.OK() {
		os.Exit(1)
	}
}
