package worktask

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/s3sqs/s3sqs/pkg/settings"
)

// Limit is a bound of a run's failure budget as a request writes it: a
// count ("1000" or 1000), a share ("10%") or "off". The zero Limit is not
// given: the runner's setting applies.
type Limit struct {
	text  string
	value settings.LimitValue
}

// LimitOf returns the limit written as text. A text that is no limit is
// refused by Overrides.Validate.
func LimitOf(text string) Limit {
	v, _ := settings.MaxFailures.Parse(text)
	return Limit{text: text, value: v}
}

// IsZero reports whether the limit is not given.
func (l Limit) IsZero() bool { return l.text == "" }

// Exceeded reports whether failed of a whole of total passes the limit:
// a count, or a share once the whole is at least least (a share of a few
// says little). "off", or a limit not given, is never passed.
func (l Limit) Exceeded(failed, total, least int64) bool {
	v := l.value
	switch {
	case !v.On:
		return false
	case v.Percent > 0:
		return total >= least && float64(failed) > v.Percent/100*float64(total)
	}
	return failed > v.Count
}

// Equal reports whether l and o are written alike, which go-cmp uses to
// compare overrides.
func (l Limit) Equal(o Limit) bool { return l == o }

// String returns the limit as it was written.
func (l Limit) String() string { return l.text }

// UnmarshalJSON takes a JSON number or string.
func (l *Limit) UnmarshalJSON(b []byte) error {
	text, err := writtenAs(b, reflect.TypeFor[string]())
	*l = LimitOf(text)
	return err
}

// MarshalJSON writes the limit as a JSON string.
func (l Limit) MarshalJSON() ([]byte, error) { return json.Marshal(l.text) }

// validate checks the limit as the variable of row r is checked.
func (l *Limit) validate(r settings.Limit) error {
	if l.IsZero() {
		return nil
	}
	v, err := r.Parse(l.text)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Field, err)
	}
	l.value = v
	return nil
}

// WithBudget returns body, the message of a task or planning step, with
// the failure budget maxFailures and maxFailedObjects, each where it is
// given: a run its budget stopped goes on with a higher one once its
// parked messages carry it.
func WithBudget(body string, maxFailures, maxFailedObjects Limit) (string, error) {
	set := func(ov *Overrides) *Overrides {
		if ov == nil {
			ov = &Overrides{}
		}
		if !maxFailures.IsZero() {
			ov.MaxFailures = maxFailures
		}
		if !maxFailedObjects.IsZero() {
			ov.MaxFailedObjects = maxFailedObjects
		}
		return ov
	}
	t, err := Parse(body)
	if errors.Is(err, ErrNotTask) {
		p, err := ParsePlan(body)
		if err != nil {
			return "", err
		}
		p.Overrides = set(p.Overrides)
		b, err := json.Marshal(p)
		return string(b), err
	}
	if err != nil {
		return "", err
	}
	t.Overrides = set(t.Overrides)
	return t.Marshal()
}
