package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// cmdFlags is a command's flag set, whose flags of settings are named,
// described and checked by their rows of pkg/settings: a value goes
// through the check its setting's variable and request field go through.
type cmdFlags struct {
	*flag.FlagSet
	// checks run after Parse, in the order the flags were defined.
	checks []func() check
	// logFormat is -log-format's value, for the commands that log.
	logFormat string
}

// logFlag defines -log-format, how the warnings and errors of a run are
// written on stderr.
func (f *cmdFlags) logFlag() {
	f.StringVar(&f.logFormat, "log-format", "text", "how the run's warnings and errors are logged on stderr: `text` (key=value lines beside the command's own) or json (every line of stderr a JSON object, as the functions log, the command's own lines as msg)")
	f.onCheck("log-format", func() error {
		if f.logFormat != "text" && f.logFormat != "json" {
			return fmt.Errorf("%q is not text or json", f.logFormat)
		}
		return nil
	})
}

// logger returns the run's logger on w, of warnings and errors, in
// -log-format's format.
func (f *cmdFlags) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	if f.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newCmdFlags returns the flags of a command, as newFlags does.
func newCmdFlags(name, usage string, stderr io.Writer) *cmdFlags {
	return &cmdFlags{FlagSet: newFlags(name, usage, stderr)}
}

// usageOf returns usage, or the row's line when usage is "".
func usageOf(row settings.Row, usage string) string {
	if usage != "" {
		return usage
	}
	return row.Doc
}

// onCheck adds a check of flag, run after Parse.
func (f *cmdFlags) onCheck(flag string, fn func() error) {
	f.checks = append(f.checks, func() check { return check{"-" + flag, fn()} })
}

// text defines the flag of a text setting, checked when given.
func (f *cmdFlags) text(row settings.Text, p *string, usage string) {
	parsedText(f, row, p, usage)
}

// parsedText defines the flag of setting s written as text into p,
// checked by s's Parse when given, so that the text goes on as written:
// a whole number or a failure budget's limit that is not given by
// default (worktask.SettingOf, worktask.LimitOf).
func parsedText[T any](f *cmdFlags, s settings.Setting[T], p *string, usage string) {
	f.checkedText(s.Spec(), p, usage, func(v string) error { _, err := s.Parse(v); return err })
}

// checkedText defines a flag written as text into p, checked by check
// when given.
func (f *cmdFlags) checkedText(row settings.Row, p *string, usage string, check func(string) error) {
	f.StringVar(p, row.Flag, "", usageOf(row, usage))
	f.onCheck(row.Flag, func() error {
		if *p == "" {
			return nil
		}
		return check(*p)
	})
}

// size defines the flag of a size, written as text (the table's default
// by default) and parsed into p; "" leaves p zero.
func (f *cmdFlags) size(row settings.Size, p *int64, usage string) *string {
	text := f.String(row.Flag, row.Default, usageOf(row.Row, usage))
	f.onCheck(row.Flag, func() (err error) {
		if *text == "" {
			return nil
		}
		*p, err = row.Parse(*text)
		return err
	})
	return text
}

// count defines the flag of a whole number, checked against its range,
// the table's default by default.
func (f *cmdFlags) count(row settings.Count, p *int, usage string) {
	def, _ := row.Parse(row.Default) // TestDefaultsParse parses every default
	f.IntVar(p, row.Flag, int(def), usageOf(row.Row, usage))
	f.onCheck(row.Flag, func() error { return row.Check(int64(*p)) })
}

// choice defines the flag of a choice, written as a word (the table's
// default by default) and parsed into the value it means, which set
// stores.
func (f *cmdFlags) choice(row settings.Choice, usage string, set func(string)) {
	word := f.String(row.Flag, row.Default, usageOf(row.Row, usage))
	f.onCheck(row.Flag, func() error {
		v, err := row.Parse(*word)
		set(v)
		return err
	})
}

// char defines the flag of a character, parsed and given to set when the
// flag is.
func (f *cmdFlags) char(row settings.Char, set func(rune), usage string) {
	text := f.String(row.Flag, "", usageOf(row.Row, usage))
	f.onCheck(row.Flag, func() error {
		if *text == "" {
			return nil
		}
		r, err := row.Parse(*text)
		set(r)
		return err
	})
}

// formatFlags defines the flags of how objects are read: the CSV dialect
// and header, and how Parquet bytes are written.
func (f *cmdFlags) formatFlags(p *dataset.PlanOptions) {
	c := &p.CSV
	f.boolean(settings.CSVNoQuotedNewlines, &c.NoQuotedNewlines, "")
	f.char(settings.CSVDelimiter, func(r rune) { c.Delimiter = r }, "")
	f.char(settings.CSVQuote, func(r rune) {
		if r == settings.NoChar {
			c.NoQuotes = true
		} else {
			c.Quote = byte(r)
		}
	}, "")
	f.char(settings.CSVEscape, func(r rune) { c.Escape = byte(r) }, "")
	var header bool
	f.boolean(settings.CSVHeader, &header, "")
	f.boolean(settings.ParquetBinaryAsString, &p.Parquet.BinaryAsString, "")
	// After the characters' own checks, which run first.
	f.onCheck(settings.CSVQuote.Flag, func() error {
		c.NoHeader = !header
		return c.Check()
	})
}

// boolean defines the flag of a boolean setting, the table's default by
// default.
func (f *cmdFlags) boolean(row settings.Bool, p *bool, usage string) {
	def, _ := row.Parse(row.Default) // TestDefaultsParse parses every default
	f.BoolVar(p, row.Flag, def, usageOf(row.Row, usage))
}

// firstBad runs the checks and returns the first that failed, as
// "flag: reason".
func (f *cmdFlags) firstBad() (string, bool) {
	var checks []check
	for _, c := range f.checks {
		checks = append(checks, c())
	}
	return firstBad(checks)
}

// given returns the names of the flags set on the command line.
func (f *cmdFlags) given() map[string]bool {
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

// offloadFlags defines the flags of offload, into o.
func offloadFlags(fs *cmdFlags, o *engine.Offload) {
	uri := &o.S3URI
	fs.text(settings.OffloadS3URI, uri, "")
	fs.onCheck(settings.OffloadS3URI.Flag, func() error {
		if *uri == "" {
			return nil
		}
		_, prefix, err := dataset.ParseS3URI(*uri)
		if err != nil {
			return err
		}
		return sqsextended.CheckPrefix(prefix)
	})
	fs.choice(settings.Offload, "", func(v string) { o.Mode = sqsextended.Mode(v) })
	fs.text(settings.OffloadKMSKeyID, &o.KMSKeyID, "")
}
