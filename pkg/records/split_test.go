package records

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

type rec struct {
	Off  int64
	Text string
}

// expected returns the records of data as the splitting rules define them:
// every non-blank line, without its line ending (and, first, without a
// byte order mark), at its offset.
func expected(data string) []rec {
	var out []rec
	off := 0
	for off < len(data) {
		end := strings.IndexByte(data[off:], '\n')
		next := off + end + 1
		if end < 0 {
			end = len(data) - off
			next = len(data)
		}
		line := strings.TrimSuffix(data[off:off+end], "\r")
		if off == 0 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if strings.TrimSpace(line) != "" {
			out = append(out, rec{int64(off), line})
		}
		off = next
	}
	return out
}

// splitAll reads data in chunks of size step, each as its own splitter over
// the bytes a ranged GET would return, and returns the records of all
// chunks in order.
func splitAll(t *testing.T, data string, step int64) []rec {
	t.Helper()
	size := int64(len(data))
	var out []rec
	for start := int64(0); start < size; start += step {
		end := min(start+step, size)
		from := max(start-1, 0)
		c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "k", Size: size}, Start: start, End: end}
		s := newSplitter(strings.NewReader(data[from:]), c, start, end, 1<<20)
		for {
			line, off, _, ok := s.next()
			if !ok {
				break
			}
			if s.err != nil {
				t.Fatalf("chunk [%d,%d): %v", start, end, s.err)
			}
			out = append(out, rec{off, string(line)})
		}
		if s.err != nil {
			t.Fatalf("chunk [%d,%d): %v", start, end, s.err)
		}
	}
	return out
}

func TestSplitEdges(t *testing.T) {
	long := strings.Repeat("L", 300)
	tests := []struct {
		name string
		data string
	}{
		{"plain", "a\nbb\nccc\n"},
		{"no final newline", "a\nbb\nccc"},
		{"crlf", "a\r\nbb\r\nccc\r\n"},
		{"empty lines", "\n\na\n\n\nb\n\n"},
		{"blank lines with spaces", "a\n   \n\t\nb"},
		{"record longer than chunks", "x\n" + long + "\ny\n" + long},
		{"only newlines", "\n\n\n\n"},
		{"one record no newline", "abcdefghijklmnopqrstuvwxyz"},
		{"lone cr kept inside", "a\rb\nc\n"},
		{"byte order mark", "\ufeffa\nb\n"},
		{"only a byte order mark", "\ufeff\r\nb"},
		{"byte order mark not first", "a\n\ufeffb\n"},
	}
	for _, tt := range tests {
		for _, step := range []int64{1, 2, 3, 5, 7, 64, 1000} {
			got := splitAll(t, tt.data, step)
			if diff := cmp.Diff(expected(tt.data), got); diff != "" {
				t.Errorf("%s, chunks of %d (-want +got):\n%s", tt.name, step, diff)
			}
		}
	}
}

// FuzzSplit checks that over all chunks of any object and any chunk size,
// every record is read exactly once, in order, at its offset.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), uint16(3))
	f.Add([]byte("\n\n\n"), uint16(1))
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), uint16(8))
	f.Add([]byte("\ufeff{\"a\":1}\n\ufeff\n"), uint16(2))
	f.Add([]byte("\ufeff\n\"open,x\nb\"q,\"\n"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint16) {
		if step == 0 {
			step = 1
		}
		got := splitAll(t, string(data), int64(step))
		if diff := cmp.Diff(expected(string(data)), got); diff != "" {
			t.Errorf("chunks of %d (-want +got):\n%s", step, diff)
		}
	})
}

// TestSplitRandom is the property test run on every `make test`: random
// records with random line endings, split at random chunk sizes.
func TestSplitRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var b strings.Builder
		for range r.IntN(40) {
			switch r.IntN(6) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString(strings.Repeat("r", r.IntN(200)) + "\r\n")
			default:
				b.WriteString(strings.Repeat("x", 1+r.IntN(30)) + "\n")
			}
		}
		if r.IntN(2) == 0 {
			b.WriteString("tail")
		}
		data := b.String()
		step := int64(1 + r.IntN(64))
		if diff := cmp.Diff(expected(data), splitAll(t, data, step)); diff != "" {
			t.Fatalf("data %q, chunks of %d (-want +got):\n%s", data, step, diff)
		}
	}
}

func TestSplitTooLong(t *testing.T) {
	data := "ok\n" + strings.Repeat("x", 100) + "\nafter\n"
	c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "k", Size: int64(len(data))}, Count: 1, End: int64(len(data))}
	s := newSplitter(strings.NewReader(data), c, 0, c.End, 10)
	var got []string
	var errs []error
	for {
		line, _, _, ok := s.next()
		if !ok {
			break
		}
		if s.err != nil {
			errs = append(errs, s.err)
			s.err = nil
			continue
		}
		got = append(got, string(line))
	}
	if !slices.Equal(got, []string{"ok", "after"}) {
		t.Errorf("records %q, want ok and after", got)
	}
	var re *RecordError
	if len(errs) != 1 || !errors.As(errs[0], &re) || !errors.Is(errs[0], ErrTooLong) || re.Offset != 3 || re.Line != 2 {
		t.Errorf("errors %v, want one RecordError ErrTooLong at offset 3 line 2", errs)
	}
}

// BenchmarkSplit measures JSON Lines record splitting alone, in memory.
func BenchmarkSplit(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 64<<20; i++ {
		buf.WriteString(`{"id":`)
		buf.WriteString(strings.Repeat("7", i%9+1))
		buf.WriteString(`,"name":"some record with a few fields","value":{"a":1,"b":[1,2,3]},"pad":"`)
		buf.WriteString(strings.Repeat("p", 100+i%50))
		buf.WriteString("\"}\n")
	}
	data := buf.Bytes()
	c := dataset.Chunk{Object: dataset.Object{Size: int64(len(data))}, Count: 1, End: int64(len(data))}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s := newSplitter(bytes.NewReader(data), c, 0, c.End, DefaultMaxRecordSize)
		n := 0
		for {
			if _, _, _, ok := s.next(); !ok {
				break
			}
			n++
		}
		if n == 0 {
			b.Fatal("no records")
		}
	}
}
