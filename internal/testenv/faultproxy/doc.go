// Package faultproxy is a loopback HTTP proxy that sits between real AWS SDK
// clients and the local AWS stand-ins (fauxqs for SQS, moto_server for S3)
// and injects the faults AWS produces at scale, at set rates and from a
// seed, so that a chaos test can run the functions through it and account
// for every record.
//
// One [Proxy] serves one upstream: start one in front of fauxqs and point
// AWS_ENDPOINT_URL_SQS of the process under test at its URL, and another in
// front of moto_server for AWS_ENDPOINT_URL_S3. The test's own set-up and
// verification clients talk to the stand-ins directly, so that their
// polling is not disturbed; [Proxy.SetRates] turns faults off for a final
// drain through the proxy when that is wanted instead.
//
// # Requests
//
// A request is SQS when it carries `X-Amz-Target: AmazonSQS.<Op>` (the
// awsJson1_0 protocol that aws-sdk-go-v2's sqs client and fauxqs speak).
// SQS requests in the query protocol (form-encoded, `Action=`) and SNS
// requests are counted as "query:<Action>" and passed through untouched:
// nothing in this project sends them, and their fault shapes (XML) would be
// different. Every other request is S3 with path-style addressing, as the
// project's clients use against the stand-ins; its operation is taken from
// the `x-id` query parameter that aws-sdk-go-v2 adds (GetObject, PutObject,
// ...) or, without it, from the method and path (HeadObject, ListObjectsV2,
// ...).
//
// Faults apply only to the operations in [Options.Ops]; by default every
// SQS operation and S3's GetObject, HeadObject, ListObjectsV2 and PutObject.
//
// # Faults on the wire
//
// Each request draws at most one of the request faults, in proportion to
// its rate (the rates of one service must add up to at most 1):
//
//   - SQS500: HTTP 500, `{"__type":"com.amazonaws.sqs#InternalError",...}`
//     and `x-amzn-query-error: InternalError;Receiver`; not forwarded. The
//     SDK reports code InternalError and retries it (status 500).
//   - SQSThrottled: HTTP 403 (the status the SDK's SQS model gives it),
//     `{"__type":"com.amazonaws.sqs#RequestThrottled",...}` and
//     `x-amzn-query-error: RequestThrottled;Sender`; not forwarded. The SDK
//     returns *types.RequestThrottled, which its retryer treats as
//     throttling (code RequestThrottled).
//   - S3500: HTTP 500 with S3's XML error body (Code InternalError; no
//     body for HEAD); not forwarded.
//   - ResetBefore: the request is read, not forwarded, and the connection
//     is reset (RST, through SO_LINGER 0) without an answer.
//   - ResetAfter: the request is forwarded and takes effect, then the
//     connection is reset without an answer: the lost answer.
//   - BodyCut (S3 GetObject only): the request is forwarded; the status,
//     the headers (with the full Content-Length) and a random prefix of the
//     body, at least one byte short, are sent, then the connection is
//     closed. It is closed with FIN rather than RST so that the prefix
//     surely arrives before the end; the client's body read fails with
//     io.ErrUnexpectedEOF.
//
// Independently of those:
//
//   - EntryFailed (SQS SendMessageBatch): each entry is removed from the
//     request with this probability, and a Failed entry with Code
//     InternalError and SenderFault false is added to the answer for it.
//     The rest are forwarded; when none is left nothing is forwarded.
//   - Delay: the answer (or the injected error, or the reset) comes
//     Rates.DelayFor later. A forwarded request has taken effect by then;
//     if the client gives up during the delay, its answer is lost.
//   - DelayPerInFlight: every answer comes later by this much per request
//     the Proxy is handling when the request arrives: a server whose
//     latency rises with its load, for testing a sender's concurrency
//     control.
//
// # Load
//
// [Proxy.InFlight] returns the requests being handled and the bytes of
// their bodies, and [Stats] holds the peaks of both ([Proxy.ResetPeaks]
// starts them again), so that a test can check a sender's bounds on
// requests and bytes in flight where they meet the network.
//
// # Lost answers
//
// A SendMessage or SendMessageBatch that took effect but whose answer did
// not reach the client (ResetAfter, a client that had gone when the answer
// was ready, or a Close during a delay) is recorded entry by entry, and
// [Proxy.LostAnswers] returns them: those are the duplicates a correct
// sender cannot avoid. Only the entries the queue accepted are recorded.
//
// # Randomness
//
// All decisions come from one source seeded with [Options.Seed], drawn
// under a mutex in the order requests arrive. With one request at a time a
// seed gives the same faults every run; with concurrent requests the
// arrival order, and so which request gets which fault, varies, while the
// rates hold.
//
// # Signatures
//
// Removing entries changes the body of a signed request, and the proxy does
// not sign it again. fauxqs and moto_server (in its default mode) do not
// verify SigV4 signatures, so this does not matter here; it would against a
// stand-in that does.
//
// A Proxy is safe for concurrent use. It listens on 127.0.0.1 only and
// forwards only to a loopback address.
package faultproxy
