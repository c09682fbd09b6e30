// Package redrive sends failed work again, for `s3sqs redrive`, from three
// sources:
//
//   - a fanout run report (Redriver.Report): the failed tasks that
//     failed/<taskId>.json lists go back to the work queue, from their
//     first failed record, or only their failed records are read again and
//     sent to the target, in this process (engine.Runner.RunRecords);
//   - the failure output, a failure queue (Redriver.FailureQueue) or
//     FAILURE_S3_URI's JSON Lines (Redriver.FailureS3): each
//     engine.Failure is sent again, its body as it is, or read again from
//     its object, pinned to its version, when the body is cut or absent;
//   - a dead-letter queue (Redriver.DLQ): messages move back to their
//     source queue, body, attributes and FIFO ids, at a set rate, as SQS's
//     own redrive does; or SQS's StartMessageMoveTask does it.
//
// Every record or message found is accounted for in a Summary: sent,
// skipped with a reason, or failed with a reason. A source item is removed
// (a queue message deleted) or marked as sent (a marker object next to an
// S3 file or run report) only after SQS accepted what it sends, so that a
// second run does not send again what the first sent; the window in
// between is at-least-once, and messages carry the engine's record ids
// (engine.RecordID), so consumers drop the duplicates.
//
// Nothing here reads the environment or prints; the CLI does.
package redrive
