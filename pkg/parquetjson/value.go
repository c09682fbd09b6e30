package parquetjson

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// write says how a leaf's values are written.
type write uint8

const (
	writeNull write = iota // the NULL logical type: always null
	writeBool
	writeInt    // signed integer
	writeUint   // unsigned integer (INT32 or INT64 read as unsigned)
	writeFloat  // FLOAT, DOUBLE, FLOAT16
	writeString // text: UTF-8 that must be valid
	writeBase64 // bytes
	writeDecimal
	writeDate      // INT32 days since the epoch
	writeTime      // time of day
	writeTimestamp // INT64 in a unit since the epoch, or INT96
	writeUUID
	writeInterval
)

// leafType is what the encoder knows of a column's values.
type leafType struct {
	physical format.Type
	write    write
	// unit is the length of one step of a time or timestamp, or of a
	// nanosecond for INT96.
	unit time.Duration
	// utc reports a timestamp or time adjusted to UTC: written with "Z".
	utc bool
	// scale is a decimal's scale.
	scale int32
	// float16 reports a FIXED_LEN_BYTE_ARRAY(2) holding a half-precision
	// float.
	float16 bool
}

// errAnnotation is wrapped by the error of a logical type that does not
// fit its physical type.
var errAnnotation = errors.New("annotation does not fit the physical type")

// leafTypeOf reads a leaf's physical and logical types. The logical type
// decides where the file has one; else the converted type.
func leafTypeOf(e *format.SchemaElement, opts Options) (leafType, error) {
	if !e.Type.Valid {
		return leafType{}, errors.New("a column without a physical type")
	}
	t := leafType{physical: e.Type.V}
	switch t.physical {
	case format.Boolean:
		t.write = writeBool
	case format.Int32, format.Int64:
		t.write = writeInt
	case format.Int96:
		t.write, t.unit, t.utc = writeTimestamp, time.Nanosecond, true
	case format.Float, format.Double:
		t.write = writeFloat
	case format.ByteArray, format.FixedLenByteArray:
		t.write = writeBase64
		if opts.BinaryAsString {
			t.write = writeString
		}
	default:
		return t, fmt.Errorf("unknown physical type %d", t.physical)
	}
	if e.LogicalType.Value != nil {
		return t.logical(e)
	}
	if e.ConvertedType.Valid {
		return t.converted(e)
	}
	return t, nil
}

func (t leafType) logical(e *format.SchemaElement) (leafType, error) {
	isInt := t.physical == format.Int32 || t.physical == format.Int64
	isBytes := t.physical == format.ByteArray || t.physical == format.FixedLenByteArray
	ok := true
	switch lt := e.LogicalType.Value.(type) {
	case *format.StringType, *format.EnumType, *format.JsonType:
		t.write, ok = writeString, t.physical == format.ByteArray
	case *format.BsonType, *format.GeometryType, *format.GeographyType:
		// Bytes whatever binaryAsString says: they are not text.
		t.write, ok = writeBase64, t.physical == format.ByteArray
	case *format.UUIDType:
		t.write, ok = writeUUID, t.physical == format.FixedLenByteArray && e.TypeLength.V == 16
	case *format.Float16Type:
		t.write, t.float16, ok = writeFloat, true, t.physical == format.FixedLenByteArray && e.TypeLength.V == 2
	case *format.DecimalType:
		t.write, t.scale, ok = writeDecimal, lt.Scale, isInt || isBytes
	case *format.DateType:
		t.write, ok = writeDate, t.physical == format.Int32
	case *format.TimeType:
		t.write, t.unit, t.utc = writeTime, lt.Unit.Value.Duration(), lt.IsAdjustedToUTC
		ok = t.physical == format.Int32 && t.unit == time.Millisecond || t.physical == format.Int64 && t.unit != time.Millisecond
	case *format.TimestampType:
		t.write, t.unit, t.utc, ok = writeTimestamp, lt.Unit.Value.Duration(), lt.IsAdjustedToUTC, t.physical == format.Int64
	case *format.IntType:
		ok = isInt && (lt.BitWidth == 64) == (t.physical == format.Int64)
		if !lt.IsSigned {
			t.write = writeUint
		}
	case *format.NullType:
		t.write = writeNull
	default:
		// A type this reader does not know (VARIANT's fields are
		// columns of their own): its physical type's values.
		return t, nil
	}
	if !ok {
		return t, fmt.Errorf("%w: %s on %s", errAnnotation, e.LogicalType.Value, t.physical)
	}
	return t, nil
}

