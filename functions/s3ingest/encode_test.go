package main

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
)

func TestIDs(t *testing.T) {
	a := dataset.Object{Bucket: "b", Key: "k", ETag: "e"}
	b := dataset.Object{Bucket: "b", Key: "k", ETag: "e", VersionID: "v"}
	ids := []string{fanout.RecordID(a, 0), fanout.RecordID(a, 1), fanout.RecordID(b, 0), groupID("b", "k"), groupID("b", "k2")}
	for i, id := range ids {
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Errorf("id %q is not 32 hex characters", id)
		}
		if slices.Contains(ids[:i], id) {
			t.Errorf("id %q repeats", id)
		}
	}
	if fanout.RecordID(a, 5) != fanout.RecordID(a, 5) {
		t.Error("recordID is not deterministic")
	}
	// The scheme fanout uses for s3sqs-record-id: SHA-256 of
	// "bucket\x00key\x00pin\x00offset", 16 bytes in hex.
	sum := sha256.Sum256([]byte("b\x00k\x00v\x00123"))
	if got, want := fanout.RecordID(b, 123), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("recordID = %s; want %s", got, want)
	}
	if seq, ok := seqOf(entryID(12, 345)); !ok || seq != 12 {
		t.Errorf("seqOf(entryID(12, 345)) = %d, %v", seq, ok)
	}
}
