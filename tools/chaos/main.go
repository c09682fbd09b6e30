// Command chaos runs both functions through a fault-injecting proxy at the
// rates of chaos.IssueRates (or -rates-scale times them) and prints, for
// each function, how every record ended: `make chaos` runs it under
// tools/with-local-aws.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/s3sqs/s3sqs/internal/testenv/chaos"
)

func main() {
	seed := flag.Int64("seed", 1, "seed of the faults")
	fanoutObjects := flag.Int("fanout-objects", 7, "JSON Lines objects of the fanout dataset (the last gzipped)")
	fanoutRecords := flag.Int("fanout-records", 3000, "records per fanout object")
	chunkSize := flag.String("chunk-size", "32KiB", "fanout's CHUNK_SIZE")
	ingestObjects := flag.Int("ingest-objects", 50, "objects s3ingest is notified of")
	ingestRecords := flag.Int("ingest-records", 100, "records per s3ingest object")
	redeliver := flag.Float64("redeliver", 0.2, "share of messages (tasks, notifications) delivered a second time after the first succeeded")
	workers := flag.Int("workers", 2, "instances of each function at once")
	baseline := flag.Bool("baseline", true, "also run without the claims table, for comparison")
	dir := flag.String("dir", ".local/chaos", "where the bootstraps and the functions' logs go")
	flag.Parse()

	c, err := chaos.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c.Seed, c.Rates, c.Workers, c.Dir, c.Log = *seed, chaos.IssueRates, *workers, *dir, os.Stderr
	c.FanoutObjects, c.FanoutRecords, c.ChunkSize = *fanoutObjects, *fanoutRecords, *chunkSize
	c.IngestObjects, c.IngestRecords, c.Redeliver = *ingestObjects, *ingestRecords, *redeliver
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var results []chaos.Result
	modes := []bool{true}
	if *baseline {
		modes = append(modes, false)
	}
	for _, claims := range modes {
		c.Claims = claims
		res, err := chaos.Run(ctx, c)
		results = append(results, res...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Printf("seed %d; faults: %.0f%% of entries failed, SQS requests %.0f%% 500 and %.0f%% throttled, connections %.0f%% reset before and %.0f%% after the request took effect, S3 requests %.0f%% 500, %.0f%% of GetObject bodies cut short, %.0f%% of answers delayed %s;\n",
		c.Seed, 100*c.Rates.EntryFailed, 100*c.Rates.SQS500, 100*c.Rates.SQSThrottled, 100*c.Rates.ResetBefore, 100*c.Rates.ResetAfter,
		100*c.Rates.S3500, 100*c.Rates.BodyCut, 100*c.Rates.Delay, c.Rates.DelayFor)
	fmt.Printf("%.0f%% of messages (chunk tasks, notifications) delivered a second time after the first delivery succeeded\n\n", 100*c.Redeliver)
	chaos.Table(os.Stdout, results)
	for _, r := range results {
		if r.Lost > 0 || (r.Claims && r.DLQ > 0) {
			os.Exit(1)
		}
	}
}
