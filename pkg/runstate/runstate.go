package runstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/internal/ddbattr"
)

// State is where a run stands, as its control record says.
type State string

// States. A run with no control record, or whose record holds no state,
// is StateRunning.
const (
	StateRunning   State = "running"
	StatePaused    State = "paused"
	StateCancelled State = "cancelled"
)

// ErrNoRun reports that the table holds nothing of the run.
var ErrNoRun = errors.New("runstate: no such run")

// Counters are what a run's tasks and planning steps add up as they
// settle. Add adds each field with one ADD; each is kept in the number
// attribute of the run record named by its JSON name. TasksCancelled
// counts the tasks a cancel parked (see Park); TasksStopped those of a run
// sent in one process, without a work queue, that a cancel ended: nothing
// keeps them, and the run started again plans them again.
type Counters struct {
	TasksPlanned     int64 `json:"tasksPlanned"`
	TasksDone        int64 `json:"tasksDone"`
	TasksFailed      int64 `json:"tasksFailed"`
	TasksSkipped     int64 `json:"tasksSkipped"`
	TasksHeld        int64 `json:"tasksHeld"`
	TasksCancelled   int64 `json:"tasksCancelled"`
	TasksStopped     int64 `json:"tasksStopped"`
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
	// ObjectsArchived and BytesArchived count what planning left out as
	// archived (see engine.Stats).
	ObjectsArchived int64 `json:"objectsArchived"`
	BytesArchived   int64 `json:"bytesArchived"`
	// ObjectsFailed counts the chunks of objects that could not be read
	// to their end for a reason no retry fixes (see engine.Stats).
	ObjectsFailed int64 `json:"objectsFailed"`
	// ObjectsFiltered and BytesFiltered count what the source's filters
	// left out, and FilteredBy the objects by filter (see engine.Stats);
	// each filter's count is an attribute of its own.
	ObjectsFiltered int64            `json:"objectsFiltered"`
	BytesFiltered   int64            `json:"bytesFiltered"`
	FilteredBy      map[string]int64 `json:"filteredBy,omitempty"`
}

// IsZero reports whether every counter of c is 0.
func (c Counters) IsZero() bool {
	v := reflect.ValueOf(c)
	for i, attr := range counterAttrs {
		if attr != "" && v.Field(i).Int() != 0 {
			return false
		}
	}
	return len(c.FilteredBy) == 0
}

// Run is what the table holds of a run.
type Run struct {
	ID    string `json:"runId"`
	State State  `json:"state"`
	// MaxRate is the run-wide rate in messages per second that `s3sqs set`
	// gave it while it runs; 0 means the rate the run started with.
	MaxRate int64 `json:"maxRate,omitempty"`
	// MaxFailures and MaxFailedObjects are the failure budget that
	// `s3sqs resume` gave the run (see SetBudget), as text ("off", "1000",
	// "10%"); empty means the one it started with.
	MaxFailures      string `json:"maxFailures,omitempty"`
	MaxFailedObjects string `json:"maxFailedObjects,omitempty"`
	// Started is when the first write of the run was made; Updated the
	// last.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Parked is how many tasks a cancel parked, and Unparked how many of
	// them a resume put back on the work queue.
	Parked   int64 `json:"parked,omitempty"`
	Unparked int64 `json:"unparked,omitempty"`
	// Reason says why the run stopped itself (see Stop); it is empty once
	// the run is set to any state.
	Reason string `json:"reason,omitempty"`
	// FailureCodes counts the run's failed records by failure code (see
	// Tally).
	FailureCodes map[string]int64 `json:"failureCodes,omitempty"`
	Counters
}

// The attributes of a run's items, beside claims.KeyAttribute and
// claims.ExpiresAttribute. Times are Unix milliseconds.
const (
	stateAttr    = "state"
	maxRateAttr  = "maxRate"
	failuresAttr = "maxFailures"
	objectsAttr  = "maxFailedObjects"
	startedAttr  = "started"
	updatedAttr  = "updated"
	parkedAttr   = "parked"
	unparkedAttr = "unparked"
	takenAttr    = "taken"  // in a budget window
	bodyAttr     = "body"   // in a parked message
	passedAttr   = "passed" // in a parked message Unpark passed over before Park wrote it
	reasonAttr   = "reason"
	// failedPrefix starts the attribute that counts the failed records of
	// one failure code, and filteredPrefix the objects one filter left
	// out: ADD works on top-level attributes only.
	failedPrefix   = "failed#"
	filteredPrefix = "filtered#"
)

// counterAttrs are the attribute names of Counters' number fields, by
// field index: their JSON names, so that the record and `s3sqs status
// -json` say the same; empty for FilteredBy.
var counterAttrs = func() []string {
	t := reflect.TypeFor[Counters]()
	names := make([]string, t.NumField())
	for i := range names {
		if t.Field(i).Type.Kind() == reflect.Int64 {
			names[i] = t.Field(i).Tag.Get("json")
		}
	}
	return names
}()

