package lambdaenv

import (
	"strconv"
	"strings"
)

// FunctionMemory is the variable in which Lambda gives a function its
// memory, in MiB (Lambda's "MB").
const FunctionMemory = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// memoryOutsideLimit is the part of the function's memory kept out of
// the Go runtime's soft limit: the binary's code and data mapped from its
// file, which Lambda counts in the function's memory and the runtime does
// not (21.5 to 22.1 MiB of fanout's, the "of which files" of make
// membench), and 6 MiB for what neither the limit nor the files hold.
// A share of the memory, as 80% was, gives a 128 MB function a limit
// (102 MiB) that with the code is past its memory, and a 10 GB function
// 2 GB it cannot use.
const memoryOutsideLimit = 28 << 20

// MemoryLimit returns the soft memory limit for the Go runtime
// (debug.SetMemoryLimit) of a function with the memory Lambda gives it,
// read with getenv: all of it but memoryOutsideLimit, and at least half
// of it. ok is false when GOMEMLIMIT is set (the runtime has read it: it
// wins) or the memory is not given.
//
// The limit is a guard: the functions stay far below it by design at their
// defaults (docs/performance-and-cost.md#memory), and it only makes the
// collector work harder as a run nears it instead of letting the function
// run out of memory.
func MemoryLimit(getenv func(string) string) (limit int64, ok bool) {
	mb, ok := functionMemory(getenv)
	if !ok || getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return max(mb<<20-memoryOutsideLimit, mb<<20/2), true
}

// functionMemory returns the function's memory in MiB, if Lambda gives it.
func functionMemory(getenv func(string) string) (mb int64, ok bool) {
	mb, err := strconv.ParseInt(strings.TrimSpace(getenv(FunctionMemory)), 10, 64)
	return mb, err == nil && mb > 0
}

// bytesInFlightShare is the share of the function's memory (1 in
// bytesInFlightShare) that the requests in flight to one queue may hold,
// as sqsbatch counts them (entries plus 96 KiB a request). At 128 MB that
// is 4 MiB: about 37 record-mode requests, more than the CPU of so small
// a function can fill, or 3 chunk-mode requests of a MiB, which keeps
// fanout sending a 1 GiB object in chunk mode under 64 MiB of RSS (make
// membench: 59.6 MiB, where 1/16 gave 68.0). Larger functions get room in
// proportion: 55 MiB at 1,769 MB, about 500 small requests, past the 256
// of the default ceiling.
const bytesInFlightShare = 32

// BytesInFlight returns the bound on the bytes in requests in flight to
// each queue (sqsbatch.Options.MaxBytesInFlight) of a function with the
// memory Lambda gives it, read with getenv: 1/32 of it. It returns 0, the
// sender's default, when the memory is not given, as outside Lambda.
func BytesInFlight(getenv func(string) string) int64 {
	return int64(MemoryMB(getenv)) << 20 / bytesInFlightShare
}

// MemoryMB returns the function's memory in MiB as Lambda gives it, read
// with getenv, or 0 when it is not given, as outside Lambda.
func MemoryMB(getenv func(string) string) int {
	mb, ok := functionMemory(getenv)
	if !ok {
		return 0
	}
	return int(mb)
}
