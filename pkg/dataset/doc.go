// Package dataset lists the S3 objects of a dataset and plans them into
// chunks that can be read independently and in parallel.
//
// A dataset is one object, a prefix, a list of keys, or a manifest: an S3
// Batch Operations CSV of bucket,key lines or an S3 Inventory manifest.json
// with CSV or Parquet data files (an ORC report is refused with
// [ErrInventoryFormat]). Listing skips what Spark and Hive write beside
// data (_SUCCESS, and keys whose last segment starts with "_" or ".")
// unless asked not to, and what the source's [Filters] (time, size,
// storage class, key) leave out, each counted by the filter that did.
//
// Each object is pinned when it is listed to its ETag and, when S3 reports
// one, its VersionId. A [Chunk] carries that pin, so that a reader asks S3
// for exactly that version (VersionId, or If-Match on the ETag) and a chunk
// never mixes two versions of an object.
//
// A [Chunk] is a byte range of one object, with what a reader needs to parse
// it: its format, compression and, for CSV, the header. It serialises to a
// small JSON value so that it can travel as an SQS message. A record belongs
// to the chunk in which its first byte lies; package records reads chunks
// with that rule.
//
// An object compressed by its name (.gz, .zst) or by its Content-Encoding
// (gzip, zstd) is one chunk, read whole from its start. A listing does not
// give Content-Encoding: the planner asks for it, with a GET of one byte,
// only for an object it would otherwise cut into byte ranges. A ranged read
// that finds it anyway (a chunk planned before) is an [*EncodingError].
//
// Errors say what a caller can do: [ErrChanged] and [ErrNotFound] (the
// planned version is gone), [ErrCorrupt] (the bytes were all read and are
// not what their format says: reading again gives the same),
// [ErrUnsupported] (valid, but in a part of the format s3sqs does not
// read, named in the error), and the
// others, which a later attempt may not meet (a read that failed in the
// network after its resumes).
package dataset
