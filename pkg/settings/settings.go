package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Values of Row.Function: who reads a setting's variable, as the function
// column of docs/configuration.md writes it.
const (
	Fanout   = "fanout"
	S3Ingest = "s3ingest"
	Both     = "both"
)

// Row is what the table says of a setting, whatever its kind.
type Row struct {
	// Env is the environment variable; "" for a setting only the CLI or a
	// request gives.
	Env string
	// Function reads Env: Fanout, S3Ingest or Both.
	Function string
	// Flag is the CLI flag, without its dash; "" for none.
	Flag string
	// Field is the request field (and the field of a task's overrides);
	// "" for none.
	Field string
	// Doc says what the setting is, as a flag's help writes it (a
	// back-quoted word names the value).
	Doc string
	// Default is the value, as a variable or flag writes it, that applies
	// when the setting is not given: the functions' configurations, the
	// CLI's flags and docs/configuration.md read it here. "" means the
	// setting's zero (none, off), or a default that depends on something
	// else (a key's extension, the kind of run), which the docs describe.
	Default string
}

// Spec returns the row, for every kind of setting, which embeds it.
func (r Row) Spec() Row { return r }

// Setting is a row whose values are read by Parse into a T.
type Setting[T any] interface {
	Spec() Row
	Parse(s string) (T, error)
}

// Size is a size in bytes, written as bytes or a number with KiB, MiB or
// GiB, within Min..Max.
type Size struct {
	Row
	Min, Max int64
	// Example is how a size is written, for the error of a value that is
	// no size.
	Example string
	// Range says what is allowed, after the value, for the error of a
	// value out of range ("is not a chunk size from 1KiB to 1GiB").
	Range string
}

// Parse reads a size such as "8MiB" and checks it.
func (s Size) Parse(v string) (int64, error) {
	n, err := ParseSize(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%q is not a size such as %s (bytes, or a number with KiB, MiB or GiB)", v, s.Example)
	}
	return n, s.Check(n)
}

// Check reports a size outside Min..Max.
func (s Size) Check(n int64) error {
	if n < s.Min || n > s.Max {
		return fmt.Errorf("%s %s", FormatBytes(n), s.Range)
	}
	return nil
}

// Count is a whole number within Min..Max.
type Count struct {
	Row
	Min, Max int64
}

// Parse reads a whole number and checks it.
func (c Count) Parse(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number from %d to %d", v, c.Min, c.Max)
	}
	return n, c.Check(n)
}

// Check reports a number outside Min..Max.
func (c Count) Check(n int64) error {
	if n < c.Min || n > c.Max {
		return fmt.Errorf("%d is not a whole number from %d to %d", n, c.Min, c.Max)
	}
	return nil
}

// Choice is one of a few words, any case.
type Choice struct {
	Row
	// Values maps each word accepted, lower case, to the value it means.
	Values map[string]string
	// Want lists the words, for the error of another one ("record or
	// chunk").
	Want string
}

// Parse returns the value the word v means.
func (c Choice) Parse(v string) (string, error) {
	if out, ok := c.Values[strings.ToLower(strings.TrimSpace(v))]; ok {
		return out, nil
	}
	return "", fmt.Errorf("%q is not %s", v, c.Want)
}

// Bool is true or false.
type Bool struct{ Row }

// Parse reads true or false (and what strconv.ParseBool reads).
func (b Bool) Parse(v string) (bool, error) {
	out, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%q is not true or false", v)
	}
	return out, nil
}

// Duration is a positive Go duration such as 10s.
type Duration struct{ Row }

// Parse reads a positive duration.
func (d Duration) Parse(v string) (time.Duration, error) {
	out, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || out <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 10s", v)
	}
	return out, nil
}

// Char is one character: a CSV delimiter, quote or escape.
type Char struct {
	Row
	// ASCII limits it to one byte.
	ASCII bool
	// None allows "none", read as NoChar.
	None bool
}

// NoChar is what a Char that allows it reads "none" as.
const NoChar = rune(-1)

