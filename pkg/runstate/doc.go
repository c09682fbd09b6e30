// Package runstate keeps what a fanout run shares across its invocations:
// its control record (running, paused or cancelled, and a rate set while
// it runs), the counters that each task and planning step adds to as it
// settles, a run-wide budget of messages per second, and the tasks a
// cancel parked for a resume.
//
// A run's items live in the claims table (see pkg/claims) beside its
// claims, under keys that start with "run#" and the run id, so that the
// functions need no table or permission beyond the claims table's
// GetItem and UpdateItem. Every write is one UpdateItem: counters with
// ADD, so that concurrent invocations never lose one another's counts,
// and the budget with a conditional ADD on the window of the current
// second, so that the sum over all invocations keeps to the rate whatever
// their number.
package runstate
