// Package simulate looks for the next data-safety bug before users do, in
// the spirit of FoundationDB's simulation testing and Jepsen's checkers:
// a seeded generator makes scenarios (objects in JSON Lines, CSV and text,
// compressed by name or by Content-Encoding (some cut short), with BOMs, CRLF, quoted
// newlines, bare quotes, ragged rows, empty objects, multi-byte text,
// records near and over the queue's size limit, versioned buckets; engine
// settings: record and chunk mode, chunk sizes, standard and FIFO targets,
// offload, claims, requests in flight, a standard or FIFO work queue,
// deadlines), drives the
// real engine (fanouthandler.Handler over engine.Runner) end to end against
// in-process models of S3, SQS and the claims store with faults at every
// call (per-entry failures, 5xx, throttles, resets before and after the
// request took effect, bad MD5s, cut and stalled bodies, refused and lost
// PutObjects, claims store errors, deadlines, invocations that die
// part-way, duplicate deliveries), heals the faults, and checks the
// promise against an oracle computed from the generated data:
//
//   - every readable record is delivered at least once, under one record
//     id whatever path sent it, with its bytes;
//   - every unreadable one is on the failure output with its code and
//     offset, and exactly once in the run report of each run;
//   - nothing is delivered that is not in the data;
//   - with claims, a record arrives more than once per run only if a
//     request that carried it had its answer lost (a reset after SQS took
//     it, a bad MD5, an invocation that died), or it was sent by an
//     invocation that met a fault after which the engine resends by
//     design (a send cut off at the deadline, a claims store call or a
//     PutObject that failed after the SDK's retries);
//   - no offloaded payload object is ever rewritten with other bytes;
//   - nothing is left in the work queue's dead-letter queue;
//   - with the control plane (Settings.Control: pause, resume, cancel and
//     rate actions on the runs, whose state a DynamoDB model keeps), no
//     run is done while a task of it waits undone on the work queue, and
//     at the end each run counts every chunk it planned done, once; a
//     third of the direct requests have a failure budget of 0, which
//     their first failure spends, and the operator resumes such a run
//     with the budget off: a record may then come once more per try to
//     stop its run (what a stopped task sent after its first failure);
//   - with replays and reconciles (Scenario.Reconciles: a fanout run in
//     notification mode to s3ingest's queue, and `s3sqs reconcile` of the
//     prefix while the faults last and once all settled), every record of
//     every object they announce is delivered, and a reconcile after the
//     one that sent the rest finds no object missing.
//
// The engine reaches the SQS model through a real SQS client over an
// in-process transport, so that its serializer and MD5 check run; S3 and
// the claims store are reached through their Go interfaces. The models
// answer as the stand-ins do on the calls the engine makes (see
// TestConformanceSQS, TestConformanceS3, TestConformanceDynamo and
// TestConformanceClaims). Faults are drawn from the seed
// and each call's content, not the order of the calls; scenarios with
// deadlines still depend on real time, so a few seeds replay only most of
// the time. TestSimulate runs 200 seeds (SIMULATE_SEEDS or -seeds
// more; `make simulate SEEDS=N`); every failing seed prints the command
// that replays it. -off turns classes of data, faults or settings off, for
// work on one bug while another is unfixed.
package simulate
