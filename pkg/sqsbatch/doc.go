// Package sqsbatch sends entries to one Amazon SQS queue with
// SendMessageBatch, and accounts for every one of them: each entry is either
// accepted by SQS or reported as failed with its reason.
//
// A [Sender] packs entries into requests as full as SQS allows: at most ten
// entries and at most the queue's MaximumMessageSize bytes per request,
// counting the body and every message attribute's name, type and value as SQS
// does. With no failures, N small entries take exactly ceil(N/10) requests.
//
// Entries that SQS would reject (too large, characters outside the XML
// character ranges SQS accepts, invalid attributes, a FIFO entry without a
// message group) fail before any request with a [*ValidationError].
//
// Requests run in parallel, at most [Options.MaxInFlight] at once. Failed
// entries that SQS marks as the sender's fault are permanent; other failed
// entries, throttling, server errors and network errors are retried with
// exponential backoff and jitter. Errors that no retry can fix (a missing
// queue, denied access, bad credentials) stop the send with a [*StopError],
// and every entry not yet accepted is reported.
//
// A request holds nothing besides its entries: its JSON is written as it is
// read, from the entries' own strings, and the MD5 of each accepted body is
// checked without copying the body, where the SDK's encoder and check would
// copy each body and leave several times its size in garbage. Unlike the
// SDK's check, which fails the whole request, a mismatch fails only its
// entry: it is retried as a throttled entry is, and fails with
// [CodeMD5Mismatch] when its attempts run out, while the other entries of
// the answer count as accepted.
//
// On FIFO queues the entries of one message group are never in two requests
// in flight at once, so a retried entry keeps its place before the later
// entries of its group; when an entry fails for good, the later entries of
// its group fail too rather than reach SQS out of order.
package sqsbatch
