package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/awssetup"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/runstate"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// controlUsages are the usages of the commands that steer a run.
var controlUsages = map[string]string{
	"pause": `usage: s3sqs pause -run-id RUN -claims-table TABLE

Pauses a fanout run: each of its tasks stops before it sends, or at its
next chunk boundary, and goes back on the work queue with its progress,
without counting toward the work DLQ, to come back once the run is resumed.`,
	"cancel": `usage: s3sqs cancel -run-id RUN -claims-table TABLE

Cancels a fanout run: each of its tasks ends before it sends, or at its
next chunk boundary, counted as cancelled, and is parked in the claims
table with its progress; s3sqs resume takes them up again.`,
	"resume": `usage: s3sqs resume -run-id RUN -claims-table TABLE [-work-queue-url URL] [-max-failures N|P%|off]

Resumes a paused or cancelled fanout run: its paused tasks come back from
the work queue, and the tasks a cancel (or the run's failure budget)
parked are put back on the work queue (-work-queue-url, required when
some are parked), each once, with the failure budget given here if any.`,
	"set": `usage: s3sqs set -run-id RUN -claims-table TABLE -max-rate N

Changes a running fanout run's run-wide rate, in messages per second
across all its invocations; each takes it up when it next reads the run's
record, within seconds.`,
}

// controlCmd is the command line of pause, cancel, resume and set.
type controlCmd struct {
	name    string
	flags   *cmdFlags
	run     runFlags
	work    string
	maxRate string
	// maxFailures and maxFailedObjects are resume's new failure budget for
	// the parked tasks.
	maxFailures, maxFailedObjects string
	// force steers a run the table has no record of.
	force bool
}

// runControl returns the command name (pause, cancel, resume or set) that
// steers a run.
func runControl(name string) func(ctx context.Context, args []string, s streams) int {
	return func(ctx context.Context, args []string, s streams) int {
		return control(ctx, name, args, s.stdout, s.stderr)
	}
}

// control runs the command name.
func control(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	c := newControlCmd(name, stderr)
	if code, ok := c.parse(args, usageError(name, stderr)); !ok {
		return code
	}
	runs, err := c.run.open(ctx)
	if err == nil {
		err = c.do(ctx, runs, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3sqs %s: %v\n", name, err)
		return 1
	}
	return 0
}

// newControlCmd defines the flags of command name.
func newControlCmd(name string, stderr io.Writer) *controlCmd {
	c := &controlCmd{name: name, flags: newCmdFlags(name, controlUsages[name], stderr)}
	c.run.define(c.flags, name)
	c.flags.BoolVar(&c.force, "force", false, "steer the run even though the table has no record of it: a run that has just started writes its record when its first planning step or task settles")
	switch name {
	case "resume":
		c.flags.text(settings.WorkQueueURL, &c.work, "the work queue `URL` (the fanout function's WORK_QUEUE_URL) the parked tasks go back on")
		parsedText(c.flags, settings.MaxFailures, &c.maxFailures, "")
		parsedText(c.flags, settings.MaxFailedObjects, &c.maxFailedObjects, "")
	case "set":
		parsedText(c.flags, settings.MaxRate, &c.maxRate, "the run's new run-wide ceiling of `messages` per second, across all its invocations (required)")
	}
	return c
}

// parse reads the command line and checks it; it returns the exit code
// when the command cannot go on.
func (c *controlCmd) parse(args []string, bad func(string, ...any) int) (int, bool) {
	if code, ok := c.run.parse(c.flags, args, bad); !ok {
		return code, false
	}
	if c.name == "set" && c.maxRate == "" {
		return bad("name the run's new rate with -max-rate (messages per second)"), false
	}
	return 0, true
}

// do reads the run, then changes it as the command says and writes what
// happens next.
func (c *controlCmd) do(ctx context.Context, runs *runstate.Table, stdout, stderr io.Writer) error {
	before, err := c.run.get(ctx, runs)
	switch {
	case errors.Is(err, runstate.ErrNoRun) && !c.force:
		// Most often a mistyped id: steering it would change nothing, and
		// say it had.
		return fmt.Errorf("%w; nothing was changed (a run that has just started writes its record when its first planning step or task settles: -force steers it before that)", err)
	case errors.Is(err, runstate.ErrNoRun):
		// A run just started has no record yet, and steering it is still
		// what the user wants. The record made here expires as any.
		fmt.Fprintf(stderr, "s3sqs %s: run %s has written nothing to table %s yet; writing its record all the same (-force)\n",
			c.name, c.run.runID, c.run.table)
	case err != nil:
		return err
	}
	id := c.run.runID
	switch c.name {
	case "pause":
		if _, err := runs.SetState(ctx, id, runstate.StatePaused); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s is paused: each of its tasks stops before it sends or at its next chunk boundary, and goes back on the work queue with its progress, without counting toward the work DLQ.\n"+
			"They run again after `s3sqs resume -run-id %s -claims-table %s`.\n", id, id, c.run.table)
	case "cancel":
		if _, err := runs.SetState(ctx, id, runstate.StateCancelled); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s is cancelled: each of its tasks ends before it sends or at its next chunk boundary, counted as cancelled, and is parked in table %s with its progress.\n"+
			"`s3sqs resume -run-id %s -claims-table %s -work-queue-url URL` puts them back on the work queue.\n"+
			"A run sent by `s3sqs fanout` without -work-queue-url parks nothing: that command stops (exit 3), and `s3sqs resume -run-id %s -claims-table %s` then the same command continue it.\n",
			id, c.run.table, id, c.run.table, id, c.run.table)
	case "set":
		rate, _ := settings.MaxRate.Parse(c.maxRate) // checked by parse
		if _, err := runs.SetMaxRate(ctx, id, rate); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s: max rate %d messages/s across all its invocations; each takes it up when it next reads the run's record, within seconds.\n", id, rate)
	case "resume":
		return c.resume(ctx, runs, before, stdout)
	}
	return nil
}

