package main

import (
	"context"
	"fmt"
	"io"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

const reconcileUsage = `usage: s3sqs reconcile (-bucket B (-prefix P | -all) | -manifest s3://...) -claims-table T (-dry-run | -send-to INGEST_QUEUE_URL) [flags]

Compares every object version under the prefix with what s3ingest recorded
as ingested in its claims table (CLAIMS_TABLE), and lists the versions it
never ingested (-dry-run) or sends their notifications to the ingest queue
(-send-to), so that s3ingest ingests them as it would have. The markers are
kept for the claims' TTL (CLAIMS_TTL, 7d by default): versions older than
-max-age (by default that TTL) are skipped and counted, since an ingested
one would look missing. -manifest compares the objects of an S3 Inventory
report (or a Batch Operations CSV manifest) instead, with -max-age off: its
rows carry no date reconcile reads. Prints a JSON report on stdout and a summary on
stderr. Each version costs one strongly consistent GetItem.`

// reconcileCmd is the command line of s3sqs reconcile.
type reconcileCmd struct {
	flags       *cmdFlags
	bucket      string
	prefix      string
	all         bool
	manifest    string
	table       string
	dryRun      bool
	sendTo      string
	format      string
	maxAge      string
	concurrency int
	pathStyle   bool
	filters     dataset.Filters
	opts        reconcile.Options
}

// runReconcile runs s3sqs reconcile.
func runReconcile(ctx context.Context, args []string, s streams) int {
	stdout, stderr := s.stdout, s.stderr
	c := newReconcileCmd(stderr)
	if code, ok := c.parse(args, usageError("reconcile", stderr)); !ok {
		return code
	}
	// Once the command line is accepted, the report goes to stdout however
	// the run ends, as the other commands' JSON does.
	rep, err := c.run(ctx)
	if rep.Objects == nil {
		rep.Objects = []reconcile.Object{}
	}
	printJSON(stdout, rep)
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs reconcile: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, summary(rep))
	if rep.Failed > 0 {
		return 1
	}
	return 0
}

// summary is the report in a sentence.
func summary(r reconcile.Report) string {
	from := "s3://" + r.Bucket + "/" + r.Prefix
	if r.Manifest != "" {
		from = r.Manifest
	}
	s := fmt.Sprintf("%s: %d object versions seen, %d already ingested, %d missing", from, r.Seen, r.Ingested, r.Missing)
	if r.DryRun {
		s += " (dry run: nothing sent)"
	} else {
		s += fmt.Sprintf(", %d sent", r.Sent)
	}
	s += fmt.Sprintf("; skipped: %d older than %s (their markers may have expired), %d delete markers; %d failed", r.SkippedTooOld, r.MaxAge, r.SkippedDeleteMarkers, r.Failed)
	if r.ObjectsCut {
		s += fmt.Sprintf("; the report lists the first %d missing", len(r.Objects))
	}
	return s
}

