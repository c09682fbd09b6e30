package dataset

import "github.com/s3sqs/s3sqs/pkg/s3event"

// Notified returns the object an S3 event notification names, pinned to
// the notified version (its version id, else its ETag), as both functions
// read it.
func Notified(o s3event.Object) Object {
	return Object{Bucket: o.Bucket, Key: o.Key, Size: o.Size, ETag: o.ETag, VersionID: o.VersionID}
}
