package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// The encoding of records as JSON objects with partition fields and _file
// is package recordjson's, and record ids are fanout.RecordID's: both are
// shared with fanout, so that a handed-off record is sent as if read here.

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
