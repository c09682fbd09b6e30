package parquetjson

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go/deprecated"
)

// appendDate appends t's date as ISO 8601: YYYY-MM-DD, with a sign and
// more digits for a year outside 0000-9999.
func appendDate(b []byte, t time.Time) []byte {
	y, m, d := t.Date()
	switch {
	case y < 0:
		b = append(b, '-')
		b = appendPadded(b, int64(-y), 4)
	case y > 9999:
		b = append(b, '+')
		b = strconv.AppendInt(b, int64(y), 10)
	default:
		b = appendPadded(b, int64(y), 4)
	}
	b = append(b, '-')
	b = appendPadded(b, int64(m), 2)
	b = append(b, '-')
	return appendPadded(b, int64(d), 2)
}

func appendPadded(b []byte, n int64, width int) []byte {
	s := strconv.AppendInt(nil, n, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// digitsOf is the number of fraction digits of a unit.
func digitsOf(unit time.Duration) int {
	switch unit {
	case time.Millisecond:
		return 3
	case time.Microsecond:
		return 6
	}
	return 9
}

// appendTimestamp appends n steps of t.unit since the epoch as RFC 3339
// with the unit's digits: "Z" when adjusted to UTC, no offset when local.
func appendTimestamp(b []byte, t *leafType, n int64) []byte {
	per := int64(time.Second / t.unit)
	sec, frac := n/per, n%per
	if frac < 0 {
		sec, frac = sec-1, frac+per
	}
	return appendInstant(b, sec, frac, digitsOf(t.unit), t.utc)
}

func appendInstant(b []byte, sec, frac int64, digits int, utc bool) []byte {
	tm := time.Unix(sec, 0).UTC()
	b = append(b, '"')
	b = appendDate(b, tm)
	b = append(b, 'T')
	b = appendClock(b, int64(tm.Hour()), int64(tm.Minute()), int64(tm.Second()), frac, digits)
	if utc {
		b = append(b, 'Z')
	}
	return append(b, '"')
}

func appendClock(b []byte, h, m, s, frac int64, digits int) []byte {
	b = appendPadded(b, h, 2)
	b = append(b, ':')
	b = appendPadded(b, m, 2)
	b = append(b, ':')
	b = appendPadded(b, s, 2)
	b = append(b, '.')
	return appendPadded(b, frac, digits)
}

// errTimeOfDay is the error of a TIME value outside one day.
var errTimeOfDay = errors.New("TIME value is not a time of day")

// appendTime appends a time of day, n steps of t.unit since midnight, as
// HH:MM:SS with the unit's digits, and "Z" when adjusted to UTC.
func appendTime(b []byte, t *leafType, n int64) ([]byte, error) {
	per := int64(time.Second / t.unit)
	if n < 0 || n > 86400*per {
		return b, fmt.Errorf("%w: %d %s", errTimeOfDay, n, t.unit)
	}
	sec, frac := n/per, n%per
	b = append(b, '"')
	b = appendClock(b, sec/3600, sec/60%60, sec%60, frac, digitsOf(t.unit))
	if t.utc {
		b = append(b, 'Z')
	}
	return append(b, '"'), nil
}

// julianUnixEpoch is the Julian day number of 1970-01-01.
const julianUnixEpoch = 2440588

// appendInt96 appends an INT96 timestamp (nanoseconds of the day, then the
// Julian day, as Impala, Hive and Spark write it) as RFC 3339 in UTC with
// nanoseconds.
func appendInt96(b []byte, v deprecated.Int96) []byte {
	nanos := int64(uint64(v[1])<<32 | uint64(v[0]))
	days := int64(int32(v[2])) - julianUnixEpoch
	sec, frac := nanos/1e9, nanos%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	return appendInstant(b, days*86400+sec, frac, 9, true)
}
