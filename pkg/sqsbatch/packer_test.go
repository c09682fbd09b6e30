package sqsbatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// recordingClient passes every call to SQS and records the bodies of each
// SendMessageBatch request and their size.
type recordingClient struct {
	sqsbatch.API
	mu       sync.Mutex
	requests [][]string
	sizes    []int
}

func (c *recordingClient) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var bodies []string
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
	}
	c.mu.Lock()
	c.requests = append(c.requests, bodies)
	c.sizes = append(c.sizes, requestSize(in.Entries))
	c.mu.Unlock()
	return c.API.SendMessageBatch(ctx, in, opts...)
}

// packAll packs entries with p and returns the bodies of each request,
// their sizes, and the failures by entry id.
func packAll(p *sqsbatch.Packer, entries []sqsbatch.Entry) (requests [][]string, sizes []int, fails map[string]string) {
	fails = map[string]string{}
	add := func(b *sqsbatch.Batch) {
		if b == nil {
			return
		}
		var bodies []string
		for _, e := range b.Entries {
			bodies = append(bodies, e.Body)
		}
		requests = append(requests, bodies)
		sizes = append(sizes, b.Bytes)
	}
	for _, e := range entries {
		b, fail := p.Add(e)
		if fail != nil {
			fails[fail.Entry.ID] = fail.Code
		}
		add(b)
	}
	add(p.Flush())
	return requests, sizes, fails
}

// mixedEntries are entries of many sizes, some that SQS would refuse, and
// on a FIFO queue in a few groups, so that one group fails after its
// first refused entry.
func mixedEntries(n, maxSize int, fifo bool) []sqsbatch.Entry {
	out := make([]sqsbatch.Entry, n)
	for i := range out {
		id := fmt.Sprintf("e%d", i)
		size := []int{20, 300, maxSize / 3, maxSize / 2, maxSize - 40, 5000}[i%6]
		e := sqsbatch.Entry{ID: id, Body: pad(id+"-", size)}
		switch i % 17 {
		case 5:
			e.Body = pad(id+"-", maxSize+1) // too large
		case 11:
			e.Body = "bad \x01 character"
		}
		if fifo {
			e.GroupID = fmt.Sprintf("g%d", i%4)
			e.DeduplicationID = id
		}
		out[i] = e
	}
	return out
}

// TestPackerMatchesSend: a Packer packs the same entries into the same
// requests, and fails the same entries with the same codes, as a Send of
// them to the stand-in, on a standard queue and on a FIFO queue (where a
// refused entry fails the later entries of its group).
func TestPackerMatchesSend(t *testing.T) {
	const maxSize = 4096
	c := newClient(t)
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			url := createQueue(t, c, fifo, map[string]string{"MaximumMessageSize": fmt.Sprint(maxSize)})
			rec := &recordingClient{API: c}
			s, err := sqsbatch.New(t.Context(), rec, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxInFlight: 4})
			if err != nil {
				t.Fatal(err)
			}
			entries := mixedEntries(120, maxSize, fifo)
			wantReqs, wantSizes, wantFails := packAll(s.Packer(), entries)
			res, err := s.SendEntries(t.Context(), entries)
			if err != nil {
				t.Fatal(err)
			}
			gotFails := failureCodes(res)
			if diff := cmp.Diff(wantFails, gotFails); diff != "" {
				t.Errorf("failures (-packer +send):\n%s", diff)
			}
			if fifo && !slices.Contains(mapsValues(gotFails), sqsbatch.CodeGroupFailed) {
				t.Errorf("no entry failed with its group: %v", gotFails)
			}
			// Requests run in parallel: compare them in the order of their
			// first entry.
			byFirst := func(a, b []string) int { return strings.Compare(a[0], b[0]) }
			gotReqs := slices.Clone(rec.requests)
			slices.SortFunc(gotReqs, byFirst)
			sortedWant := slices.Clone(wantReqs)
			slices.SortFunc(sortedWant, byFirst)
			if diff := cmp.Diff(sortedWant, gotReqs); diff != "" {
				t.Errorf("requests (-packer +send):\n%s", diff)
			}
			if res.Requests != len(wantReqs) || res.Sent+res.Failed != len(entries) {
				t.Errorf("send made %d requests, sent %d, failed %d; packer packed %d requests of %d entries", res.Requests, res.Sent, res.Failed, len(wantReqs), len(entries))
			}
			slices.Sort(wantSizes)
			gotSizes := slices.Clone(rec.sizes)
			slices.Sort(gotSizes)
			if !slices.Equal(wantSizes, gotSizes) {
				t.Errorf("request sizes: packer %v, send %v", wantSizes, gotSizes)
			}
		})
	}
}

func mapsValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestBilledRequests(t *testing.T) {
	for _, tt := range []struct{ payload, want int }{
		{0, 1}, {1, 1}, {64 << 10, 1}, {64<<10 + 1, 2}, {256 << 10, 4}, {1 << 20, 16}, {13 << 10, 1},
	} {
		if got := sqsbatch.BilledRequests(tt.payload); got != tt.want {
			t.Errorf("BilledRequests(%d) = %d, want %d", tt.payload, got, tt.want)
		}
	}
	b := sqsbatch.Batch{Bytes: 100 << 10}
	if b.BilledRequests() != 2 {
		t.Errorf("Batch of 100 KiB billed as %d requests, want 2", b.BilledRequests())
	}
}

// offlineSender returns a Sender for a queue whose limits are given, which
// resolves without a request, for tests of its Packer.
func offlineSender(tb testing.TB, maxSize int, fifo bool) *sqsbatch.Sender {
	tb.Helper()
	url := "https://sqs.us-east-1.amazonaws.com/111122223333/q"
	if fifo {
		url += ".fifo"
	}
	s, err := sqsbatch.New(context.Background(), nil, sqsbatch.Queue{URL: url, MaxMessageSize: maxSize}, sqsbatch.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// FuzzPacker checks the packing on any sizes: every entry is in exactly
// one request or failed, in order; no request breaks SQS's limits; and
// each request but the last is full: ten entries, or no room for the
// entry after it.
func FuzzPacker(f *testing.F) {
	f.Add(uint16(4096), []byte{10, 200, 255, 0, 3, 90})
	f.Add(uint16(1024), []byte{255, 255, 255, 255})
	f.Add(uint16(60000), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, limit uint16, sizes []byte) {
		maxSize := max(int(limit), 1024)
		s := offlineSender(t, maxSize, false)
		var entries []sqsbatch.Entry
		for i, b := range sizes {
			// Sizes from 1 byte to a little over the limit.
			size := 1 + int(b)*(maxSize+64)/255
			entries = append(entries, sqsbatch.Entry{ID: fmt.Sprint(i), Body: pad(fmt.Sprint(i)+"-", max(size, len(fmt.Sprint(i))+1))})
		}
		var reqs [][]sqsbatch.Entry
		var bytes []int
		failed := map[string]bool{}
		p := s.Packer()
		keep := func(b *sqsbatch.Batch) {
			if b != nil {
				reqs = append(reqs, b.Entries)
				bytes = append(bytes, b.Bytes)
			}
		}
		for _, e := range entries {
			b, fail := p.Add(e)
			if fail != nil {
				if fail.Code != string(sqsbatch.RuleTooLarge) || e.Size() <= maxSize {
					t.Fatalf("entry of %d bytes failed with %s", e.Size(), fail.Code)
				}
				failed[e.ID] = true
			}
			keep(b)
		}
		keep(p.Flush())
		var order []sqsbatch.Entry
		for i, r := range reqs {
			n := 0
			for _, e := range r {
				n += e.Size()
			}
			if len(r) == 0 || len(r) > sqsbatch.MaxBatchEntries || n > maxSize || n != bytes[i] {
				t.Fatalf("request %d: %d entries, %d bytes (reported %d), limit %d", i, len(r), n, bytes[i], maxSize)
			}
			if i+1 < len(reqs) && len(r) < sqsbatch.MaxBatchEntries && n+reqs[i+1][0].Size() <= maxSize {
				t.Fatalf("request %d of %d bytes left room for the next entry of %d", i, n, reqs[i+1][0].Size())
			}
			order = append(order, r...)
		}
		var want []sqsbatch.Entry
		for _, e := range entries {
			if !failed[e.ID] {
				want = append(want, e)
			} else if e.Size() <= maxSize {
				t.Fatalf("entry %s of %d bytes failed", e.ID, e.Size())
			}
		}
		if len(order) != len(want) {
			t.Fatalf("packed %d entries, want %d", len(order), len(want))
		}
		for i := range want {
			if order[i].ID != want[i].ID {
				t.Fatalf("entry %d packed is %s, want %s", i, order[i].ID, want[i].ID)
			}
		}
	})
}
