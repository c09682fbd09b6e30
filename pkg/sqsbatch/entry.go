package sqsbatch

import (
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS limits that do not depend on the queue.
const (
	// MaxBatchEntries is the most entries one SendMessageBatch may hold.
	MaxBatchEntries = 10
	// MaxBatchBytes is the most payload one SendMessageBatch may carry.
	MaxBatchBytes = 1 << 20
	// MaxAttributes is the most message attributes one message may carry.
	MaxAttributes = 10
	// MaxDelaySeconds is the longest per-message delay SQS accepts.
	MaxDelaySeconds = 900

	maxAttributeNameLen = 256
	maxGroupOrDedupLen  = 128
)

// Entry is one message to send.
type Entry struct {
	// ID is the caller's identifier for the entry. It is not sent to SQS;
	// it comes back in failures so the caller can tell which record failed.
	ID string
	// Ref leads the entry back to the records it carries, as the caller
	// numbers them. It is not sent to SQS; it comes back in failures.
	// Unlike ID it costs no allocation, so that a caller sending millions
	// of entries need not keep anything per entry to place a failure.
	Ref Ref
	// Body is the message body. It must not be empty.
	Body string
	// Attributes are the message attributes, at most ten. DataType is
	// String, Number or Binary, optionally followed by a custom suffix
	// ("Number.int").
	Attributes map[string]types.MessageAttributeValue
	// GroupID is the MessageGroupId. It is required on FIFO queues; on a
	// standard queue it is optional and names the message's tenant for
	// SQS's fair queues.
	GroupID string
	// DeduplicationID is the FIFO MessageDeduplicationId. It is required on
	// FIFO queues without content-based deduplication, and refused on a
	// standard queue, as SQS refuses it (InvalidParameterValue).
	DeduplicationID string
	// DelaySeconds delays delivery (0 to 900). FIFO queues accept only a
	// queue-level delay, so it must be zero there.
	DelaySeconds int32
}

// Ref is a caller's reference to the records an entry carries: where they
// come from, the place of the first and how many there are. A [Sender]
// neither reads nor sends it. The zero value is no reference.
type Ref struct {
	// Offset is the place of the entry's first record in its source.
	Offset int64
	// Source is the caller's index of where the records come from, such
	// as a file or a task.
	Source int32
	// Count is the number of records the entry carries.
	Count int32
}

// Size returns the size SQS counts for the entry against the message and
// batch limits: the body's UTF-8 bytes plus, for each attribute, the bytes of
// its name, its data type and its value.
func (e *Entry) Size() int {
	n := len(e.Body)
	for name, a := range e.Attributes {
		n += len(name)
		if a.DataType != nil {
			n += len(*a.DataType)
		}
		if a.StringValue != nil {
			n += len(*a.StringValue)
		}
		n += len(a.BinaryValue)
	}
	return n
}

// validChar reports whether SQS accepts r in a message body or string
// attribute: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func validChar(r rune) bool {
	switch {
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// InvalidCharAt returns the byte offset of the first character SQS
// rejects in a message body s, or -1. Invalid UTF-8 counts as such a
// character: the SDK's JSON encoder would otherwise replace it silently.
// A caller that packs several records into one body checks each with it,
// so that one record SQS would refuse does not take the others with it.
func InvalidCharAt[S string | []byte](s S) int {
	i := 0
	// Eight bytes at a time while they are all printable ASCII, which is
	// what most bodies are: no byte below 0x20 and none with its top bit.
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if (x-0x2020202020202020)&^x&0x8080808080808080 != 0 || x&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf {
			i++
			continue
		}
		// At most four bytes are converted, on the stack for a []byte.
		r, w := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if (r == utf8.RuneError && w == 1) || !validChar(r) {
			return i
		}
		i += w
	}
	return -1
}

// replaceInvalid returns s with each character SQS rejects replaced by
// U+FFFD.
func replaceInvalid(s string) string {
	if InvalidCharAt(s) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		// At most four bytes are converted, on the stack for a []byte.
		r, w := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if (r == utf8.RuneError && w == 1) || !validChar(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		i += w
	}
	return b.String()
}

// queueLimits are the properties of the target queue that validation needs.
type queueLimits struct {
	maxMessageSize  int
	fifo            bool
	contentBasedDup bool
}

// sanitize replaces invalid characters in the body and string attribute
// values of e, copying the attribute map only when something changes.
func sanitize(e *Entry) {
	e.Body = replaceInvalid(e.Body)
	var attrs map[string]types.MessageAttributeValue
	for name, a := range e.Attributes {
		if a.StringValue == nil || InvalidCharAt(*a.StringValue) < 0 {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]types.MessageAttributeValue, len(e.Attributes))
			for k, v := range e.Attributes {
				attrs[k] = v
			}
		}
		v := replaceInvalid(*a.StringValue)
		a.StringValue = &v
		attrs[name] = a
	}
	if attrs != nil {
		e.Attributes = attrs
	}
}

