// Command plot draws the report of tools/throughput as one SVG: records/s
// against SendMessageBatch requests in flight, one line per series (the
// Sender and hand-made batches, at each added latency), with a legend and
// a caption naming the machine and the command. `make plot` runs it after
// tools/throughput:
//
//	cd tools/plot && go run . -in ../../docs/throughput.json -out ../../docs/throughput.svg
//
// It is a module of its own, so that gonum.org/v1/plot never enters the
// root module's dependencies.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "docs/throughput.json", "read the report of tools/throughput from `file`")
	out := flag.String("out", "docs/throughput.svg", "write the SVG to `file`")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintf(os.Stderr, "plot: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "plot: wrote %s\n", *out)
}

// run draws the report in the file in as an SVG into the file out.
func run(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := readReport(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return writeSVG(out, r)
}
