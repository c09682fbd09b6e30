package s3event

// CompareSequencers orders two sequencer values of events on the same object
// key, as AWS documents: right-pad the shorter value with zeros, then compare
// lexicographically. Sequencers are hexadecimal, so letters are compared
// without regard to case. The result is -1 when a is earlier than b, +1 when
// it is later and 0 when they are equal.
//
// Sequencers order events on one key only; comparing those of different keys
// means nothing. An empty sequencer (moto omits it; AWS omits it on some event
// types) compares as all zeros, that is, earliest.
func CompareSequencers(a, b string) int {
	n := max(len(a), len(b))
	for i := range n {
		ca, cb := byte('0'), byte('0')
		if i < len(a) {
			ca = upperHex(a[i])
		}
		if i < len(b) {
			cb = upperHex(b[i])
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return 0
}

// upperHex upper-cases an ASCII letter, so that "0055aed6" and "0055AED6"
// compare equal.
func upperHex(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
