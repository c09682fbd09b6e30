package faultproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// sqsContentType is the content type of SQS's JSON protocol.
const sqsContentType = "application/x-amz-json-1.0"

// sqsError is an error answer of SQS's JSON protocol. SQS is "query
// compatible": besides __type it sends the query protocol's code and fault
// in x-amzn-query-error, and aws-sdk-go-v2 takes the error code from that
// header when present, so both must name the code the SDK classifies by.
type sqsError struct {
	status    int
	code      string // __type is "com.amazonaws.sqs#" + code
	queryCode string
	fault     string // "Sender" or "Receiver"
}

var (
	sqsInternalError = sqsError{http.StatusInternalServerError, "InternalError", "InternalError", "Receiver"}
	// RequestThrottled is in aws-sdk-go-v2's DefaultThrottleErrorCodes; the
	// SQS model gives it HTTP 403.
	sqsThrottled = sqsError{http.StatusForbidden, "RequestThrottled", "RequestThrottled", "Sender"}
)

func (e sqsError) write(w http.ResponseWriter, requestID string) {
	body, _ := json.Marshal(map[string]string{
		"__type":  "com.amazonaws.sqs#" + e.code,
		"message": "injected by faultproxy",
	})
	h := w.Header()
	h.Set("Content-Type", sqsContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amzn-Requestid", requestID)
	h.Set("X-Amzn-Query-Error", e.queryCode+";"+e.fault)
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// batchRequest is a SendMessageBatch request body, kept raw so that
// removing entries leaves every other field as the client sent it.
type batchRequest struct {
	fields  map[string]json.RawMessage
	entries []json.RawMessage
	ids     []string
}

func parseBatch(body []byte) (*batchRequest, error) {
	b := &batchRequest{}
	if err := json.Unmarshal(body, &b.fields); err != nil {
		return nil, fmt.Errorf("SendMessageBatch body: %w", err)
	}
	if err := json.Unmarshal(b.fields["Entries"], &b.entries); err != nil {
		return nil, fmt.Errorf("SendMessageBatch entries: %w", err)
	}
	b.ids = make([]string, len(b.entries))
	for i, raw := range b.entries {
		var e struct{ Id string }
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("SendMessageBatch entry %d: %w", i, err)
		}
		b.ids[i] = e.Id
	}
	return b, nil
}

// without returns the request body without the entries fail marks, and
// the Failed entries the answer must carry for them.
func (b *batchRequest) without(fail []bool) (body []byte, failed []json.RawMessage, err error) {
	var kept []json.RawMessage
	for i, raw := range b.entries {
		if !fail[i] {
			kept = append(kept, raw)
			continue
		}
		f, err := json.Marshal(struct {
			Id          string
			Code        string
			Message     string
			SenderFault bool
		}{b.ids[i], "InternalError", "injected by faultproxy", false})
		if err != nil {
			return nil, nil, err
		}
		failed = append(failed, f)
	}
	fields := make(map[string]json.RawMessage, len(b.fields))
	for k, v := range b.fields {
		fields[k] = v
	}
	if fields["Entries"], err = json.Marshal(kept); err != nil {
		return nil, nil, err
	}
	body, err = json.Marshal(fields)
	return body, failed, err
}

// addFailed adds failed to the Failed entries of a SendMessageBatch answer.
// With a nil answer it makes the answer of a request that was not sent.
func addFailed(answer []byte, failed []json.RawMessage) ([]byte, error) {
	fields := map[string]json.RawMessage{"Successful": json.RawMessage("[]")}
	if answer != nil {
		if err := json.Unmarshal(answer, &fields); err != nil {
			return nil, fmt.Errorf("SendMessageBatch answer: %w", err)
		}
	}
	var all []json.RawMessage
	if raw, ok := fields["Failed"]; ok {
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, fmt.Errorf("SendMessageBatch answer Failed: %w", err)
		}
	}
	all = append(all, failed...)
	var err error
	if fields["Failed"], err = json.Marshal(all); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// LostEntry is a message that reached its queue but whose answer did not
// reach the sender, which will therefore send it again: a duplicate that
// no sender can avoid.
type LostEntry struct {
	// Op is SendMessage or SendMessageBatch.
	Op string
	// QueueURL is the queue the message went to, as the request named it.
	QueueURL string
	// ID is the entry's Id in a SendMessageBatch; empty for SendMessage.
	ID string
	// Body is the message body.
	Body string
	// Attributes holds the message attributes that have a string value
	// (types String and Number); binary ones are left out.
	Attributes map[string]string
}

type sendEntry struct {
	Id                string
	MessageBody       string
	MessageAttributes map[string]struct{ StringValue *string }
}

func (e sendEntry) lost(op, queueURL string) LostEntry {
	l := LostEntry{Op: op, QueueURL: queueURL, ID: e.Id, Body: e.MessageBody}
	for k, v := range e.MessageAttributes {
		if v.StringValue == nil {
			continue
		}
		if l.Attributes == nil {
			l.Attributes = map[string]string{}
		}
		l.Attributes[k] = *v.StringValue
	}
	return l
}

// lostEntries returns the messages of a SendMessage or SendMessageBatch
// whose request body was sent and whose answer was answer: for a batch,
// only the entries the answer lists as Successful.
func lostEntries(op string, sent, answer []byte) ([]LostEntry, error) {
	var req struct {
		QueueUrl string
		Entries  []sendEntry
		sendEntry
	}
	if err := json.Unmarshal(sent, &req); err != nil {
		return nil, fmt.Errorf("%s body: %w", op, err)
	}
	if op == "SendMessage" {
		return []LostEntry{req.sendEntry.lost(op, req.QueueUrl)}, nil
	}
	var out struct{ Successful []struct{ Id string } }
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, fmt.Errorf("%s answer: %w", op, err)
	}
	ok := make(map[string]bool, len(out.Successful))
	for _, s := range out.Successful {
		ok[s.Id] = true
	}
	var lost []LostEntry
	for _, e := range req.Entries {
		if ok[e.Id] {
			lost = append(lost, e.lost(op, req.QueueUrl))
		}
	}
	return lost, nil
}
