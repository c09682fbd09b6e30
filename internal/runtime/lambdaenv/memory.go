package lambdaenv

import (
	"strconv"
	"strings"
)

// FunctionMemory is the variable in which Lambda gives a function its
// memory, in MiB (Lambda's "MB").
const FunctionMemory = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// memoryLimitPercent is the share of the function's memory given to the Go
// runtime as its soft limit; the rest is for the binary's code, which
// Lambda counts too (about 21 MiB of fanout's), and what the runtime
// does not account for.
const memoryLimitPercent = 80

// MemoryLimit returns the soft memory limit for the Go runtime
// (debug.SetMemoryLimit) of a function with the memory Lambda gives it,
// read with getenv: memoryLimitPercent of it. ok is false when GOMEMLIMIT
// is set (the runtime has read it: it wins) or the memory is not given.
//
// The limit is a guard: the functions stay far below it by design at their
// defaults (docs/performance-and-cost.md#memory), and it only makes the
// collector work harder as a run nears it instead of letting the function
// run out of memory.
func MemoryLimit(getenv func(string) string) (limit int64, ok bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	mb, err := strconv.ParseInt(strings.TrimSpace(getenv(FunctionMemory)), 10, 64)
	if err != nil || mb <= 0 {
		return 0, false
	}
	return mb << 20 * memoryLimitPercent / 100, true
}
