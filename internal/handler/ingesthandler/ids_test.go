package ingesthandler

import (
	"crypto/sha256"
	"encoding/hex"
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
	v1 := &objectRun{obj: s3event.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v1"}}
	v2 := &objectRun{obj: s3event.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v2"}}
	if v1.runID() == v2.runID() {
		t.Errorf("two versions of one ETag have one run id, %s", v1.runID())
	}
	sum := sha256.Sum256([]byte("b\x00k\x00e\x00-1"))
	if got, want := (&objectRun{obj: s3event.Object{Bucket: "b", Key: "k", ETag: "e"}}).runID(), "s3ingest-"+hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("run id without a version %s; want %s", got, want)
	}
}