func (t leafType) converted(e *format.SchemaElement) (leafType, error) {
	ok := true
	switch ct := e.ConvertedType.V; ct {
	case deprecated.UTF8, deprecated.Enum, deprecated.Json:
		t.write, ok = writeString, t.physical == format.ByteArray
	case deprecated.Bson:
		t.write, ok = writeBase64, t.physical == format.ByteArray
	case deprecated.Decimal:
		t.write, t.scale = writeDecimal, e.Scale.V
		ok = t.physical != format.Boolean && t.physical != format.Int96 && t.physical != format.Float && t.physical != format.Double
	case deprecated.Date:
		t.write, ok = writeDate, t.physical == format.Int32
	case deprecated.TimeMillis:
		t.write, t.unit, t.utc, ok = writeTime, time.Millisecond, true, t.physical == format.Int32
	case deprecated.TimeMicros:
		t.write, t.unit, t.utc, ok = writeTime, time.Microsecond, true, t.physical == format.Int64
	case deprecated.TimestampMillis:
		t.write, t.unit, t.utc, ok = writeTimestamp, time.Millisecond, true, t.physical == format.Int64
	case deprecated.TimestampMicros:
		t.write, t.unit, t.utc, ok = writeTimestamp, time.Microsecond, true, t.physical == format.Int64
	case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32:
		t.write, ok = writeUint, t.physical == format.Int32
	case deprecated.Uint64:
		t.write, ok = writeUint, t.physical == format.Int64
	case deprecated.Int8, deprecated.Int16, deprecated.Int32:
		ok = t.physical == format.Int32
	case deprecated.Int64:
		ok = t.physical == format.Int64
	case deprecated.Interval:
		t.write, ok = writeInterval, t.physical == format.FixedLenByteArray && e.TypeLength.V == 12
	default:
		// MAP, LIST and the like belong to groups; on a column they say
		// nothing of its values.
	}
	if !ok {
		return t, fmt.Errorf("%w: converted type %d on %s", errAnnotation, e.ConvertedType.V, t.physical)
	}
	return t, nil
}

// appendValue appends the JSON of a present value of a leaf of type t.
func appendValue(b []byte, t *leafType, v parquet.Value) ([]byte, error) {
	switch t.write {
	case writeNull:
		return append(b, "null"...), nil
	case writeBool:
		return strconv.AppendBool(b, v.Boolean()), nil
	case writeInt:
		if t.physical == format.Int32 {
			return strconv.AppendInt(b, int64(v.Int32()), 10), nil
		}
		return strconv.AppendInt(b, v.Int64(), 10), nil
	case writeUint:
		if t.physical == format.Int32 {
			return strconv.AppendUint(b, uint64(v.Uint32()), 10), nil
		}
		return strconv.AppendUint(b, v.Uint64(), 10), nil
	case writeFloat:
		switch {
		case t.float16:
			return appendFloat(b, float64(halfToFloat(v.ByteArray())), 32), nil
		case t.physical == format.Float:
			return appendFloat(b, float64(v.Float()), 32), nil
		}
		return appendFloat(b, v.Double(), 64), nil
	case writeString:
		s := v.ByteArray()
		if !utf8.Valid(s) {
			return b, ErrInvalidUTF8
		}
		return appendString(b, s), nil
	case writeBase64:
		s := v.ByteArray()
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, s)
		return append(b, '"'), nil
	case writeDecimal:
		return appendDecimal(b, t, v), nil
	case writeDate:
		b = append(b, '"')
		b = appendDate(b, time.Unix(int64(v.Int32())*86400, 0).UTC())
		return append(b, '"'), nil
	case writeTime:
		n := v.Int64()
		if t.physical == format.Int32 {
			n = int64(v.Int32())
		}
		return appendTime(b, t, n)
	case writeTimestamp:
		if t.physical == format.Int96 {
			return appendInt96(b, v.Int96()), nil
		}
		return appendTimestamp(b, t, v.Int64()), nil
	case writeUUID:
		return appendUUID(b, v.ByteArray()), nil
	case writeInterval:
		iv := v.ByteArray()
		b = append(b, `{"months":`...)
		b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(iv)), 10)
		b = append(b, `,"days":`...)
		b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(iv[4:])), 10)
		b = append(b, `,"milliseconds":`...)
		b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(iv[8:])), 10)
		return append(b, '}'), nil
	}
	return b, fmt.Errorf("parquetjson: unknown write %d", t.write)
}