// TableOptions configures a Table. The zero value is ready to use.
type TableOptions struct {
	// TTL is how long after its last write a run's record and its parked
	// messages are kept (DynamoDB deletes them some time after, through
	// the table's TTL on claims.ExpiresAttribute); zero means
	// claims.DefaultTTL. A resume after that finds nothing to put back.
	TTL time.Duration
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Table keeps runs in the claims table name, under keys that start with
// "run#" and the run id. Run ids must not hold '#' (settings.CheckRunID
// allows none), so that no run's keys are another's. A Table is safe for
// concurrent use, and so is a run shared by many processes: each write is
// one UpdateItem that DynamoDB applies atomically.
type Table struct {
	client API
	name   string
	ttl    time.Duration
	now    func() time.Time
}

// NewTable returns the Table of runs in the claims table name.
func NewTable(client API, name string, opts TableOptions) *Table {
	t := &Table{client: client, name: name, ttl: opts.TTL, now: opts.Now}
	if t.ttl <= 0 {
		t.ttl = claims.DefaultTTL
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// Get returns the run, read strongly consistent, or ErrNoRun.
func (t *Table) Get(ctx context.Context, runID string) (Run, error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.name), Key: key(runKey(runID)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Run{}, fmt.Errorf("runstate: read run %s in table %s: %w", runID, t.name, err)
	}
	if out.Item == nil {
		return Run{}, fmt.Errorf("%w: %s in table %s", ErrNoRun, runID, t.name)
	}
	return decodeRun(runID, out.Item), nil
}

// SetState sets the run's state, creating its record if need be, and
// returns the record as it now is.
func (t *Table) SetState(ctx context.Context, runID string, s State) (Run, error) {
	switch s {
	case StateRunning, StatePaused, StateCancelled:
	default:
		return Run{}, fmt.Errorf("runstate: set run %s to %q: not a state", runID, s)
	}
	return t.set(ctx, runID, stateAttr, ddbattr.String(string(s)))
}

// Stop cancels the run, as SetState does, with why it stopped itself, and
// reports whether it did: a run paused or cancelled already is left as it
// is, so that the first reason stays and an operator's state wins.
func (t *Table) Stop(ctx context.Context, runID, reason string) (bool, error) {
	now := t.now()
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(t.name),
		Key:                 key(runKey(runID)),
		UpdateExpression:    aws.String("SET #state = :cancelled, #reason = :reason, " + touch),
		ConditionExpression: aws.String("attribute_not_exists(#state) OR #state = :running"),
		ExpressionAttributeNames: map[string]string{
			"#state": stateAttr, "#reason": reasonAttr, "#started": startedAttr, "#updated": updatedAttr, "#expires": claims.ExpiresAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":cancelled": ddbattr.String(string(StateCancelled)), ":running": ddbattr.String(string(StateRunning)), ":reason": ddbattr.String(reason),
			":now": ddbattr.Millis(now), ":expires": ddbattr.Number(now.Add(t.ttl).Unix()),
		},
	})
	switch {
	case ddbattr.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("runstate: stop run %s in table %s: %w", runID, t.name, err)
	}
	return true, nil
}

// SetMaxRate sets the run's rate in messages per second, creating its
// record if need be, and returns the record as it now is. Rate 0 goes back
// to the rate the run started with.
func (t *Table) SetMaxRate(ctx context.Context, runID string, rate int64) (Run, error) {
	if rate < 0 {
		return Run{}, fmt.Errorf("runstate: set the rate of run %s to %d: below 0", runID, rate)
	}
	return t.set(ctx, runID, maxRateAttr, ddbattr.Number(rate))
}

// SetBudget sets the run's failure budget, maxFailures and
// maxFailedObjects as a Limit's text, each when not empty, creating its
// record if need be, and returns the record as it now is. Its tasks judge
// their failures by it from then on, those on their way too.
func (t *Table) SetBudget(ctx context.Context, runID, maxFailures, maxFailedObjects string) (Run, error) {
	var run Run
	for _, b := range [...]struct{ attr, v string }{{failuresAttr, maxFailures}, {objectsAttr, maxFailedObjects}} {
		if b.v == "" {
			continue
		}
		var err error
		if run, err = t.set(ctx, runID, b.attr, ddbattr.String(b.v)); err != nil {
			return Run{}, err
		}
	}
	if run.ID == "" {
		return t.Get(ctx, runID)
	}
	return run, nil
}

// set sets attribute attr of the run record to v. A state set removes the
// reason of a stop (see Stop).
func (t *Table) set(ctx context.Context, runID, attr string, v types.AttributeValue) (Run, error) {
	now := t.now()
	update := "SET #attr = :v, " + touch
	names := map[string]string{"#attr": attr, "#started": startedAttr, "#updated": updatedAttr, "#expires": claims.ExpiresAttribute}
	if attr == stateAttr {
		update += " REMOVE #reason"
		names["#reason"] = reasonAttr
	}
	out, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(t.name),
		Key:                      key(runKey(runID)),
		UpdateExpression:         aws.String(update),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v": v, ":now": ddbattr.Millis(now), ":expires": ddbattr.Number(now.Add(t.ttl).Unix()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return Run{}, fmt.Errorf("runstate: set %s of run %s in table %s: %w", attr, runID, t.name, err)
	}
	return decodeRun(runID, out.Attributes), nil
}

