// Package settings is the one table of s3sqs's settings: for each, the
// environment variable a function reads, the CLI flag, the request field
// (where it has one), the range and the parser, and a line that says what
// it is. Both functions' config.go, the CLI's flag sets, the request's
// override checks (pkg/worktask) and the docs check (internal/testenv/doccheck)
// read it, so that a value refused one way is refused every way, in the
// same words, and the docs list exactly the variables the code reads.
//
// It imports nothing of s3sqs: a setting whose value is one of s3sqs's
// types (a dataset.Format, a worktask.Mode) parses to the canonical string,
// which the caller converts.
package settings
