package sqsbatch

import "unicode/utf8"

// jsonEscapes says how an ASCII byte is written in a JSON string: 0 as
// itself, 'u' as \u00XX, another letter as a backslash and that letter.
var jsonEscapes = func() (t [utf8.RuneSelf]byte) {
	for c := range 0x20 {
		t[c] = 'u'
	}
	t['"'], t['\\'] = '"', '\\'
	t['\n'], t['\r'], t['\t'] = 'n', 'r', 't'
	t[0x7f] = 'u'
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string, escaped as the SDK
// escapes it: invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029 are
// escaped as well.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			esc := jsonEscapes[c]
			if esc == 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if esc == 'u' {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, '\\', esc)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch jsonEscapes[c] {
			case 0:
			case 'u':
				n += 5
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len("\ufffd") - 1
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}
