// Package fanout is the engine under both Lambda functions, and the logic
// of the fanout function and of `s3sqs fanout`: it plans S3 datasets into
// chunk tasks (plan.go), reads tasks and sends their records with one
// sender per target queue (tasks.go), turns records into messages
// (encode.go), puts what cannot be sent on the failure output
// (failures.go), and answers fanout's Lambda invocations (lambda.go),
// among them those of its drivers, S3 Batch Operations (batchops.go) and
// Step Functions Distributed Map (distmap.go), which run each object they
// name as a run of its own (drivers.go).
// Package ingest, the s3ingest function's logic, runs its objects as tasks
// of a Runner too. Nothing here reads the environment.
//
// Records become messages in one of three encodings. In record mode each
// record is a message, mapped as the Spark SQS sink does: a JSON object's
// "value" field is the body (the whole record when there is none),
// "msg_attributes" (an object of strings) become message attributes,
// "group_id" the FIFO group, and an optional field the deduplication id. In
// chunk mode many records go in one message, newline-delimited, up to the
// queue's size limit. With IngestEncoding each record is s3ingest's JSON
// object with the key's partition values and _file.
//
// Every message carries a deterministic record id attribute built from the
// object's bucket, key and ETag (its version id when no ETag is known) and
// the record's offset, or in chunk mode the offsets of its first and last
// records and their count, so that consumers can drop the duplicates that
// at-least-once delivery and re-runs produce, whichever path found the
// object, while a message that carries other records is a new one. On FIFO queues it is the deduplication id unless the mapping
// gives one, and a record without a group goes in its object's (GroupID),
// which is valid whatever the key.
package fanout
