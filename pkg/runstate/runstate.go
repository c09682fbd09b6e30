package runstate

import (
	"context"
	"errors"
	"time"

	"github.com/s3sqs/s3sqs/pkg/claims"
)

// State is where a run stands, as its control record says.
type State string

// States. The zero State is StateRunning: a run with no control record
// runs.
const (
	StateRunning   State = "running"
	StatePaused    State = "paused"
	StateCancelled State = "cancelled"
)

// ErrNoRun reports that the table holds nothing of the run.
var ErrNoRun = errors.New("runstate: no such run")

// Counters are what a run's tasks and planning steps add up as they
// settle. Add adds each field with one ADD.
type Counters struct {
	TasksPlanned     int64 `json:"tasksPlanned"`
	TasksDone        int64 `json:"tasksDone"`
	TasksFailed      int64 `json:"tasksFailed"`
	TasksSkipped     int64 `json:"tasksSkipped"`
	TasksHeld        int64 `json:"tasksHeld"`
	TasksCancelled   int64 `json:"tasksCancelled"`
	StepsQueued      int64 `json:"stepsQueued"`
	StepsDone        int64 `json:"stepsDone"`
	Objects          int64 `json:"objects"`
	BytesPlanned     int64 `json:"bytesPlanned"`
	BytesRead        int64 `json:"bytesRead"`
	RecordsRead      int64 `json:"recordsRead"`
	RecordsSent      int64 `json:"recordsSent"`
	RecordsFailed    int64 `json:"recordsFailed"`
	RecordsOffloaded int64 `json:"recordsOffloaded"`
	Messages         int64 `json:"messages"`
	Requests         int64 `json:"requests"`
}

// Run is what the table holds of a run.
type Run struct {
	ID    string `json:"runId"`
	State State  `json:"state"`
	// MaxRate is the run-wide rate in messages per second that `s3sqs set`
	// gave it while it runs; 0 means the rate the run started with.
	MaxRate int64 `json:"maxRate,omitempty"`
	// Started is when the first write of the run was made; Updated the
	// last.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Parked is how many tasks a cancel parked, and Unparked how many of
	// them a resume put back on the work queue.
	Parked   int64 `json:"parked,omitempty"`
	Unparked int64 `json:"unparked,omitempty"`
	Counters
}

// TableOptions configures a Table. The zero value is ready to use.
type TableOptions struct {
	// TTL is how long after its last write a run's items are kept;
	// zero means claims.DefaultTTL.
	TTL time.Duration
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Table keeps runs in the claims table name.
type Table struct {
	client claims.API
	name   string
	ttl    time.Duration
	now    func() time.Time
}

// NewTable returns the Table of runs in the claims table name.
func NewTable(client claims.API, name string, opts TableOptions) *Table {
	panic("todo")
}

// Get returns the run, read strongly consistent, or ErrNoRun.
func (t *Table) Get(ctx context.Context, runID string) (Run, error) { panic("todo") }

// SetState sets the run's state, creating its record if need be.
func (t *Table) SetState(ctx context.Context, runID string, s State) (Run, error) { panic("todo") }

// SetMaxRate sets the run's rate in messages per second.
func (t *Table) SetMaxRate(ctx context.Context, runID string, rate int64) (Run, error) { panic("todo") }

// Add adds c to the run's counters in one UpdateItem.
func (t *Table) Add(ctx context.Context, runID string, c Counters) error { panic("todo") }

// Take takes up to n messages from the run's budget of the second that
// holds at: as many as the window of that second has left below limit.
// It returns how many it took (0 when the window is spent).
func (t *Table) Take(ctx context.Context, runID string, at time.Time, n, limit int64) (int64, error) {
	panic("todo")
}

// Park keeps body, a work-queue message of a cancelled run, for Unpark.
func (t *Table) Park(ctx context.Context, runID string, body string) error { panic("todo") }

// Unpark calls put with each parked message not yet put back, in the
// order they were parked, and records each that put took.
func (t *Table) Unpark(ctx context.Context, runID string, put func(ctx context.Context, body string) error) (int64, error) {
	panic("todo")
}
