package s3event

import (
	"errors"
	"net/url"
	"strings"
	"unicode/utf8"
)

// DecodeKey turns an object key as S3 writes it into an event notification
// back into the key. S3 form-URL-encodes keys
// (application/x-www-form-urlencoded): a space is written "+", a "+" is
// "%2B" and "=" is "%3D"
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
// DecodeKey therefore uses url.QueryUnescape semantics, never path
// unescaping. It returns an error for a malformed escape ("%zz", a trailing
// "%") and for a result that is not valid UTF-8, which no S3 key can be.
func DecodeKey(raw string) (string, error) {
	key, err := url.QueryUnescape(raw)
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(key) {
		return "", errors.New("decoded key is not valid UTF-8")
	}
	return key, nil
}

// EncodeKey writes key the way S3 writes keys into event notifications:
// form-URL-encoding, where a space becomes "+", "/" is kept, letters, digits
// and "-_.*" are kept, and every other byte becomes "%XX" (upper-case hex).
// DecodeKey(EncodeKey(k)) == k for every valid UTF-8 k. It is meant for
// building test events; the exact set of characters S3 leaves unescaped is
// not documented, and DecodeKey does not depend on it.
func EncodeKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key) + len(key)/2)
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '*', c == '/':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	return b.String()
}
