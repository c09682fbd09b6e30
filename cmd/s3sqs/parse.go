package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// runParse reads an SQS message body, or a Lambda SQS event, from a file or
// stdin and prints what pkg/s3event finds in each body.
func runParse(_ context.Context, args []string, s streams) int {
	stdin, stdout, stderr := s.stdin, s.stdout, s.stderr
	fs := newFlags("parse", "usage: s3sqs parse [flags] [FILE]\n\n"+
		"Reads FILE (or stdin): an SQS message body (S3 event, SNS envelope, EventBridge\n"+
		"event, s3:TestEvent) or a Lambda SQS event whose bodies are such. Prints the S3\n"+
		"objects, decoded keys and partition values found, or why there are none.\n"+
		"Exits 1 when a body cannot be read.", stderr)
	raw := fs.Bool("eventbridge-keys-raw", false, "take EventBridge object keys as written, without URL-decoding (moto writes them so)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return usageError("parse", stderr)("want at most one FILE, got %d", fs.NArg())
	}
	in := stdin
	name := "stdin"
	if fs.NArg() == 1 {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "s3sqs parse: %v\n", err)
			return 2
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	data, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs parse: read %s: %v\n", name, err)
		return 1
	}
	opts := s3event.Options{EventBridgeKeysRaw: *raw}
	var ev events.SQSEvent
	if json.Unmarshal(data, &ev) == nil && len(ev.Records) > 0 && ev.Records[0].EventSource == "aws:sqs" {
		code := 0
		for _, m := range ev.Records {
			fmt.Fprintf(stdout, "message %s:\n", m.MessageId)
			if !printBody(stdout, opts, []byte(m.Body)) {
				code = 1
			}
		}
		return code
	}
	if !printBody(stdout, opts, data) {
		return 1
	}
	return 0
}

// printBody prints what one body holds and reports whether it could be read
// whole.
func printBody(w io.Writer, opts s3event.Options, body []byte) bool {
	n, err := opts.Parse(body)
	if err != nil {
		fmt.Fprintf(w, "  cannot read: %v\n", err)
		return false
	}
	if n.TestEvent {
		fmt.Fprintf(w, "  s3:TestEvent (%s): no objects\n", n.Route)
	}
	for _, o := range n.Objects {
		fmt.Fprintf(w, "  %s %s s3://%s/%s\n", o.Route, o.EventName, o.Bucket, o.Key)
		fmt.Fprintf(w, "    raw key %q, size %d, etag %q, version %q, sequencer %q, time %s, region %s, deletion %v\n",
			o.RawKey, o.Size, o.ETag, o.VersionID, o.Sequencer, o.EventTime.Format("2006-01-02T15:04:05.000Z07:00"), o.Region, o.Deletion)
		for _, p := range o.Partitions() {
			if p.Null {
				fmt.Fprintf(w, "    partition %s = null\n", p.Name)
				continue
			}
			fmt.Fprintf(w, "    partition %s = %q (typed: %v %T)\n", p.Name, p.Value, p.Typed(), p.Typed())
		}
	}
	for _, f := range n.Failed {
		fmt.Fprintf(w, "  record cannot be read: %v\n", f)
	}
	return len(n.Failed) == 0
}
