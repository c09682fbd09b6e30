package dataset

import (
	"time"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

// Notified returns the object an S3 event notification names, pinned to
// the notified version (its version id, else its ETag), as both functions
// read it.
func Notified(o s3event.Object) Object {
	return Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
}

// Created returns what an S3 event notification of o's creation at t
// names, for s3event.Encoder: the inverse of Notified.
func (o Object) Created(t time.Time) s3event.Object {
	return s3event.Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID, EventTime: t}
}