// validate checks e against the rules SQS applies, so that an entry SQS
// would reject fails before any request is made. size is e.Size().
func validate(e *Entry, size int, q queueLimits) *ValidationError {
	fail := func(rule Rule, format string, args ...any) *ValidationError {
		return newValidationError(e.ID, rule, format, args...)
	}
	if e.Body == "" {
		return fail(RuleEmptyBody, "message body is empty")
	}
	if size > q.maxMessageSize {
		return fail(RuleTooLarge, "message is %d bytes with attributes; the queue accepts at most %d", size, q.maxMessageSize)
	}
	if i := InvalidCharAt(e.Body); i >= 0 {
		return fail(RuleInvalidCharacters, "message body has a character SQS rejects at byte %d", i)
	}
	if len(e.Attributes) > MaxAttributes {
		return fail(RuleTooManyAttributes, "message has %d attributes; SQS accepts at most %d", len(e.Attributes), MaxAttributes)
	}
	for name, a := range e.Attributes {
		if why := checkAttributeName(name); why != "" {
			return fail(RuleInvalidAttribute, "attribute name %q %s", name, why)
		}
		if why := checkAttributeValue(a); why != "" {
			return fail(RuleInvalidAttribute, "attribute %q %s", name, why)
		}
	}
	if e.DelaySeconds < 0 || e.DelaySeconds > MaxDelaySeconds {
		return fail(RuleInvalidDelay, "DelaySeconds %d is outside 0..%d", e.DelaySeconds, MaxDelaySeconds)
	}
	if q.fifo {
		if e.GroupID == "" {
			return fail(RuleMissingGroupID, "FIFO queue needs a MessageGroupId")
		}
		if e.DelaySeconds != 0 {
			return fail(RuleInvalidDelay, "FIFO queues accept no per-message DelaySeconds (got %d)", e.DelaySeconds)
		}
		if e.DeduplicationID == "" && !q.contentBasedDup {
			return fail(RuleMissingDeduplicationID, "FIFO queue without content-based deduplication needs a MessageDeduplicationId")
		}
	}
	if !q.fifo && e.DeduplicationID != "" {
		// SQS answers InvalidParameterValue, "The request include
		// parameter that is not valid for this queue type"; stand-ins
		// such as fauxqs take it, which hid a sender that set it.
		return fail(RuleInvalidDeduplicationID, "a standard queue takes no MessageDeduplicationId")
	}
	if e.GroupID != "" {
		if why := checkFIFOToken(e.GroupID); why != "" {
			return fail(RuleInvalidGroupID, "MessageGroupId %s", why)
		}
	}
	if e.DeduplicationID != "" {
		if why := checkFIFOToken(e.DeduplicationID); why != "" {
			return fail(RuleInvalidDeduplicationID, "MessageDeduplicationId %s", why)
		}
	}
	return nil
}

// checkAttributeName applies SQS's attribute name rules and says what is
// wrong, or returns "".
func checkAttributeName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > maxAttributeNameLen:
		return "is longer than 256 characters"
	case name[0] == '.' || name[len(name)-1] == '.':
		return "starts or ends with a period"
	case strings.Contains(name, ".."):
		return "has consecutive periods"
	}
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") {
		return "uses a reserved prefix (AWS. or Amazon.)"
	}
	for _, c := range []byte(name) {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return "may hold only letters, digits, '-', '_' and '.'"
		}
	}
	return ""
}

// checkAttributeValue checks an attribute's data type and value.
func checkAttributeValue(a types.MessageAttributeValue) string {
	if a.DataType == nil {
		return "has no DataType"
	}
	base, _, _ := strings.Cut(*a.DataType, ".")
	switch base {
	case "String", "Number":
		if a.StringValue == nil || *a.StringValue == "" {
			return "has an empty StringValue"
		}
		if i := InvalidCharAt(*a.StringValue); i >= 0 {
			return "has a character SQS rejects in its value"
		}
		if base == "Number" {
			if _, ok := new(big.Float).SetString(*a.StringValue); !ok {
				return "is not a number"
			}
		}
	case "Binary":
		if len(a.BinaryValue) == 0 {
			return "has an empty BinaryValue"
		}
	default:
		return "has DataType " + *a.DataType + "; want String, Number or Binary"
	}
	return ""
}

// checkFIFOToken applies the rules for MessageGroupId and
// MessageDeduplicationId: up to 128 alphanumeric or punctuation characters.
func checkFIFOToken(s string) string {
	if len(s) > maxGroupOrDedupLen {
		return "is longer than 128 characters"
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && !strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", rune(c)) {
			return "may hold only letters, digits and punctuation"
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
