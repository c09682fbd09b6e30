package sqsbatch

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func str(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func TestSize(t *testing.T) {
	e := Entry{
		Body: "héllo", // 6 bytes
		Attributes: map[string]types.MessageAttributeValue{
			"k":   str("vv"),                                                           // 1 + 6 + 2
			"n":   {DataType: aws.String("Number.int"), StringValue: aws.String("12")}, // 1 + 10 + 2
			"bin": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},      // 3 + 6 + 3
		},
	}
	if got, want := e.Size(), 6+9+13+12; got != want {
		t.Errorf("Size() = %d, want %d", got, want)
	}
}

func TestValidate(t *testing.T) {
	std := queueLimits{maxMessageSize: 1024}
	fifo := queueLimits{maxMessageSize: 1024, fifo: true}
	fifoCBD := queueLimits{maxMessageSize: 1024, fifo: true, contentBasedDup: true}
	attrs := func(n int) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m[string(rune('a'+i))] = str("v")
		}
		return m
	}
	tests := []struct {
		name  string
		e     Entry
		q     queueLimits
		want  Rule // "" means valid
		inMsg string
	}{
		{name: "ok", e: Entry{Body: "x"}, q: std},
		{name: "empty body", e: Entry{Body: ""}, q: std, want: RuleEmptyBody},
		{name: "exactly max size", e: Entry{Body: strings.Repeat("x", 1024)}, q: std},
		{name: "one byte over", e: Entry{Body: strings.Repeat("x", 1025)}, q: std, want: RuleTooLarge, inMsg: "1025 bytes"},
		{name: "attributes push over", e: Entry{Body: strings.Repeat("x", 1011), Attributes: map[string]types.MessageAttributeValue{"key": str("value")}}, q: std, want: RuleTooLarge},
		{name: "NUL in body", e: Entry{Body: "a\x00b"}, q: std, want: RuleInvalidCharacters, inMsg: "byte 1"},
		{name: "vertical tab", e: Entry{Body: "a\vb"}, q: std, want: RuleInvalidCharacters},
		{name: "U+FFFE", e: Entry{Body: "a\uFFFE"}, q: std, want: RuleInvalidCharacters},
		{name: "invalid UTF-8", e: Entry{Body: "a\xffb"}, q: std, want: RuleInvalidCharacters},
		{name: "tab newline CR and astral are fine", e: Entry{Body: "\t\n\r😀\uE000"}, q: std},
		{name: "ten attributes", e: Entry{Body: "x", Attributes: attrs(10)}, q: std},
		{name: "eleven attributes", e: Entry{Body: "x", Attributes: attrs(11)}, q: std, want: RuleTooManyAttributes},
		{name: "attribute name with space", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a b": str("v")}}, q: std, want: RuleInvalidAttribute, inMsg: `"a b"`},
		{name: "attribute name AWS.", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"aws.trace": str("v")}}, q: std, want: RuleInvalidAttribute, inMsg: "reserved"},
		{name: "attribute name double period", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a..b": str("v")}}, q: std, want: RuleInvalidAttribute},
		{name: "attribute name trailing period", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"ab.": str("v")}}, q: std, want: RuleInvalidAttribute},
		{name: "attribute bad type", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("Int"), StringValue: aws.String("1")}}}, q: std, want: RuleInvalidAttribute, inMsg: "String, Number or Binary"},
		{name: "attribute not a number", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("Number"), StringValue: aws.String("1x")}}}, q: std, want: RuleInvalidAttribute},
		{name: "attribute custom number", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("Number.float"), StringValue: aws.String("-1.5e3")}}}, q: std},
		{name: "attribute empty string", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": str("")}}, q: std, want: RuleInvalidAttribute},
		{name: "attribute invalid char", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": str("\x01")}}, q: std, want: RuleInvalidAttribute},
		{name: "binary attribute", e: Entry{Body: "x", Attributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("Binary"), BinaryValue: []byte{0}}}}, q: std},
		{name: "delay too long", e: Entry{Body: "x", DelaySeconds: 901}, q: std, want: RuleInvalidDelay},
		{name: "fifo without group", e: Entry{Body: "x", DeduplicationID: "d"}, q: fifo, want: RuleMissingGroupID},
		{name: "fifo without dedup id", e: Entry{Body: "x", GroupID: "g"}, q: fifo, want: RuleMissingDeduplicationID},
		{name: "fifo content based dedup", e: Entry{Body: "x", GroupID: "g"}, q: fifoCBD},
		{name: "fifo with delay", e: Entry{Body: "x", GroupID: "g", DelaySeconds: 5}, q: fifoCBD, want: RuleInvalidDelay},
		{name: "group id with space", e: Entry{Body: "x", GroupID: "g 1"}, q: fifoCBD, want: RuleInvalidGroupID},
		{name: "dedup id too long", e: Entry{Body: "x", GroupID: "g", DeduplicationID: strings.Repeat("d", 129)}, q: fifoCBD, want: RuleInvalidDeduplicationID},
		{name: "group on standard queue", e: Entry{Body: "x", GroupID: "tenant-1"}, q: std},
		{name: "dedup id on standard queue", e: Entry{Body: "x", GroupID: "tenant-1", DeduplicationID: "d"}, q: std, want: RuleInvalidDeduplicationID, inMsg: "standard queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.e.ID = "rec-1"
			err := validate(&tt.e, tt.e.Size(), tt.q)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate: nil, want %s", tt.want)
			}
			if err.Rule != tt.want || err.EntryID != "rec-1" {
				t.Errorf("validate: rule %s entry %q, want %s entry rec-1", err.Rule, err.EntryID, tt.want)
			}
			if !strings.Contains(err.Error(), tt.inMsg) || !strings.Contains(err.Error(), `"rec-1"`) {
				t.Errorf("error %q should name the entry and contain %q", err, tt.inMsg)
			}
		})
	}
}

func TestReplaceInvalid(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ok", "ok"},
		{"a\x00b", "a\uFFFDb"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"x\uFFFFy\u0085", "x\uFFFDy\u0085"},
	}
	for _, tt := range tests {
		if got := replaceInvalid(tt.in); got != tt.want {
			t.Errorf("replaceInvalid(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if i := InvalidCharAt(replaceInvalid(tt.in)); i >= 0 {
			t.Errorf("replaceInvalid(%q) still has an invalid character at %d", tt.in, i)
		}
	}
}

// FuzzInvalidCharAt checks the eight-bytes-at-a-time scan against a scan
// of one character at a time.
func FuzzInvalidCharAt(f *testing.F) {
	for _, s := range []string{"", "plain ascii body, longer than eight", "tab\there", "ü and more text", "\x00", "0123456\x1f89", "\xff\xfe", "\U0001F600 emoji", "\uFFFE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := -1
		for i, r := range s {
			if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") || !validChar(r) {
				want = i
				break
			}
		}
		if got := InvalidCharAt(s); got != want {
			t.Fatalf("InvalidCharAt(%q) = %d; want %d", s, got, want)
		}
	})
}
