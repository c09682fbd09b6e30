package engine

import (
	"context"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// Names that the external tests (package engine_test) use and importing
// programs do not.
var ChunkMessageID = chunkMessageID

const (
	AttrFirst = attrFirst
	AttrLast  = attrLast
)

// Tasks plans obj into its chunk tasks, as RunNotified and the drivers do.
func (r *Runner) Tasks(ctx context.Context, runID string, obj dataset.Object, ov worktask.Overrides) ([]worktask.Task, error) {
	return r.tasks(ctx, runID, obj, ov)
}
