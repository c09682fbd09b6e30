package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// TestDeletionID pins the record id of a deletion event, which consumers
// keep across releases: SHA-256 of bucket, key, version, ETag, "deleted"
// and sequencer, 16 bytes in hex; two deletions of one key differ by their
// sequencer.
func TestDeletionID(t *testing.T) {
	obj := s3event.Object{Bucket: "b", Key: "k", VersionID: "v", ETag: "e", Sequencer: "0A1"}
	sum := sha256.Sum256([]byte("b\x00k\x00v\x00e\x00deleted\x000A1"))
	if got, want := deletionID(obj), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("deletionID = %s; want %s", got, want)
	}
	later := obj
	later.Sequencer = "0A2"
	if deletionID(later) == deletionID(obj) {
		t.Error("two deletions of one key with different sequencers have the same id")
	}
}

// TestRunIDByVersion checks that two versions of the same bytes (one ETag)
// are runs of their own even without a sequencer (moto writes none), as
// record ids, which hash the ETag, would not tell them apart; and that a
// notification without a version is named by its ETag.
func TestRunIDByVersion(t *testing.T) {
	v1 := ingestRunID(s3event.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v1"})
	v2 := ingestRunID(s3event.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v2"})
	if v1 == v2 {
		t.Errorf("two versions of one ETag have one run id, %s", v1)
	}
	sum := sha256.Sum256([]byte("b\x00k\x00e\x00-1"))
	if got, want := ingestRunID(s3event.Object{Bucket: "b", Key: "k", ETag: "e"}), "s3ingest-"+hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("run id without a version %s; want %s", got, want)
	}
}

// TestNotifiedRunID checks the run ids of the objects fanout is notified
// of: one for sequencers CompareSequencers calls equal, valid run ids
// whatever the sequencer, and the message's id when nothing tells the
// event from another.
func TestNotifiedRunID(t *testing.T) {
	obj := s3event.Object{Bucket: "lake", Key: "in/a.jsonl", ETag: "0123456789abcdef0123456789abcdef"}
	with := func(seq string) s3event.Item {
		o := obj
		o.Sequencer = seq
		return s3event.Item{MessageID: "m-1", Object: o}
	}
	if a, b := notifiedRunID(with("617f08299329d189")), notifiedRunID(with("617F08299329D18900")); a != b {
		t.Errorf("equal sequencers give %s and %s", a, b)
	}
	for _, seq := range []string{"", "0", "617f08299329d189", "../not a sequencer", strings.Repeat("F", 200)} {
		id := notifiedRunID(with(seq))
		if err := CheckRunID(id); !strings.HasPrefix(id, "s3event-") || err != nil {
			t.Errorf("sequencer %q: run id %q (%v)", seq, id, err)
		}
	}
	if id := notifiedRunID(s3event.Item{MessageID: "m-1", Object: s3event.Object{Bucket: "lake", Key: "in/a.jsonl"}}); id != "m-1" {
		t.Errorf("no version, ETag or sequencer: run id %q, want the message's", id)
	}
}
