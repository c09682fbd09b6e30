package sqsbatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// checkingClient stands in for SQS in the packer's fuzz test, where a
// network would make each run too slow to explore: it checks each request
// against SQS's limits, accepts entries, and fails the ones the fuzzer
// chose.
type checkingClient struct {
	sqsbatch.API
	t        *testing.T
	limit    int
	faults   map[string]byte // body -> fault kind
	mu       sync.Mutex
	accepted map[string]int
	attempts map[string]int
}

func (c *checkingClient) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(in.Entries); n == 0 || n > sqsbatch.MaxBatchEntries {
		c.t.Errorf("request has %d entries", n)
	}
	if size := requestSize(in.Entries); size > c.limit {
		c.t.Errorf("request carries %d bytes, over %d", size, c.limit)
	}
	ids := map[string]bool{}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		if id == "" || len(id) > 80 || ids[id] {
			c.t.Errorf("bad or repeated batch entry id %q", id)
		}
		ids[id] = true
		body := aws.ToString(e.MessageBody)
		c.attempts[body]++
		switch fault := c.faults[body]; {
		case fault == 1:
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), SenderFault: true})
		case fault == 2 && c.attempts[body] == 1:
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
		case fault == 3:
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
		default:
			c.accepted[body]++
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
		}
	}
	return out, nil
}

// FuzzPack checks that no request breaks a limit, and that every entry is
// either accepted once or failed once, never both.
func FuzzPack(f *testing.F) {
	f.Add(uint16(4096), false, []byte{1, 0, 0, 200, 1, 0, 255, 0, 1, 40, 2, 2, 90, 0, 3})
	f.Add(uint16(1024), true, []byte{255, 9, 0, 255, 9, 0, 0, 0, 0, 3, 3, 1})
	f.Add(uint16(0), false, []byte{})
	f.Fuzz(func(t *testing.T, limit uint16, fifo bool, data []byte) {
		maxSize := 1024 + int(limit)
		url := "http://127.0.0.1:1/000000000000/fuzz"
		if fifo {
			url += ".fifo"
		}
		c := &checkingClient{t: t, limit: maxSize, faults: map[string]byte{}, accepted: map[string]int{}, attempts: map[string]int{}}
		s, err := sqsbatch.New(t.Context(), c, sqsbatch.Queue{URL: url, MaxMessageSize: maxSize}, sqsbatch.Options{Backoff: noWait, MaxInFlight: 3, MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		var in []sqsbatch.Entry
		for i := 0; i+2 < len(data) && len(in) < 200; i += 3 {
			body := fmt.Sprintf("e%d-", i/3)
			// Sizes from a few bytes to a little over the limit.
			body += strings.Repeat("b", int(data[i])*maxSize/240)
			e := sqsbatch.Entry{ID: fmt.Sprint(i / 3), Body: body, GroupID: fmt.Sprint("g", data[i+2]%3)}
			for a := range int(data[i+1] % 12) {
				if e.Attributes == nil {
					e.Attributes = map[string]types.MessageAttributeValue{}
				}
				e.Attributes[fmt.Sprint("a", a)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("v", int(data[i+1])))}
			}
			c.faults[body] = data[i+2] % 4
			in = append(in, e)
		}
		res, err := s.SendEntries(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		failed := map[string]int{}
		for _, f := range res.Failures {
			failed[f.Entry.Body]++
		}
		for _, e := range in {
			if n := c.accepted[e.Body] + failed[e.Body]; n != 1 {
				t.Errorf("entry %s accepted %d and failed %d times", e.ID, c.accepted[e.Body], failed[e.Body])
			}
		}
		if res.Sent+res.Failed != len(in) || res.Failed != len(res.Failures) {
			t.Errorf("sent %d + failed %d != %d entries", res.Sent, res.Failed, len(in))
		}
	})
}
