// Package partialbatch processes the messages of a Lambda SQS event and
// answers with a partial batch response, so that only the messages that
// failed come back to the queue: the Go counterpart of Powertools'
// BatchProcessor and SqsFifoProcessor. It holds no AWS client; the work is
// the caller's Handler.
//
// Decode rejects a payload that is not an SQS event (an S3, SNS or
// EventBridge event, null, {}, {"Records":[]}) with an *UnexpectedEventError
// that says what it got, so that a function wired to the wrong trigger fails
// loudly instead of succeeding on an empty batch.
//
// Processor.Process gives a standard batch to the Handler in one call, and a
// FIFO batch one message at a time, in order, stopping the rest of the batch
// (or of the failed message's group) at the first failure. Work stops a
// margin before the invocation's deadline; sending what was read may go on,
// in SendContext, until half the margin before it. The response names each
// failed message once, in batch order. A failed message without a messageId
// cannot be named, so Process returns a *MissingIDError and Lambda retries
// the whole batch.
//
// No goroutine started by this package outlives the call that started it.
package partialbatch
