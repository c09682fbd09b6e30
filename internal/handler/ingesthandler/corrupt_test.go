package ingesthandler

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// TestHandleCorruptObject notifies a .gz object whose stream is cut short:
// the records before the cut are delivered, the rest of the object is one
// CorruptObject failure, and the message succeeds (it is a bad record, as
// ON_BAD_RECORD says), instead of failing on every delivery and resending
// the records before the cut each time.
func TestHandleCorruptObject(t *testing.T) {
	f := newFixture(t, "", nil)
	var plain bytes.Buffer
	for i := range 3000 {
		fmt.Fprintf(&plain, `{"n":%d,"pad":"%040d"}`+"\n", i, i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	cut := f.put("c/cut.jsonl.gz", string(gz.Bytes()[:gz.Len()/2]))
	h := f.handler(f.defaults(), nil, nil)
	resp, err := h.Handle(t.Context(), sqsEvent(msg{id: "cut", body: s3Body(cut)}))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if got := failures(resp); len(got) != 0 {
		t.Errorf("batchItemFailures %v, want none: no retry reads the object further", got)
	}
	if n := len(localaws.Drain(t, f.sqs, f.out, 2*time.Second)); n == 0 || n >= 3000 {
		t.Errorf("%d records delivered, want those before the cut", n)
	}
	got := f.failed(time.Second)
	if len(got) != 1 {
		t.Fatalf("failure output %v, want one failure", got)
	}
	for at, fl := range got {
		if at.key != cut.Key || fl.Code != "CorruptObject" || at.offset <= 0 {
			t.Errorf("failure %+v at %+v, want CorruptObject past offset 0 of %s", fl, at, cut.Key)
		}
	}
	if s := summaryOf(t, f.summary); s.BadRecords != 1 {
		t.Errorf("summary %+v, want one bad record", s)
	}
}
