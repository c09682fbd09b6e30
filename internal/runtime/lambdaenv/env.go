// Package lambdaenv is what the two Lambda functions share at init: it
// reads their configuration from the environment (each variable through
// its row of pkg/settings, the check a request field or CLI flag of
// the same setting uses, every problem gathered and named by its
// variable), builds the AWS clients and the engine, and starts the
// runtime.
package lambdaenv

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// Reader reads variables with getenv and gathers the problems it finds.
// It is used by one goroutine.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New returns a Reader that reads with getenv (os.Getenv in Lambda, a map
// in tests).
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err returns every problem found so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Bad records a problem with the variable name.
func (r *Reader) Bad(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// String returns the variable with surrounding spaces removed.
func (r *Reader) String(name string) string { return strings.TrimSpace(r.getenv(name)) }

// Raw returns the variable as written, for values such as key prefixes
// that may begin or end with spaces.
func (r *Reader) Raw(name string) string { return r.getenv(name) }

// Get reads the variable of s with s's parser, and records the parser's
// error under the variable's name; unset means the table's default
// (settings.Row.Default), and refused the zero T.
func Get[T any](r *Reader, s settings.Setting[T]) T {
	var zero T
	row := s.Spec()
	v := cmp.Or(r.String(row.Env), row.Default)
	if v == "" {
		return zero
	}
	out, err := s.Parse(v)
	if err != nil {
		r.Bad(row.Env, "%v", err)
		return zero
	}
	return out
}

// Bool reads the variable of b; unset means the table's default.
func (r *Reader) Bool(b settings.Bool) bool { return Get(r, b) }

// Int reads the variable of a count; unset means the table's default.
func (r *Reader) Int(c settings.Count) int { return int(Get(r, c)) }

// OneOf records a problem when more than one of the variables of rows is
// set.
func (r *Reader) OneOf(rows ...settings.Row) {
	var set, names []string
	for _, row := range rows {
		names = append(names, row.Env)
		if r.String(row.Env) != "" {
			set = append(set, row.Env)
		}
	}
	if len(set) > 1 {
		r.Bad(set[len(set)-1], "set only one of %s", strings.Join(names, " and "))
	}
}

// Filter reads the S3 notification filter: which event types, keys and
// ages a function takes, and how it reads keys. IGNORE_DELETIONS is read
// when deletions is true; a function that cannot use deletions passes
// false and never keeps them.
func (r *Reader) Filter(deletions bool) s3event.Filter {
	var f s3event.Filter
	var errs []error
	f.EventTypes, errs = awssetup.ParseEventTypes(Get(r, settings.EventTypes))
	for _, err := range errs {
		r.Bad(settings.EventTypes.Env, "%v", err)
	}
	if deletions {
		f.KeepDeletions = !r.Bool(settings.IgnoreDeletions)
	}
	// Prefix and suffix are taken as written: a key may begin or end with
	// spaces.
	f.Prefix = r.Raw(settings.KeyPrefix.Env)
	f.Suffix = r.Raw(settings.KeySuffix.Env)
	f.MaxFileAge = Get(r, settings.MaxFileAge)
	f.FileNameOnly = r.Bool(settings.DedupByFileName)
	f.SortByTime = r.Bool(settings.SortByTime)
	f.Options.EventBridgeKeysRaw = r.Bool(settings.EventBridgeKeysRaw)
	return f
}

// Formats reads the variables of how objects are read into p: the CSV
// dialect and header, and how Parquet bytes are written.
func (r *Reader) Formats(p *dataset.PlanOptions) {
	c := &p.CSV
	c.NoQuotedNewlines = r.Bool(settings.CSVNoQuotedNewlines)
	c.Delimiter = Get(r, settings.CSVDelimiter)
	if q := Get(r, settings.CSVQuote); q == settings.NoChar {
		c.NoQuotes = true
	} else {
		c.Quote = byte(q)
	}
	c.Escape = byte(Get(r, settings.CSVEscape))
	c.NoHeader = !r.Bool(settings.CSVHeader)
	p.Parquet.BinaryAsString = r.Bool(settings.ParquetBinaryAsString)
	if err := c.Check(); err != nil {
		r.Bad(settings.CSVDelimiter.Env+", "+settings.CSVQuote.Env+", "+settings.CSVEscape.Env, "%v", err)
	}
}

// Offload reads the offload variables into o.
func (r *Reader) Offload(o *engine.Options) {
	o.Offload.S3URI = Get(r, settings.OffloadS3URI)
	if o.Offload.S3URI != "" {
		if _, prefix, err := dataset.ParseS3URI(o.Offload.S3URI); err == nil {
			if err := sqsextended.CheckPrefix(prefix); err != nil {
				r.Bad(settings.OffloadS3URI.Env, "%v", err)
			}
		}
	}
	o.Offload.Mode = sqsextended.Mode(Get(r, settings.Offload))
	o.Offload.KMSKeyID = Get(r, settings.OffloadKMSKeyID)
	for _, name := range []string{settings.Offload.Env, settings.OffloadKMSKeyID.Env} {
		if r.String(name) != "" && o.Offload.S3URI == "" {
			r.Bad(name, "needs %s, the bucket and prefix the records go to", settings.OffloadS3URI.Env)
		}
	}
}

// Tracing reads TRACING.
func (r *Reader) Tracing() tracing.Mode { return tracing.Mode(Get(r, settings.Tracing)) }