// touch is the part of an update of the run record that every write
// makes; it needs the names #started, #updated, #expires and the values
// :now and :expires.
const touch = "#started = if_not_exists(#started, :now), #updated = :now, #expires = :expires"

// Add adds c to the run's counters in one UpdateItem, creating the run's
// record if need be. It makes no call when every counter of c is 0.
func (t *Table) Add(ctx context.Context, runID string, c Counters) error {
	_, err := t.Tally(ctx, runID, c, nil)
	return err
}

// Tally adds c to the run's counters, and failures (failed records by
// failure code) to its FailureCodes, in one UpdateItem, creating the run's
// record if need be, and returns the run as the update left it. It makes
// no call, and returns the zero Run, when there is nothing to add.
func (t *Table) Tally(ctx context.Context, runID string, c Counters, failures map[string]int64) (Run, error) {
	u, ok := t.addition(runID, c, failures)
	if !ok {
		return Run{}, nil
	}
	out, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 u.TableName,
		Key:                       u.Key,
		UpdateExpression:          u.UpdateExpression,
		ExpressionAttributeNames:  u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return Run{}, fmt.Errorf("runstate: add to the counters of run %s in table %s: %w", runID, t.name, err)
	}
	return decodeRun(runID, out.Attributes), nil
}

// addition is the update of the run record that adds c to its counters,
// and failures to its failure codes; ok is false when there is nothing to
// add.
func (t *Table) addition(runID string, c Counters, failures map[string]int64) (u types.Update, ok bool) {
	now := t.now()
	names := map[string]string{"#started": startedAttr, "#updated": updatedAttr, "#expires": claims.ExpiresAttribute}
	values := map[string]types.AttributeValue{":now": ddbattr.Millis(now), ":expires": ddbattr.Number(now.Add(t.ttl).Unix())}
	add := ""
	adds := func(p, attr string, n int64) {
		if n == 0 {
			return
		}
		if add != "" {
			add += ", "
		}
		add += "#" + p + " :" + p
		names["#"+p] = attr
		values[":"+p] = ddbattr.Number(n)
	}
	v := reflect.ValueOf(c)
	for i, attr := range counterAttrs {
		if attr != "" {
			adds("c"+strconv.Itoa(i), attr, v.Field(i).Int())
		}
	}
	for i, code := range slices.Sorted(maps.Keys(failures)) {
		adds("f"+strconv.Itoa(i), failedPrefix+code, failures[code])
	}
	for i, by := range slices.Sorted(maps.Keys(c.FilteredBy)) {
		adds("x"+strconv.Itoa(i), filteredPrefix+by, c.FilteredBy[by])
	}
	if add == "" {
		return types.Update{}, false
	}
	return types.Update{
		TableName:                 aws.String(t.name),
		Key:                       key(runKey(runID)),
		UpdateExpression:          aws.String("SET " + touch + " ADD " + add),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, true
}

func decodeRun(runID string, item map[string]types.AttributeValue) Run {
	r := Run{
		ID:          runID,
		State:       State(ddbattr.Text(item[stateAttr])),
		MaxRate:     ddbattr.Int(item[maxRateAttr]),
		MaxFailures: ddbattr.Text(item[failuresAttr]), MaxFailedObjects: ddbattr.Text(item[objectsAttr]),
		Started:  ddbattr.Time(item[startedAttr]),
		Updated:  ddbattr.Time(item[updatedAttr]),
		Parked:   ddbattr.Int(item[parkedAttr]),
		Unparked: ddbattr.Int(item[unparkedAttr]),
	}
	r.State = cmp.Or(r.State, StateRunning)
	v := reflect.ValueOf(&r.Counters).Elem()
	for i, attr := range counterAttrs {
		if attr != "" {
			v.Field(i).SetInt(ddbattr.Int(item[attr]))
		}
	}
	r.Reason = ddbattr.Text(item[reasonAttr])
	r.FailureCodes, r.FilteredBy = prefixed(item, failedPrefix), prefixed(item, filteredPrefix)
	return r
}

// prefixed returns the numbers of item's attributes named with prefix, by
// the rest of their names; nil when it has none.
func prefixed(item map[string]types.AttributeValue, prefix string) map[string]int64 {
	var m map[string]int64
	for attr, av := range item {
		if name, ok := strings.CutPrefix(attr, prefix); ok {
			if m == nil {
				m = map[string]int64{}
			}
			m[name] = ddbattr.Int(av)
		}
	}
	return m
}

func runKey(runID string) string { return "run#" + runID }

func parkedKey(runID string, n int64) string {
	return runKey(runID) + "#parked#" + strconv.FormatInt(n, 10)
}

func key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{claims.KeyAttribute: ddbattr.String(k)}
}
