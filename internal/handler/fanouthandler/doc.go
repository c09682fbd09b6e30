// Package fanouthandler is the fanout Lambda function's dispatcher, a
// client of the engine (package engine) through its exported API. One
// typed method answers each kind of invocation:
//
//   - HandleRequest: a direct request (handler.go), run by Runner.Run;
//   - HandleNotification: an S3 event notification invoked directly
//     (notify.go), each notified object a run of its own;
//   - HandleSQS: an SQS event (sqs.go) whose messages are chunk tasks from
//     the work queue (run in FIFO chains by Runner.RunChains), planning
//     steps (Runner.PlanStep) or S3 notifications, answered with a partial
//     batch response;
//   - HandleBatchOperations: an S3 Batch Operations job's tasks
//     (batchops.go), and HandleDistributedMap: a Step Functions
//     Distributed Map item batch (distmap.go). These drivers keep the
//     list's progress themselves; each object they name is pinned and run
//     as a run of its own (drivers.go) and answered with a ResultCode.
//
// Invoke, the Lambda entry point, tells the kinds apart once and calls the
// typed method. Every invocation ends with one summary line and its EMF
// metrics (summary.go).
package fanouthandler
