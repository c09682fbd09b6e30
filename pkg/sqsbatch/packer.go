package sqsbatch

import "fmt"

// BilledUnitBytes is the payload SQS bills as one request: each 64 KiB
// of a request's payload, begun, is billed as one request.
const BilledUnitBytes = 64 << 10

// BilledRequests returns the requests SQS bills for one request whose
// payload is payload bytes (its entries' bodies and attributes, as
// [Entry.Size] counts them): one per 64 KiB begun, and at least one. A
// SendMessageBatch of 1 MiB is billed as 16 requests.
func BilledRequests(payload int) int {
	return max(1, (payload+BilledUnitBytes-1)/BilledUnitBytes)
}

// Batch is one SendMessageBatch request as a [Packer] packed it.
type Batch struct {
	// Entries are the request's entries, in the order they were added.
	Entries []Entry
	// Bytes is the request's payload: the sum of its entries' sizes.
	Bytes int
}

// BilledRequests returns the requests SQS bills for b (see the function
// BilledRequests).
func (b *Batch) BilledRequests() int { return BilledRequests(b.Bytes) }

// Packer packs entries into SendMessageBatch requests as its Sender's
// Send packs them, and fails the entries Send would fail before any
// request, without sending anything: it makes no request and keeps no
// more than one request's entries. Send and Packer share one packing, so
// that the requests a Packer returns for a sequence of entries are those
// Send makes for it when SQS accepts every entry at the first attempt.
// A Packer is for one sequence of entries, as one Send is; it is not safe
// for concurrent use.
type Packer struct {
	limits  queueLimits
	replace bool
	pack    packing
	groups  groupFailures
	seq     int
}

// Packer returns a Packer with the Sender's queue limits (its
// MaximumMessageSize, whether it is FIFO and deduplicates by content) and
// its Options.ReplaceInvalidCharacters.
func (s *Sender) Packer() *Packer {
	p := &Packer{limits: s.limits, replace: s.replace, pack: packing{maxBytes: s.limits.maxMessageSize}}
	if s.limits.fifo {
		p.groups = groupFailures{}
	}
	return p
}

// Add packs e, the next entry of the sequence. It returns the request that
// e completes, if any: the one packed so far when e does not fit beside
// it (e then starts the next), or the one e fills to MaxBatchEntries. When
// Send would fail e before any request (a [*ValidationError], or
// [CodeGroupFailed] on a FIFO queue after an entry of its message group
// failed), Add returns its failure instead and packs nothing.
func (p *Packer) Add(e Entry) (*Batch, *EntryError) {
	seq := p.seq
	p.seq++
	it, fail := admit(e, seq, p.limits, p.replace)
	if fail != nil {
		p.groups.block(fail.Entry.GroupID, seq, fail.Code)
		return nil, fail
	}
	if fail := p.groups.failure(&it); fail != nil {
		return nil, fail
	}
	return batchOf(p.pack.add(it)), nil
}

// Flush returns the last request, holding what is packed, or nil when
// nothing is, and starts anew.
func (p *Packer) Flush() *Batch { return batchOf(p.pack.flush()) }

func batchOf(items []*item) *Batch {
	if len(items) == 0 {
		return nil
	}
	b := &Batch{Entries: make([]Entry, len(items))}
	for i, it := range items {
		b.Entries[i] = it.entry
		b.Bytes += it.size
	}
	return b
}

// admit sanitizes e (with replace) and validates it, the seq-th entry of a
// sequence, as every entry is before it is packed: its item, or its
// failure.
func admit(e Entry, seq int, limits queueLimits, replace bool) (item, *EntryError) {
	if replace {
		sanitize(&e)
	}
	size := e.Size()
	if verr := validate(&e, size, limits); verr != nil {
		return item{}, &EntryError{Entry: e, Seq: seq, Code: string(verr.Rule), Message: verr.Detail, SenderFault: true, Err: verr}
	}
	return item{seq: seq, entry: e, size: size}, nil
}

// packing is the one packing of admitted entries into requests, which
// Send and Packer share: at most MaxBatchEntries entries and maxBytes
// bytes (the queue's MaximumMessageSize) a request, in the entries' order.
type packing struct {
	maxBytes int
	batch    []*item
	bytes    int
	// items are made MaxBatchEntries at a time, one allocation for a
	// request's worth, and taken from the front. A request's items are
	// never in another's allocation, which would keep their bodies, a
	// MiB each in chunk mode, while the other is in flight.
	items []item
}

// add adds it and returns the request it completes, if any: the one
// packed so far when it does not fit beside it (it then starts the next),
// or the one it fills to MaxBatchEntries.
func (p *packing) add(it item) []*item {
	var full []*item
	if len(p.batch) > 0 && p.bytes+it.size > p.maxBytes {
		full = p.flush()
	}
	if p.batch == nil {
		p.batch = make([]*item, 0, MaxBatchEntries)
	}
	if len(p.items) == 0 {
		p.items = make([]item, MaxBatchEntries)
	}
	p.items[0] = it
	p.batch = append(p.batch, &p.items[0])
	p.items = p.items[1:]
	p.bytes += it.size
	if len(p.batch) == MaxBatchEntries {
		// A request just cut by bytes holds one entry, not ten.
		full = p.flush()
	}
	return full
}

// flush returns what is packed and starts anew.
func (p *packing) flush() []*item {
	b := p.batch
	p.batch, p.bytes, p.items = nil, 0, nil
	return b
}

// groupFailures holds, per FIFO message group, why the group failed for
// good: its later entries fail too rather than reach SQS out of order. A
// nil groupFailures (a standard queue) holds nothing.
type groupFailures map[string]string

// block makes the later entries of group fail, because its entry seq
// failed for good with code.
func (g groupFailures) block(group string, seq int, code string) {
	if g == nil {
		return
	}
	if _, ok := g[group]; !ok {
		g[group] = fmt.Sprintf("entry #%d of the group failed: %s", seq, code)
	}
}

// failure returns the failure of it when its group failed, else nil.
func (g groupFailures) failure(it *item) *EntryError {
	why, ok := g[it.entry.GroupID]
	if !ok {
		return nil
	}
	return &EntryError{Entry: it.entry, Seq: it.seq, Code: CodeGroupFailed, Message: why}
}
