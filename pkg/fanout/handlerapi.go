package fanout

import (
	"context"
	"net/url"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// RunObject runs obj as a run of its own named runID, as Run runs any
// object (sent here when small enough, else queued as chunk tasks), and
// writes no manifest: a driver's run spans many invocations, each of
// which would overwrite it (see WriteInvocationReport).
func (r *Runner) RunObject(ctx context.Context, runID string, obj dataset.Object, ov Overrides) (Report, error) {
	one := func(yield func(dataset.Object, error) bool) { yield(obj, nil) }
	return r.run(ctx, runID, listed(one), ov, false, nil)
}

// RunChains runs tasks from the work queue as RunTasks does, and then,
// while ctx lasts, the next links of the chained ones (see
// worktask.Chain), each chain in order. Each result is its task's chain's.
func (r *Runner) RunChains(ctx context.Context, tasks []worktask.Task) []TaskResult {
	return r.runChains(ctx, tasks)
}

// WriteInvocationReport writes rep, what one invocation did in run
// rep.RunID, to <prefix>/<runId>/invocations/<id>.json of the run report.
// It writes nothing and returns nil when no run report is configured.
func (r *Runner) WriteInvocationReport(ctx context.Context, id string, rep Report, at time.Time) error {
	key := rep.RunID + "/invocations/" + url.PathEscape(id) + ".json"
	return r.report.put(ctx, key, Manifest{Report: rep, PlannedAt: at})
}
