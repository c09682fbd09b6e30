// Package textcut shortens text to a byte budget without splitting a
// UTF-8 sequence: the failure output's bodies and logs, and the drivers'
// result strings, which Batch Operations and Step Functions cap.
package textcut

// Prefix returns the longest prefix of s of at most n bytes (none when n
// is negative) that ends on a character boundary.
func Prefix(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n-- // keep UTF-8 whole
	}
	return s[:n]
}
