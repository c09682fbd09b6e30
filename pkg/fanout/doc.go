// Package fanout sends the records of S3 datasets to SQS: it plans a
// dataset into chunks, sends small datasets at once, and turns large ones
// into chunk tasks on a work queue that many invocations consume. It is the
// logic of the fanout Lambda function and of `s3sqs fanout`; neither reads
// the environment here.
//
// Records become messages in one of two modes. In record mode each record is
// a message, mapped as the Spark SQS sink does: a JSON object's "value" field
// is the body (the whole record when there is none), "msg_attributes" (an
// object of strings) become message attributes, "group_id" the FIFO group,
// and an optional field the deduplication id. In chunk mode many records go
// in one message, newline-delimited, up to the queue's size limit.
//
// Every message carries a deterministic record id attribute built from the
// object's bucket, key, version (or ETag) and the record's offset, so that
// consumers can drop the duplicates that at-least-once delivery and re-runs
// produce. On FIFO queues it is the deduplication id unless the mapping
// gives one.
package fanout
