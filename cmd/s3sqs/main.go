// Command s3sqs runs s3sqs's logic from a workstation.
//
//	s3sqs fanout [flags]        send an S3 dataset's records to SQS, in-process
//	s3sqs ingest [flags] [file] run s3ingest's logic on a notification or an object
//	s3sqs parse [file]          show the S3 objects an SQS message body names
//	s3sqs redrive SOURCE [flags] send failed work again: a run report, the failure output, a DLQ
//	s3sqs reconcile -bucket B -prefix P -claims-table T (-dry-run | -send-to URL) find and resend what s3ingest missed
//	s3sqs status -run-id R [flags] show how far a run is, from the claims table
//	s3sqs pause|resume|cancel -run-id R [flags] steer a run
//	s3sqs set -run-id R -max-rate N [flags] change a running run's rate
//
// It uses the AWS SDK's standard configuration: credentials, region, and
// AWS_ENDPOINT_URL... for stand-ins. Run `s3sqs COMMAND -h` for the flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// streams are what a command reads and writes; tty reports that stderr is
// a terminal, for progress lines.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
}

// A command is one of the CLI's commands: its name, what the usage says of
// it (a line, or lines joined by newlines) and what runs it with the
// arguments after its name.
type command struct {
	name, about string
	run         func(ctx context.Context, args []string, s streams) int
}

// commands are the CLI's commands, in the usage's order.
var commands = []command{
	{"fanout", "send the records of an S3 dataset to an SQS queue, in-process", runFanout},
	{"ingest", "run the s3ingest function's logic on a notification (a file, stdin)\nor on one object (-bucket, -key), in-process", runIngest},
	{"parse", "show the S3 objects, decoded keys and partition values that an SQS\nmessage body or a Lambda event names, or why it names none", runParse},
	{"redrive", "send failed work again: a fanout run report's failed tasks or records\n(-report), the failure output's records (-from-queue, -from-s3,\n-from-file), or a dead-letter queue's messages back to their\nqueue (-dlq)", runRedrive},
	{"reconcile", "compare the object versions under a prefix with what s3ingest\ningested (its claims table) and list (-dry-run) or send again\n(-send-to) the notifications of those it never ingested", runReconcile},
	{"status", "show how far a fanout run is: tasks, records, bytes, rate, time\nleft and where its failures are, from the claims table (-watch)", runStatus},
	{"pause", "pause a fanout run: its tasks go back on the work queue", runControl("pause")},
	{"resume", "resume a paused or cancelled run, putting parked tasks back", runControl("resume")},
	{"cancel", "cancel a fanout run: its tasks end and are parked for a resume", runControl("cancel")},
	{"set", "change a running run's rate (-max-rate)", runControl("set")},
	{"version", "show the version and commit this binary was built from", runVersion},
}

// runVersion prints the version and commit the binary was built from.
func runVersion(_ context.Context, _ []string, s streams) int {
	fmt.Fprintln(s.stdout, version())
	return 0
}

// usage is the CLI's usage, with a line or more for each command.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: s3sqs COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		for i, line := range strings.Split(c.about, "\n") {
			name := ""
			if i == 0 {
				name = c.name
			}
			fmt.Fprintf(&b, "  %-8s %s\n", name, line)
		}
	}
	b.WriteString(`
Run "s3sqs COMMAND -h" for a command's flags. AWS credentials, region and
endpoints (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS,
AWS_ENDPOINT_URL_DYNAMODB) come from the SDK's standard configuration.
`)
	return b.String()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code: 0 done, 1 the
// work failed, 2 the command line is wrong.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	if c, ok := find(args[0]); ok {
		return c.run(ctx, args[1:], streams{stdin, stdout, stderr, tty})
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return 0
	case "-version", "--version":
		return runVersion(ctx, nil, streams{stdin, stdout, stderr, tty})
	case "help":
		switch {
		case len(args) == 1:
			fmt.Fprint(stdout, usage())
			return 0
		case len(args) > 2:
			fmt.Fprintf(stderr, "s3sqs help: want one COMMAND, got %d\n\n%s", len(args)-1, usage())
			return 2
		}
		if _, ok := find(args[1]); ok {
			// A command's help is its -h.
			return run(ctx, []string{args[1], "-h"}, stdin, stdout, stderr, tty)
		}
		fmt.Fprintf(stderr, "s3sqs help: unknown command %q%s\nRun \"s3sqs -h\" for the commands.\n", args[1], didYouMean(args[1], commandNames(), ""))
		return 2
	}
	fmt.Fprintf(stderr, "s3sqs: unknown command %q%s\nRun \"s3sqs -h\" for the commands.\n", args[0], didYouMean(args[0], commandNames(), ""))
	return 2
}

// find returns the command called name.
func find(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// commandNames lists the commands, for suggestions.
func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return slices.Sorted(slices.Values(names))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newFlags returns the flag set of a command whose usage is usage (its
// first line and what it does), followed by its flags.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// usageError returns the function that reports a wrong command line of
// command and returns exit code 2.
func usageError(command string, stderr io.Writer) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "s3sqs "+command+": "+format+"\n", a...)
		return 2
	}
}

// parseFlags parses args; when it cannot go on it returns the exit code:
// 0 for -h, which prints the command's usage, 2 for a bad flag, which
// prints one line that says why, with the flag meant when a typo is
// likely, not the whole usage.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return 0, false
	case err != nil:
		hint := ""
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			hint = didYouMean(strings.TrimPrefix(name, "-"), names, "-")
		}
		fmt.Fprintf(out, "s3sqs %s: %v%s\nRun \"s3sqs %s -h\" for its flags.\n", fs.Name(), err, hint, fs.Name())
		return 2, false
	}
	return 0, true
}

// check is a flag and what its value's check said.
type check struct {
	flag string
	err  error
}

// firstBad returns the first check that failed, as "flag: reason".
func firstBad(checks []check) (string, bool) {
	for _, c := range checks {
		if c.err != nil {
			return c.flag + ": " + c.err.Error(), true
		}
	}
	return "", false
}

// printJSON writes v, indented, as a command's result on stdout.
func printJSON(w io.Writer, v any) {
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(w, "%s\n", out)
}

// queueFlagError names, in a queue that cannot be used, the flag that named
// it (flags, by engine.QueueError's role) rather than its role; skip is the
// flag that spares the target's GetQueueAttributes call, if the command
// has one. Other errors are returned as they are.
func queueFlagError(err error, flags map[string]string, skip string) error {
	var qe *engine.QueueError
	if !errors.As(err, &qe) {
		return err
	}
	flag, ok := flags[qe.Role]
	if !ok {
		return err
	}
	if qe.Role != engine.RoleTarget {
		skip = ""
	}
	return awssetup.FlagQueueError(flag, qe.Queue, qe.Err, skip)
}
