package s3event

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// HiveDefaultPartition is the directory value Hive (and Spark, Athena, Glue)
// write for a null partition value.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// Partition is one Hive-style partition found in an object key: a directory
// named "name=value".
type Partition struct {
	// Name is the partition column, with Hive escapes decoded.
	Name string
	// Value is the partition value, with Hive escapes ("%3D", "%2F", ...)
	// decoded. It is empty when Null is set.
	Value string
	// Null is set when the directory value is __HIVE_DEFAULT_PARTITION__.
	Null bool
}

// Partitions returns the Hive-style partitions in a decoded object key, in
// path order: "a=1/b=x y/file.csv" gives [{a 1} {b "x y"}]. Only directory
// segments count, never the last segment (the file name), so "a=1/b=x y/"
// gives the same two partitions and "a=1.csv" gives none. Segments without
// "=" or with an empty name are not partitions and are passed over. The
// value runs from the first "=" to the end of the segment. Escapes are
// decoded the way Hive writes them: "%" and two hex digits; a "%" not
// followed by two hex digits is kept as it is, and "+" stays "+". A name that
// appears twice is returned twice. Partitions never fails.
func Partitions(key string) []Partition {
	dir, _, ok := cutLast(key, '/')
	if !ok {
		return nil
	}
	var out []Partition
	for seg := range strings.SplitSeq(dir, "/") {
		name, value, ok := strings.Cut(seg, "=")
		if !ok || name == "" {
			continue
		}
		p := Partition{Name: unescapeHive(name), Value: unescapeHive(value)}
		if p.Value == HiveDefaultPartition {
			p.Value, p.Null = "", true
		}
		out = append(out, p)
	}
	return out
}

// Typed returns the partition value as a Go value, inferring its type the way
// Spark infers partition columns, limited to what the key can say:
//   - nil when Null is set;
//   - int64 for a decimal integer that fits ("2024", "-7", "007");
//   - float64 for a decimal number ("1.5", "1e3"), but never NaN or Inf;
//   - bool for "true" or "false" (any case);
//   - time.Time (midnight UTC) for a date "2006-01-02";
//   - the string itself otherwise, including integers too large for int64.
func (p Partition) Typed() any {
	if p.Null {
		return nil
	}
	v := p.Value
	switch {
	case isDecimalInt(v):
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		return v
	case isDecimalFloat(v):
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
			return f
		}
		return v
	case strings.EqualFold(v, "true"):
		return true
	case strings.EqualFold(v, "false"):
		return false
	}
	if len(v) == len(time.DateOnly) {
		if t, err := time.Parse(time.DateOnly, v); err == nil {
			return t
		}
	}
	return v
}

// isDecimalInt reports whether s is an optional sign followed by digits.
func isDecimalInt(s string) bool {
	s = trimSign(s)
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// isDecimalFloat reports whether s is a decimal number with a fraction or an
// exponent: [sign] (digits [. digits] | . digits) [e [sign] digits].
func isDecimalFloat(s string) bool {
	s = trimSign(s)
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp && !isDecimalInt(exp) {
		return false
	}
	whole, frac, hasDot := strings.Cut(mant, ".")
	if !hasDot && !hasExp {
		return false
	}
	digits := func(x string) bool { return strings.Trim(x, "0123456789") == "" }
	return whole+frac != "" && digits(whole) && digits(frac)
}

func trimSign(s string) string {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		return s[1:]
	}
	return s
}

// unescapeHive decodes "%XX" escapes as Hive's FileUtils.unescapePathName
// does: byte by byte, leaving a "%" that is not followed by two hex digits
// alone.
func unescapeHive(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// cutLast splits s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}
