package partialbatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-lambda-go/events"
)

// UnexpectedEventError reports a payload that is not an SQS event, and says
// what it is instead: the function is probably wired to the wrong trigger.
type UnexpectedEventError struct {
	// Kind is what the payload looked like, for example "empty payload",
	// "null", "empty object", "no records", "invalid JSON", "JSON array",
	// "S3 event", "S3 test event", "SNS event", "SNS message" (an SNS
	// envelope), "EventBridge event", "Kinesis event", "event from another
	// source" or "unexpected object".
	Kind string
	// Detail is the evidence, for example `Records[0].eventSource "aws:s3"`;
	// it may be empty.
	Detail string
	// Err is the JSON decoder's error, if there was one.
	Err error
}

// Error implements error.
func (e *UnexpectedEventError) Error() string {
	msg := "partialbatch: the payload is not an SQS event, got: " + e.Kind
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg + "; check the function's trigger"
}

// Unwrap returns the JSON decoder's error, or nil.
func (e *UnexpectedEventError) Unwrap() error { return e.Err }

// Decode reads a Lambda payload as an SQS event: a JSON object whose Records
// hold at least one record, each with eventSource "aws:sqs". Anything else
// (null, {}, an S3, SNS or EventBridge event, {"Records":[]}, one record
// from another source) is an *UnexpectedEventError that says what it is
// instead, rather than an empty batch that would succeed. Decode never
// panics.
func Decode(payload []byte) (events.SQSEvent, error) {
	if err := classify(payload); err != nil {
		return events.SQSEvent{}, err
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return events.SQSEvent{}, &UnexpectedEventError{Kind: "malformed SQS event", Detail: err.Error(), Err: err}
	}
	return ev, nil
}

// classify returns nil when payload looks like an SQS event, or an
// *UnexpectedEventError that says what it is.
func classify(payload []byte) *UnexpectedEventError {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 {
		return &UnexpectedEventError{Kind: "empty payload"}
	}
	if !json.Valid(p) {
		err := json.Unmarshal(p, new(any))
		return &UnexpectedEventError{Kind: "invalid JSON", Detail: err.Error(), Err: err}
	}
	switch p[0] {
	case 'n':
		return &UnexpectedEventError{Kind: "null"}
	case '[':
		return &UnexpectedEventError{Kind: "JSON array"}
	case '"':
		return &UnexpectedEventError{Kind: "JSON string"}
	case 't', 'f':
		return &UnexpectedEventError{Kind: "JSON boolean"}
	case '{':
	default:
		return &UnexpectedEventError{Kind: "JSON number"}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return &UnexpectedEventError{Kind: "invalid JSON", Detail: err.Error(), Err: err}
	}
	if len(obj) == 0 {
		return &UnexpectedEventError{Kind: "empty object"}
	}
	// Decoded as events.SQSEvent decodes it, so that field names match the
	// same way (encoding/json ignores case).
	var top struct {
		Records     json.RawMessage `json:"Records"`
		EventSource string          `json:"eventSource"`
	}
	_ = json.Unmarshal(p, &top) // a field of another type just stays empty
	var records []json.RawMessage
	recordsErr := json.Unmarshal(top.Records, &records)
	switch {
	case top.EventSource != "" && top.EventSource != "aws:sqs": // Kafka and MQ events
		return &UnexpectedEventError{Kind: sourceKind(top.EventSource), Detail: fmt.Sprintf("eventSource %q", top.EventSource)}
	case top.Records == nil:
		return classifyObject(obj)
	case recordsErr != nil:
		return &UnexpectedEventError{Kind: "unexpected object", Detail: "Records is not an array", Err: recordsErr}
	case len(records) == 0:
		return &UnexpectedEventError{Kind: "no records", Detail: "Records is empty"}
	}
	for i, raw := range records {
		var r struct {
			EventSource string `json:"eventSource"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return &UnexpectedEventError{Kind: "malformed record", Detail: fmt.Sprintf("Records[%d]: %v", i, err), Err: err}
		}
		if r.EventSource != "aws:sqs" {
			return &UnexpectedEventError{Kind: sourceKind(r.EventSource), Detail: fmt.Sprintf("Records[%d].eventSource %q", i, r.EventSource)}
		}
	}
	return nil
}

// classifyObject names a JSON object without Records.
func classifyObject(obj map[string]json.RawMessage) *UnexpectedEventError {
	str := func(key string) string {
		var s string
		_ = json.Unmarshal(obj[key], &s)
		return s
	}
	switch {
	case obj["detail-type"] != nil:
		return &UnexpectedEventError{Kind: "EventBridge event", Detail: fmt.Sprintf("source %q, detail-type %q", str("source"), str("detail-type"))}
	case str("Event") == "s3:TestEvent":
		return &UnexpectedEventError{Kind: "S3 test event", Detail: `Event "s3:TestEvent"`}
	case obj["TopicArn"] != nil:
		return &UnexpectedEventError{Kind: "SNS message", Detail: fmt.Sprintf("Type %q, TopicArn %q", str("Type"), str("TopicArn"))}
	}
	keys := slices.Sorted(maps.Keys(obj))
	if len(keys) > 5 {
		keys = append(keys[:5], "...")
	}
	return &UnexpectedEventError{Kind: "unexpected object", Detail: fmt.Sprintf("keys %q", keys)}
}

// sourceKind names the kind of event of an eventSource other than "aws:sqs".
func sourceKind(source string) string {
	switch source {
	case "":
		return "record without eventSource"
	case "aws:s3":
		return "S3 event"
	case "aws:sns":
		return "SNS event"
	case "aws:dynamodb":
		return "DynamoDB stream event"
	case "aws:kinesis":
		return "Kinesis event"
	case "aws:kafka", "SelfManagedKafka":
		return "Kafka event"
	}
	return "event from another source"
}