func newReconcileCmd(stderr io.Writer) *reconcileCmd {
	c := &reconcileCmd{flags: newCmdFlags("reconcile", reconcileUsage, stderr)}
	fs := c.flags
	fs.StringVar(&c.bucket, "bucket", "", "the `bucket` to reconcile")
	fs.StringVar(&c.prefix, "prefix", "", "the key `prefix` to reconcile")
	fs.BoolVar(&c.all, "all", false, "reconcile every object version in the bucket (must be said explicitly, as fanout's -all)")
	fs.StringVar(&c.manifest, "manifest", "", "compare the objects of this S3 Inventory manifest.json or CSV manifest (`s3://bucket/key`) instead of a prefix")
	fs.text(settings.ClaimsTable, &c.table, "s3ingest's claims `table` (its CLAIMS_TABLE)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "list the missing object versions, send nothing")
	fs.StringVar(&c.sendTo, "send-to", "", "send each missing version's notification to this ingest queue `URL`")
	fs.StringVar(&c.format, "notification-format", "s3", "the notifications' `shape`: s3, eventbridge or sns, as the ingest queue receives them")
	fs.StringVar(&c.maxAge, "max-age", "", "skip versions older than this `age` (7d, 36h, or off for all); default the claims' TTL, 7d")
	fs.IntVar(&c.concurrency, "concurrency", reconcile.DefaultConcurrency, "GetItems in flight at once")
	fs.boolean(settings.S3PathStyle, &c.pathStyle, "")
	filterFlags(fs, &c.filters)
	return c
}

// parse reads the command line and checks it.
func (c *reconcileCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	if code, ok := parseFlags(c.flags.FlagSet, args); !ok {
		return code, false
	}
	if msg, isBad := c.flags.firstBad(); isBad {
		return bad("%s", msg), false
	}
	f, err := s3event.ParseFormat(c.format)
	filtersErr := c.filters.Validate()
	switch {
	case c.flags.NArg() > 0:
		return bad("unexpected arguments %q", c.flags.Args()), false
	case c.manifest != "" && (c.bucket != "" || c.flags.given()["prefix"]):
		return bad("give -bucket and -prefix, or -manifest, not both"), false
	case c.manifest != "" && c.maxAge != "off" && c.maxAge != "0" && c.maxAge != "none":
		return bad("-manifest needs -max-age off: a report's rows carry no date to skip the objects older than the claims' TTL by"), false
	case c.manifest == "" && c.bucket == "":
		return bad("-bucket (with -prefix) or -manifest is required"), false
	case c.manifest == "" && c.prefix == "" && !c.all:
		return bad("-bucket without -prefix would reconcile every object version in the bucket: name a -prefix, or say -all"), false
	case c.all && (c.prefix != "" || c.manifest != ""):
		return bad("-all reconciles the whole bucket: not with -prefix or -manifest"), false
	case c.manifest == "" && dataset.CheckBucket(c.bucket) != nil:
		return bad("-bucket: %v", dataset.CheckBucket(c.bucket)), false
	case c.table == "":
		return bad("-claims-table is required: reconcile reads what s3ingest recorded there"), false
	case c.dryRun == (c.sendTo != ""):
		return bad("give one of -dry-run and -send-to"), false
	case err != nil:
		return bad("-notification-format: %v", err), false
	case c.concurrency <= 0:
		return bad("-concurrency: %d is not a positive count", c.concurrency), false
	case filtersErr != nil:
		return bad("%v", filtersErr), false
	}
	if c.manifest != "" {
		b, _, err := dataset.ParseS3URI(c.manifest)
		if err != nil {
			return bad("-manifest: %v", err), false
		}
		c.bucket = b
	}
	c.opts = reconcile.Options{Bucket: c.bucket, Prefix: c.prefix, Manifest: c.manifest, Format: f, Concurrency: c.concurrency, RunID: engine.NewRunID(), Filters: c.filters}
	if c.maxAge != "" {
		age, err := settings.MaxFileAge.Parse(c.maxAge)
		if err != nil {
			return bad("-max-age: %v", err), false
		}
		c.opts.MaxAge = age
	}
	return 0, true
}

// run reconciles, sending to -send-to when given.
func (c *reconcileCmd) run(ctx context.Context) (reconcile.Report, error) {
	s3c, sqsc, err := awssetup.Clients(ctx, c.pathStyle)
	if err != nil {
		return reconcile.Report{}, err
	}
	ddb, err := awssetup.DynamoDB(ctx)
	if err != nil {
		return reconcile.Report{}, err
	}
	c.opts.Region = s3c.Options().Region
	table := claims.NewTable(ddb, c.table, claims.TableOptions{})
	// A missing table would make every version look missing: check first.
	if _, err := table.IsDone(ctx, "s3sqs-reconcile-check"); err != nil {
		return reconcile.Report{}, fmt.Errorf("-claims-table %s: %w", c.table, err)
	}
	if c.sendTo != "" {
		if c.opts.SendTo, err = sqsbatch.New(ctx, sqsc, sqsbatch.Queue{URL: c.sendTo}, sqsbatch.Options{}); err != nil {
			return reconcile.Report{}, fmt.Errorf("-send-to: %w", err)
		}
	}
	return reconcile.Run(ctx, s3c, table, c.opts)
}
