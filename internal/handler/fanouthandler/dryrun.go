package fanouthandler

import (
	"cmp"
	"errors"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

// kindDryRun is the summary line's kind of a request with dryRun.
const kindDryRun = "dry-run"

// dryRunOptions returns a dry run request's options, with the function's
// memory when they give none.
func (h *Handler) dryRunOptions(o *engine.DryRunOptions) *engine.DryRunOptions {
	var out engine.DryRunOptions
	if o != nil {
		out = *o
	}
	out.MemoryMB = cmp.Or(out.MemoryMB, h.opts.MemoryMB)
	return &out
}

// errDriverDryRun refuses a dry run through a driver.
var errDriverDryRun = errors.New(`dryRun: a driver (S3 Batch Operations, Distributed Map) hands fanout its objects a batch at a time and keeps the list itself, so a dry run of one batch would say nothing of the run; dry-run the dataset with a request {"dryRun": true, ...} that names it (its bucket and prefix, keys or manifest), or with s3sqs fanout -dry-run`)

// refuseDryRun refuses a driver's dryRun argument unless it is false: a
// boolean in a Distributed Map's BatchInput, a string in Batch
// Operations' userArguments.
func refuseDryRun(raw []byte) error {
	switch string(raw) {
	case "", "false", `"false"`:
		return nil
	}
	return errDriverDryRun
}
