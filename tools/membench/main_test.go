package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// The measurement itself needs the stand-ins and minutes (make membench);
// these tests cover how cases are read and figures parsed and printed.

func TestParseCase(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want benchCase
		env  []string
		err  string
	}{
		{in: "record", want: benchCase{mode: worktask.ModeRecord, mem: 128}},
		{in: "chunk/cc=8/inflight=2/queue=256KiB/mem=1024/gomemlimit=off",
			want: benchCase{mode: worktask.ModeChunk, cc: 8, inflight: 2, queue: 256 << 10, mem: 1024, gomemlimit: "off"},
			env:  []string{"MODE=chunk", "CHUNK_CONCURRENCY=8", "MAX_IN_FLIGHT=2", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024", "GOMEMLIMIT=off"}},
		{in: "batch", err: `mode "batch" is not record or chunk`},
		{in: "chunk/cc", err: `"cc" is not key=value`},
		{in: "chunk/cc=0", err: "cc: \"0\" is not a positive whole number"},
		{in: "chunk/queue=2MiB", err: "not between 1KiB and 1MiB"},
		{in: "chunk/size=1", err: "unknown key"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseCase(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("parseCase = %+v; want %+v", got, tc.want)
			}
			if got.String() != tc.in {
				t.Errorf("String() = %q; want %q back", got.String(), tc.in)
			}
			env := got.env("http://s3", "http://q")
			for _, want := range append(tc.env, "TARGET_QUEUE_URL=http://q", "AWS_ENDPOINT_URL_S3=http://s3", "GODEBUG=gctrace=1") {
				if !slices.Contains(env, want) {
					t.Errorf("env %q lacks %q", env, want)
				}
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	o, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.size != 1<<30 || o.record != 1024 || len(o.cases) != 3 || o.repeat != 1 {
		t.Errorf("defaults %+v", o)
	}
	for _, args := range [][]string{{"-size", "0"}, {"-record", "10"}, {"-cases", " "}, {"-repeat", "0"}, {"extra"}} {
		if _, err := parseArgs(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestParseGCTrace(t *testing.T) {
	out := strings.Join([]string{
		`{"level":"INFO","msg":"started"}`,
		"gc 1 @0.012s 1%: 0.010+1.2+0.003 ms clock, 0.021+0.4/1.1/0+0.007 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P",
		"gc 2 @0.100s 2%: 0.010+1.2+0.003 ms clock, 0.021+0.4/1.1/0+0.007 ms cpu, 30->41->12 MB, 36 MB goal, 0 MB stacks, 1 MB globals, 2 P",
		"gc 3 @0.200s 2%: 0.010+1.2+0.003 ms clock, 0.021+0.4/1.1/0+0.007 ms cpu, 25->25->9 MB, 24 MB goal, 0 MB stacks, 1 MB globals, 2 P (forced)",
		"not gc 4 ... 99->99->99 MB, 99 MB goal",
	}, "\n")
	got := parseGCTrace(out)
	if want := (gcTrace{cycles: 3, peakHeap: 41, peakGoal: 36}); got != want {
		t.Errorf("parseGCTrace = %+v; want %+v", got, want)
	}
}

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\tbootstrap\nVmPeak:\t  900000 kB\nVmHWM:\t   56789 kB\nVmRSS:\t   40000 kB\nRssFile:\t   21000 kB\n")
	if got, err := statusKB(status, "VmHWM"); got != 56789<<10 || err != nil {
		t.Errorf("VmHWM = %d, %v", got, err)
	}
	if got, err := statusKB(status, "RssFile"); got != 21000<<10 || err != nil {
		t.Errorf("RssFile = %d, %v", got, err)
	}
	if _, err := statusKB([]byte("Name:\tx\n"), "VmHWM"); err == nil {
		t.Error("no VmHWM: no error")
	}
}

func TestPrintTable(t *testing.T) {
	rec, _ := parseCase("record")
	chunk, _ := parseCase("chunk/queue=256KiB/gomemlimit=off")
	var out bytes.Buffer
	printTable(&out, options{size: 1 << 30, record: 1024}, 1047552, []row{
		{c: rec, records: 1047552, requests: 104756, seconds: 30, peakRSS: 45 << 20, fileRSS: 21 << 20, gc: gcTrace{cycles: 2000, peakHeap: 17}},
		{c: chunk, records: 1047552, requests: 4221, seconds: 8, peakRSS: 44 << 20, fileRSS: 21 << 20, gc: gcTrace{cycles: 200, peakHeap: 18}},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := strings.Fields(lines[len(lines)-1])
	want := []string{"chunk", "256KiB", "-", "-", "128", "off", "1047552", "4221", "8.0", "130944", "44.0", "21.0", "18", "200"}
	if !slices.Equal(last, want) {
		t.Errorf("last row %q; want %q\n%s", last, want, out.String())
	}
	if !strings.Contains(out.String(), "1024 MiB (1047552 records of 1024 B)") {
		t.Errorf("no heading:\n%s", out.String())
	}
}
