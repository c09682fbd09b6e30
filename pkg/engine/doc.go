// Package engine is the engine under both Lambda functions and the CLI: a
// Runner plans S3 datasets into chunk tasks and sends their records to SQS.
// Nothing here reads the environment; the handlers and commands that use
// it are its clients through the exported API.
//
// A run is a planning iterator feeding a sink. Planning lists the dataset
// and plans each object into chunk tasks, several objects at once, in
// listing order, counting them in the run's report. The caller picks the
// sink: inline keeps the tasks while the run is under InlineMaxBytes and
// then runs them in this invocation (Run, RunObjects); the work queue sink
// sends them to the work queue as they are planned (Queue, RunObjects with
// ObjectsOptions.Queue, PlanStep) and, when a listing that can resume meets
// ctx's end, the next planning steps. An inline run that grows too large, or
// meets its end, hands what it kept and the rest to the work queue sink.
//
// A task runs as a fixed spec (its task, sender, encoder, start and
// claim), read by one reader goroutine that owns what the read did and
// hands its entries to the one send of the tasks sharing its target
// queue; when the send and the readers have ended, the task's result is
// settled on one goroutine: its failures written, its claim done or
// released, its continuation returned. A failed entry finds its task again
// through the entry's place in the send, not a string. FIFO chains
// (RunChains) run each object's chunks in order.
//
// Records become messages in one of three encodings. In record mode each
// record is a message, whole, as its body; on request (Options.Mapping) a
// JSON object's fields are mapped as the Spark SQS sink's columns are: one
// field is the body (the rest of the record left out, and counted in
// Stats), an object of strings becomes message attributes, others the
// FIFO group and the deduplication id. In
// chunk mode many records go in one message, newline-delimited, up to the
// queue's size limit. A task whose overrides carry Ingest (s3ingest's) has
// s3ingest's bodies (pkg/recordjson: each record a JSON object with its
// key's partition values and, on request, a _file object), whichever
// Runner reads it.
//
// Every message carries a deterministic record id attribute built from the
// object's bucket, key and ETag (its version id when no ETag is known) and
// the record's offset, or in chunk mode the offsets of its first and last
// records and their count, so that consumers can drop the duplicates that
// at-least-once delivery and re-runs produce, whichever path found the
// object, while a message that carries other records is a new one. On FIFO
// queues it is the deduplication id unless the mapping gives one, and a
// record without a group goes in its object's (GroupID), which is valid
// whatever the key.
//
// Records SQS refuses for good, and records that cannot be read or mapped,
// go to the failure output (a queue, S3 or a writer) and, with a run
// report configured, to the report's failed tasks; with a claims store
// each task runs once per run and resumes where an earlier attempt
// stopped.
package engine