// appendFloat appends f as encoding/json writes a float of bits bits:
// the shortest decimal that reads back as f, in exponent form below 1e-6
// and from 1e21. NaN and the infinities, which JSON has no number for,
// are the strings "NaN", "Infinity" and "-Infinity", as Spark's to_json and
// Jackson write them.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	fmt := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmt = 'e'
	}
	b = strconv.AppendFloat(b, f, fmt, -1, bits)
	if fmt == 'e' {
		// 1e-07 as 1e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// halfToFloat converts an IEEE 754 half-precision float, little-endian,
// to float32, exactly (every half is a float32).
func halfToFloat(h []byte) float32 {
	u := uint32(binary.LittleEndian.Uint16(h))
	sign := (u >> 15) << 31
	exp := (u >> 10) & 0x1f
	frac := u & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0: // zero
		return math.Float32frombits(sign)
	}
	// Subnormal: frac × 2^-24.
	f := float32(frac) / (1 << 24)
	if sign != 0 {
		f = -f
	}
	return f
}

// appendDecimal appends a decimal as a JSON string of its exact digits.
func appendDecimal(b []byte, t *leafType, v parquet.Value) []byte {
	var digits []byte
	switch t.physical {
	case format.Int32:
		digits = strconv.AppendInt(nil, int64(v.Int32()), 10)
	case format.Int64:
		digits = strconv.AppendInt(nil, v.Int64(), 10)
	default:
		digits = bigEndianSigned(v.ByteArray()).Append(nil, 10)
	}
	b = append(b, '"')
	b = appendScaled(b, digits, int(t.scale))
	return append(b, '"')
}

// bigEndianSigned reads a big-endian two's complement integer.
func bigEndianSigned(p []byte) *big.Int {
	n := new(big.Int).SetBytes(p)
	if len(p) > 0 && p[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(p))*8))
	}
	return n
}

// appendScaled appends the decimal whose unscaled value has the decimal
// digits given (with a leading '-' when negative) and the given scale.
func appendScaled(b, digits []byte, scale int) []byte {
	if len(digits) > 0 && digits[0] == '-' {
		b = append(b, '-')
		digits = digits[1:]
	}
	switch {
	case scale <= 0:
		b = append(b, digits...)
		for range -scale {
			b = append(b, '0')
		}
	case len(digits) > scale:
		b = append(b, digits[:len(digits)-scale]...)
		b = append(b, '.')
		b = append(b, digits[len(digits)-scale:]...)
	default:
		b = append(b, "0."...)
		for range scale - len(digits) {
			b = append(b, '0')
		}
		b = append(b, digits...)
	}
	return b
}

func appendUUID(b, u []byte) []byte {
	b = append(b, '"')
	for i, p := range [][]byte{u[:4], u[4:6], u[6:8], u[8:10], u[10:]} {
		if i > 0 {
			b = append(b, '-')
		}
		b = hex.AppendEncode(b, p)
	}
	return append(b, '"')
}

// appendString appends s, valid UTF-8, as a JSON string: '"', '\' and
// control characters escaped, and U+2028 and U+2029 too, as encoding/json
// does, so that the text is also valid JavaScript.
func appendString(b, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8 {
				b = append(b, s[start:i]...)
				b = append(b, `\u202`...)
				b = append(b, hexDigits[s[i+2]&0xf])
				i += 3
				start = i
				continue
			}
			i++
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
