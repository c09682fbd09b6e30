// Package s3event turns the body of an SQS message into the S3 object
// notifications inside it, whatever path the notification came by.
//
// # What it reads
//
// Parse reads one body. It understands:
//
//   - an S3 event notification, {"Records": [...]} with eventSource
//     "aws:s3" and one or more records, sent by S3 straight to SQS or
//     through SNS with raw message delivery (the same bytes, so both are
//     RouteS3);
//   - the same inside the standard SNS envelope,
//     {"Type": "Notification", "Message": "<the event as a JSON string>", ...}
//     (RouteSNS);
//   - the s3:TestEvent that S3 sends when a notification is configured, in
//     either form: TestEvent is set, there are no objects and no error;
//   - an EventBridge event from source "aws.s3" ("Object Created",
//     "Object Deleted" and the other S3 detail-types), sent by an
//     EventBridge rule to SQS (RouteEventBridge) or through SNS
//     (RouteEventBridgeSNS).
//
// Anything else yields an *UnrecognizedError that says what was found, with
// a short excerpt; a body that is not JSON yields a *MalformedError. Parse
// never panics.
//
// # Keys
//
// S3 writes keys form-URL-encoded: a space is "+", "+" is "%2B", "=" is
// "%3D". Object.Key is decoded with url.QueryUnescape semantics (DecodeKey);
// Object.RawKey keeps the key as written. A key with a malformed escape fails
// its record only: the error, a *RecordError naming the key, is in
// Notification.Failed and the other records of the same message still yield
// objects.
//
// How EventBridge writes detail.object.key is not documented by AWS (see
// Options.EventBridgeKeysRaw); Parse decodes it like S3 keys, as AWS's
// Powertools for Lambda does, and Options.EventBridgeKeysRaw turns that off.
//
// # Partitions, sequencers
//
// Partitions (and Object.Partitions) read Hive-style partition values from
// the directories of a decoded key: "date=2024-01-01/kind=a b/x.csv" gives
// date and kind, in path order, with Hive escapes decoded and
// __HIVE_DEFAULT_PARTITION__ as null. Values are strings; Partition.Typed
// infers int, float, bool and date values when asked.
//
// CompareSequencers orders two events on the same key as AWS documents:
// right-pad the shorter sequencer with zeros, then compare.
//
// # Batches
//
// Filter.Apply parses every message of an SQS batch and returns a Result:
// the objects to process, the objects skipped and why (event type, deletion,
// prefix, suffix, age, duplicate), and the messages or records that failed
// to parse, each tied to its SQS message ID so that a Lambda handler can
// answer with a partial batch response (Result.FailedMessageIDs). The
// filter's names follow the Bahir S3-SQS source: maxFileAge,
// ignoreFileDeletion (inverted as KeepDeletions), shouldSortFiles
// (SortByTime), fileNameOnly.
//
// # Writing notifications
//
// Encoder writes the other way: an object version announced as created, in
// the S3 event, EventBridge or SNS-wrapped shape (Format), for replaying
// objects that already exist to a consumer of notifications. Parse reads
// what it writes back to the same object. Its messages carry ReplayMarker in
// fields S3 leaves to the configuration or to itself (s3.configurationId,
// EventBridge detail.request-id and detail.requester), so a consumer can
// tell them from S3's; ReplaySequencer orders the replayed versions of a key.
//
// # moto_server
//
// moto (5.2.1) differs from AWS in ways this package absorbs: it writes
// eventTime without a zone (read as UTC), encodes "/" in keys as "%2F"
// (decoded like any escape), omits sequencer, versionId, userIdentity and
// the test event's RequestId and HostId, and leaves out the SNS Subject. Its
// EventBridge events carry the key unencoded (use EventBridgeKeysRaw), spell
// "eTag" where AWS writes "etag", give "version-id": "null" on unversioned
// buckets, a fixed sequencer and id, and reasons such as "ObjectCreated"
// instead of "PutObject".
package s3event