// Parse reads one character, "tab" or `\t` for a tab, and, when None is
// set, "none" as NoChar. A line end is never a character here.
func (c Char) Parse(v string) (rune, error) {
	switch v {
	case "tab", `\t`:
		return '\t', nil
	case "none":
		if c.None {
			return NoChar, nil
		}
	}
	r, n := utf8.DecodeRuneInString(v)
	switch {
	case n == 0 || n != len(v) || r == utf8.RuneError:
		return 0, fmt.Errorf("%q is not one character (or tab%s)", v, map[bool]string{true: ", none", false: ""}[c.None])
	case r == '\r' || r == '\n':
		return 0, fmt.Errorf("%q is a line end", v)
	case c.ASCII && r >= utf8.RuneSelf:
		return 0, fmt.Errorf("%q is not an ASCII character", v)
	}
	return r, nil
}

// Text is a string, taken as written once Check (when set) accepts it.
type Text struct {
	Row
	Check func(string) error
}

// Parse returns v once Check accepts it.
func (t Text) Parse(v string) (string, error) {
	if t.Check != nil {
		if err := t.Check(v); err != nil {
			return "", err
		}
	}
	return v, nil
}

// ParseSize reads a size as configuration writes it: "8388608", "8MiB",
// "512KiB" or "1GiB".
func ParseSize(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || v > (1<<62)/u.mult {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return v * u.mult, nil
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// FormatBytes writes n in the largest binary unit that divides it.
func FormatBytes(n int64) string {
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

// MaxRunID bounds a run id, which becomes part of S3 keys, FIFO group ids
// and deduplication ids (at most 128 characters).
const MaxRunID = 80

// CheckRunID reports a run id that cannot name a run: longer than
// MaxRunID characters, or with characters other than letters, digits,
// '-', '_' and '.'. The empty id is allowed: it means a new one. The error
// names the request field, runId.
func CheckRunID(id string) error {
	if len(id) > MaxRunID {
		return fmt.Errorf("runId: %q is longer than %d characters", id, MaxRunID)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("runId: %q may hold only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}

// Limit bounds a run's failures: a count ("1000"), a share of the whole
// ("10%", "0.5%"), or "off".
type Limit struct{ Row }

// LimitValue is a Limit read: when On, at most Percent of the whole
// when Percent is set, else at most Count failures. The zero value,
// "off", bounds nothing.
type LimitValue struct {
	On      bool
	Count   int64
	Percent float64
}

// Parse reads a count, a percentage from 0 to 100 (0 excluded), or off.
func (l Limit) Parse(v string) (LimitValue, error) {
	s := strings.TrimSpace(v)
	if strings.EqualFold(s, "off") {
		return LimitValue{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0 && f <= 100) {
			return LimitValue{}, fmt.Errorf("%q is not a share above 0%% and at most 100%%", v)
		}
		return LimitValue{On: true, Percent: f}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return LimitValue{}, fmt.Errorf("%q is not a count (0 or more), a share such as 10%%, or off", v)
	}
	return LimitValue{On: true, Count: n}, nil
}

// Time is an instant: RFC 3339 ("2024-01-31T12:00:00Z", with an offset
// or not UTC), or a date ("2024-01-31"), which is its midnight UTC.
type Time struct{ Row }

// Parse reads an RFC 3339 time or a date.
func (t Time) Parse(v string) (time.Time, error) {
	s := strings.TrimSpace(v)
	if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return at, nil
	}
	if at, err := time.Parse(time.DateOnly, s); err == nil {
		return at, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time such as 2024-01-31T12:00:00Z (RFC 3339) or a date such as 2024-01-31", v)
}

// List is a comma-separated list of names, each taken as written once
// spaces around it are removed; an empty name is refused.
type List struct{ Row }

// Parse splits v at its commas.
func (l List) Parse(v string) ([]string, error) {
	names := strings.Split(v, ",")
	for i, n := range names {
		if names[i] = strings.TrimSpace(n); names[i] == "" {
			return nil, fmt.Errorf("%q has an empty name: give names separated by commas", v)
		}
	}
	return names, nil
}
