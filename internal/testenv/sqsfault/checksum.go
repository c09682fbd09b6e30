package sqsfault

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// BadChecksums is an HTTP client for a real SQS client
// ([sqs.Options.HTTPClient]) that garbles, in the answers of
// SendMessageBatch, the MD5OfMessageBody of the accepted entries that Bad
// chooses, as a body garbled on its way to SQS would: the queue holds the
// message, and the client sees a checksum that is not its body's. It sits
// under the SDK's middleware, so that the client's own checks see the
// garbled answer. It is safe for concurrent use.
type BadChecksums struct {
	// Next sends the requests; if nil, http.DefaultClient does.
	Next sqs.HTTPClient
	// Bad is asked for each entry an answer reports accepted, with its
	// body and the number of answers that have reported that body
	// accepted so far (from 1); true garbles its MD5.
	Bad func(body string, answer int) bool

	mu      sync.Mutex
	answers map[string]int
}

// Do sends r and garbles the answer as Bad chooses.
func (c *BadChecksums) Do(r *http.Request) (*http.Response, error) {
	next := c.Next
	if next == nil {
		next = http.DefaultClient
	}
	if r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" || r.Body == nil {
		return next.Do(r)
	}
	reqBody, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("sqsfault: read request: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }
	var req struct {
		Entries []struct{ Id, MessageBody string }
	}
	if err := json.Unmarshal(reqBody, &req); err != nil {
		return nil, fmt.Errorf("sqsfault: SendMessageBatch request: %w", err)
	}
	bodies := make(map[string]string, len(req.Entries))
	for _, e := range req.Entries {
		bodies[e.Id] = e.MessageBody
	}

	resp, err := next.Do(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("sqsfault: read answer: %w", err)
	}
	answer, err = c.garble(answer, bodies)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	resp.ContentLength = int64(len(answer))
	resp.Header.Set("Content-Length", strconv.Itoa(len(answer)))
	return resp, nil
}

// garble rewrites the MD5 of the accepted entries Bad chooses, keeping
// every other member of the answer as SQS wrote it.
func (c *BadChecksums) garble(answer []byte, bodies map[string]string) ([]byte, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, fmt.Errorf("sqsfault: SendMessageBatch answer: %w", err)
	}
	var accepted []map[string]any
	if err := json.Unmarshal(out["Successful"], &accepted); err != nil {
		return nil, fmt.Errorf("sqsfault: SendMessageBatch answer: %w", err)
	}
	c.mu.Lock()
	if c.answers == nil {
		c.answers = map[string]int{}
	}
	for _, e := range accepted {
		id, _ := e["Id"].(string)
		body, ok := bodies[id]
		if !ok {
			continue
		}
		c.answers[body]++
		if c.Bad != nil && c.Bad(body, c.answers[body]) {
			sum := md5.Sum([]byte("garbled " + body))
			e["MD5OfMessageBody"] = hex.EncodeToString(sum[:])
		}
	}
	c.mu.Unlock()
	raw, err := json.Marshal(accepted)
	if err != nil {
		return nil, err
	}
	out["Successful"] = raw
	return json.Marshal(out)
}
