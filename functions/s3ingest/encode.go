package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// The encoding of records as JSON objects with partition fields and _file
// is package recordjson's, shared with fanout for handed-off objects.

// recordID is the deterministic id of the record at offset in obj: 32 hex
// characters of SHA-256 over bucket, key, version (or ETag) and offset. It
// is built exactly as fanout builds its s3sqs-record-id, so a record has
// the same id whichever function sent it.
func recordID(obj dataset.Object, offset int64) string {
	return newRecordIDs(obj).id(offset)
}

// recordIDs makes the record ids of one object without formatting its pin
// again for each record.
type recordIDs struct {
	buf    []byte
	prefix int
}

func newRecordIDs(obj dataset.Object) *recordIDs {
	pin := obj.VersionID
	if pin == "" {
		pin = obj.ETag
	}
	b := make([]byte, 0, len(obj.Bucket)+len(obj.Key)+len(pin)+24)
	b = append(append(append(append(append(b, obj.Bucket...), 0), obj.Key...), 0), pin...)
	b = append(b, 0)
	return &recordIDs{buf: b, prefix: len(b)}
}

func (r *recordIDs) id(offset int64) string {
	r.buf = strconv.AppendInt(r.buf[:r.prefix], offset, 10)
	sum := sha256.Sum256(r.buf)
	return hex.EncodeToString(sum[:16])
}

// deletionID is the record id of a deletion event: the object's pin with
// the event's sequencer, so that two deletions of one key differ.
func deletionID(obj s3event.Object) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00deleted\x00%s", obj.Bucket, obj.Key, obj.VersionID, obj.ETag, obj.Sequencer)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// groupID is the FIFO message group of an object's records on a FIFO
// output queue (see recordjson.GroupID).
func groupID(bucket, key string) string { return recordjson.GroupID(bucket, key) }