// resume sets the run running and puts the tasks a cancel parked back on
// the work queue. It refuses before changing anything when tasks are
// parked and no work queue is named.
func (c *controlCmd) resume(ctx context.Context, runs *runstate.Table, before runstate.Run, stdout io.Writer) error {
	id := c.run.runID
	parked := max(before.Parked-before.Unparked, 0)
	if parked > 0 && c.work == "" {
		return fmt.Errorf("run %s has %d parked tasks: name the work queue they go back on with -work-queue-url (the fanout function's WORK_QUEUE_URL); the run was not changed", id, parked)
	}
	// The new budget first, in the run's record, for its tasks that were
	// not parked; then running: a task put back while the run is still
	// cancelled would be parked again.
	if c.maxFailures != "" || c.maxFailedObjects != "" {
		if _, err := runs.SetBudget(ctx, id, c.maxFailures, c.maxFailedObjects); err != nil {
			return err
		}
	}
	if _, err := runs.SetState(ctx, id, runstate.StateRunning); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s is running: its paused tasks take up where they stopped as the work queue delivers them again.\n", id)
	if c.work == "" {
		return nil
	}
	_, sqsc, err := awssetup.Clients(ctx, false)
	if err != nil {
		return err
	}
	if before.State == runstate.StateCancelled {
		// Tasks park while their invocations see the run cancelled: the
		// parked ones are put back once each has read it running again.
		fmt.Fprintf(stdout, "waiting %s for the run's invocations to see it running...\n", runstate.DefaultCheckEvery)
		select {
		case <-ctx.Done():
			return fmt.Errorf("before the parked tasks were put back: %w (resume again to put them back)", ctx.Err())
		case <-time.After(runstate.DefaultCheckEvery):
		}
	}
	n, err := runs.Unpark(ctx, id, func(ctx context.Context, n int64, body string) error {
		body, err := c.rebudget(body)
		if err != nil {
			return fmt.Errorf("parked task %d: %w", n, err)
		}
		return sendTask(ctx, sqsc, c.work, id, n, body)
	})
	fmt.Fprintf(stdout, "%d parked tasks put back on %s.\n", n, c.work)
	if err != nil {
		err = queueFlagError(err, map[string]string{engine.RoleWork: "-work-queue-url"}, "")
		return fmt.Errorf("put parked tasks back: %w (resume again to put back the rest: each is put back once)", err)
	}
	// A task that read the cancel just before the resume may have parked
	// after the wait.
	if after, err := runs.Get(ctx, id); err == nil && after.Parked > after.Unparked {
		fmt.Fprintf(stdout, "%d more tasks were parked meanwhile: resume again to put them back.\n", after.Parked-after.Unparked)
	}
	return nil
}

// sqsAPI is what resume needs of SQS.
type sqsAPI interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ sqsAPI = (*sqs.Client)(nil)

// sendTask sends runID's n-th parked work-queue message back to queue
// (see worktask.ParkedEntry).
func sendTask(ctx context.Context, c sqsAPI, queue, runID string, n int64, body string) error {
	e := worktask.ParkedEntry(runID, n, body, strings.HasSuffix(queue, ".fifo"))
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(e.Body)}
	if e.GroupID != "" {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(e.GroupID), aws.String(e.DeduplicationID)
	}
	if _, err := c.SendMessage(ctx, in); err != nil {
		return &engine.QueueError{Role: engine.RoleWork, Queue: queue, Err: err}
	}
	return nil
}

// rebudget returns body, a parked task or planning step, with the failure
// budget given to resume (-max-failures, -max-failed-objects), if any: a
// run stopped by its budget goes on with a higher one.
func (c *controlCmd) rebudget(body string) (string, error) {
	if c.maxFailures == "" && c.maxFailedObjects == "" {
		return body, nil
	}
	return worktask.WithBudget(body, worktask.LimitOf(c.maxFailures), worktask.LimitOf(c.maxFailedObjects))
}
