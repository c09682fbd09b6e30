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
// Requests run in parallel, as many at once as the Sender's limit allows.
// Failed entries that SQS marks as the sender's fault are permanent; other failed
// entries, throttling, server errors and network errors are retried with
// exponential backoff and jitter. Errors that no retry can fix (a missing
// queue, denied access, bad credentials) stop the send with a [*StopError],
// and every entry not yet accepted is reported.
//
// # Requests in flight
//
// How many requests should be in flight depends on the latency: on
// loopback 16 keep SQS busy, in a Region a request takes 10-30 ms and 16
// requests of ten entries carry at most 8,000 entries/s at 20 ms. So the
// limit sizes itself, per Sender (its concurrent Sends share it, and it
// lasts from one Send to the next, as a warm Lambda keeps what it learnt),
// in the way of TCP's congestion control and of the AIMD strategies of
// Flink's async sink and Netflix's concurrency-limits:
//
//   - It starts at 16 (or [Options.MaxInFlight] if lower) and grows by
//     one per clean answer, doubling every round trip, until the first
//     decrease; after that by one per round trip. It grows only while the
//     limit is in use (a request waited for a slot, or every slot was
//     taken) and the latency holds: an exponentially weighted mean of the
//     last answers' latencies stays within three times the baseline, or
//     the baseline plus 10 ms if that is more, so that loopback's fraction of
//     a millisecond does not stop it.
//   - A throttle (ThrottlingException, RequestThrottled, SQS's KMS
//     throttles), an HTTP 5xx, or an entry failed with such a code halves
//     it; latency past the tolerance lowers it by 10 %. Either happens at
//     most once per round trip: only a request sent after the last
//     decrease can cause the next, so that a burst of throttles halves it
//     once. The floor is 1.
//   - The baseline is the fastest answer seen. It moves up, to follow a
//     network that became slower, when a whole window of 256 answers was
//     slower than the tolerance while the limit was no higher than when
//     the baseline was set; latency that rose because the limit grew does
//     not move it, so that the limit settles where the service starts to
//     queue instead of running to the ceiling.
//
// The limit never exceeds [Options.MaxInFlight] (default 256, which
// carries about 50,000 entries/s at 50 ms), and the requests in flight
// never hold more than [Options.MaxBytesInFlight] (default 32 MiB) counting
// their entries and 96 KiB per request, so that requests of 1 MiB cannot
// take a small function past its memory; a request larger than that goes
// alone. [Options.FixedInFlight] turns the controller off.
// [Sender.InFlightLimit] returns the limit, and [Result.PeakInFlight] and
// [Result.Throttled] say what a Send met.
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
// # Requests made without the client's middleware
//
// Given a *sqs.Client, a Sender makes its SendMessageBatch requests itself
// with the client's parts: the endpoint its resolver gives (resolved once,
// in New), its credentials, its SigV4 signer and its HTTP client. It
// writes the body the client would write and signs the headers the client
// would sign, and it makes of an answer what the client would: the same
// output, and for an error the error the client's own protocol makes of
// it, wrapped as the client wraps it, so that codes, HTTP status and retry
// classes are the client's. What it leaves out is the client's middleware
// stack, built anew on every call: 420 allocations and four times the CPU
// of the request itself, most of a small entry's cost. A client with
// something a caller added that must see every request (API options such
// as tracing middleware, interceptors, request logging, a legacy endpoint
// resolver) or with anonymous credentials is used as it is, through its
// SendMessageBatch, as is any other [API], and so is a request whose
// entries carry list attributes. Requests made here are signed at the
// service's time as the answers' Date headers tell it (unless the client
// has DisableClockSkewCorrection), and one refused for its signing time
// is signed again and sent at once, as the client's retryer does; they are
// not otherwise retried underneath: [Options.MaxAttempts] are the only
// attempts, and the controller sees every throttle. They carry no
// X-Amzn-Trace-Id header of Lambda's trace and a shorter User-Agent than
// the client's.
//
// On FIFO queues the entries of one message group are never in two requests
// in flight at once, so a retried entry keeps its place before the later
// entries of its group; when an entry fails for good, the later entries of
// its group fail too rather than reach SQS out of order.
package sqsbatch
