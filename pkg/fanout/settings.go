package fanout

import (
	"fmt"
	"strconv"
	"strings"
)

// The ranges of the settings that a request, the environment and the CLI
// share. Each setting has one check here, which every way of giving it
// uses, so that a value refused in one place is refused in all of them.
const (
	MinChunkSize = 1 << 10
	MaxChunkSize = 1 << 30
	// MinMessageSize and MaxMessageSize bound a queue's
	// MaximumMessageSize, as SQS does.
	MinMessageSize = 1 << 10
	MaxMessageSize = 1 << 20
	MaxInFlight    = 1000
	MaxAttempts    = 100
)

// ParseMode reads a mode as configuration writes it; "" is the zero Mode,
// which means ModeRecord.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ModeRecord, ModeChunk:
		return m, nil
	}
	return "", fmt.Errorf("%q is not record or chunk", s)
}

// CheckChunkSize reports a chunk size outside MinChunkSize..MaxChunkSize.
func CheckChunkSize(n int64) error {
	if n < MinChunkSize || n > MaxChunkSize {
		return fmt.Errorf("%s is not a chunk size from 1KiB to 1GiB", formatBytes(n))
	}
	return nil
}

// ParseChunkSize reads a chunk size such as "8MiB" and checks it.
func ParseChunkSize(s string) (int64, error) { return parseBytes(s, "8MiB", CheckChunkSize) }

// parseBytes reads a size as ParseSize does and checks it; example shows
// how one is written.
func parseBytes(s, example string, check func(int64) error) (int64, error) {
	n, err := ParseSize(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a size such as %s (bytes, or a number with KiB, MiB or GiB)", s, example)
	}
	return n, check(n)
}

// CheckMessageSize reports a queue message size limit outside SQS's range,
// MinMessageSize..MaxMessageSize bytes.
func CheckMessageSize(n int64) error {
	if n < MinMessageSize || n > MaxMessageSize {
		return fmt.Errorf("%s is outside SQS's range of 1,024 to 1,048,576 bytes (1KiB to 1MiB)", formatBytes(n))
	}
	return nil
}

// ParseMessageSize reads a queue message size limit such as "256KiB" and
// checks it.
func ParseMessageSize(s string) (int64, error) { return parseBytes(s, "256KiB", CheckMessageSize) }

// CheckMaxInFlight reports a number of requests in flight outside
// 1..MaxInFlight.
func CheckMaxInFlight(n int64) error { return checkCount(n, 1, MaxInFlight) }

// ParseMaxInFlight reads a number of requests in flight and checks it.
func ParseMaxInFlight(s string) (int64, error) { return parseCount(s, 1, MaxInFlight) }

// CheckMaxAttempts reports a number of attempts per entry outside
// 1..MaxAttempts.
func CheckMaxAttempts(n int64) error { return checkCount(n, 1, MaxAttempts) }

// ParseMaxAttempts reads a number of attempts per entry and checks it.
func ParseMaxAttempts(s string) (int64, error) { return parseCount(s, 1, MaxAttempts) }

// MaxChunkConcurrency bounds the chunks one invocation reads at once.
const MaxChunkConcurrency = 64

// CheckChunkConcurrency reports a number of chunks read at once outside
// 1..MaxChunkConcurrency.
func CheckChunkConcurrency(n int64) error { return checkCount(n, 1, MaxChunkConcurrency) }

// ParseChunkConcurrency reads a number of chunks read at once and checks it.
func ParseChunkConcurrency(s string) (int64, error) { return parseCount(s, 1, MaxChunkConcurrency) }

func checkCount(n, lo, hi int64) error {
	if n < lo || n > hi {
		return fmt.Errorf("%d is not a whole number from %d to %d", n, lo, hi)
	}
	return nil
}

func parseCount(s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number from %d to %d", s, lo, hi)
	}
	return n, checkCount(n, lo, hi)
}

// CheckQueueURL reports a value that is not an SQS queue URL, such as a
// queue name or an ARN given where the URL is wanted.
func CheckQueueURL(s string) error {
	// Not url.Parse: stand-ins write URLs it refuses, which the SDK sends
	// to its endpoint all the same.
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(s, "http://")
	}
	host, path, _ := strings.Cut(rest, "/")
	if !ok || host == "" || strings.Trim(path, "/") == "" || strings.ContainsAny(s, " \t\n") {
		hint := ""
		switch {
		case strings.HasPrefix(s, "arn:"):
			hint = "; that is an ARN"
		case !strings.Contains(s, "/"):
			hint = "; that looks like a queue name"
		}
		return fmt.Errorf("%q is not a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/name%s", s, hint)
	}
	return nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
