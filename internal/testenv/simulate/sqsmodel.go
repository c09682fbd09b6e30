package simulate

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// dedupWindow is how long a FIFO queue remembers a deduplication id.
const dedupWindow = 5 * time.Minute

// maxBatchBytes is SQS's limit on a SendMessageBatch's bodies and
// attributes together.
const maxBatchBytes = 1 << 20

// SQSModel is an in-process SQS: standard and FIFO queues with
// MaximumMessageSize, SendMessageBatch with SQS's per-entry checks and
// FIFO deduplication within 5 minutes on a simulated clock, MD5s in its
// answers, GetQueueUrl, GetQueueAttributes, and receive and delete for the
// queues the simulation drives. It is safe for concurrent use.
type SQSModel struct {
	mu     sync.Mutex
	queues map[string]*queue // by URL
	clock  time.Time
	seq    int
}

// Message is a message a queue accepted.
type Message struct {
	ID         string
	Body       string
	Attributes map[string]string
	GroupID    string
	DedupID    string
	// Receives counts the times it was received.
	Receives int
	// at is when it was accepted, for ordering.
	seq int
}

type queue struct {
	name, url  string
	fifo       bool
	contentDup bool
	maxSize    int
	// all is every message accepted, in order; ready those not yet
	// deleted nor in flight.
	all     []*Message
	ready   []*Message
	dedup   map[string]time.Time
	deduped int
}

// QueueURLPrefix is the base of the model's queue URLs.
const QueueURLPrefix = "https://sqs.us-east-1.amazonaws.com/000000000000/"

// NewSQSModel returns an SQS without queues whose clock starts at start.
func NewSQSModel(start time.Time) *SQSModel {
	return &SQSModel{queues: map[string]*queue{}, clock: start}
}

// CreateQueue makes a queue (FIFO when name ends in .fifo) and returns its
// URL. maxSize 0 means 1 MiB.
func (m *SQSModel) CreateQueue(name string, maxSize int, contentBasedDedup bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if maxSize == 0 {
		maxSize = 1 << 20
	}
	q := &queue{name: name, url: QueueURLPrefix + name, fifo: strings.HasSuffix(name, ".fifo"), contentDup: contentBasedDedup,
		maxSize: maxSize, dedup: map[string]time.Time{}}
	m.queues[q.url] = q
	return q.url
}

// Advance moves the simulated clock on by d.
func (m *SQSModel) Advance(d time.Duration) {
	m.mu.Lock()
	m.clock = m.clock.Add(d)
	m.mu.Unlock()
}

// Messages returns every message url's queue accepted, in order.
func (m *SQSModel) Messages(url string) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.queues[url].all)
}

// Deduplicated counts the entries url's queue accepted as duplicates of a
// deduplication id it had seen within 5 minutes.
func (m *SQSModel) Deduplicated(url string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.queues[url].deduped
}

// Receive takes up to n ready messages of url's queue, in order, and counts
// the receive. They stay invisible until Delete or Return.
func (m *SQSModel) Receive(url string, n int) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[url]
	n = min(n, len(q.ready))
	out := slices.Clone(q.ready[:n])
	q.ready = q.ready[n:]
	for _, msg := range out {
		msg.Receives++
	}
	return out
}

// Pending returns the messages of url that wait to be received.
func (m *SQSModel) Pending(url string) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.queues[url]; q != nil {
		return slices.Clone(q.ready)
	}
	return nil
}

// Return makes received messages visible again (their visibility timeout
// ran out), at the front of the queue, in order.
func (m *SQSModel) Return(url string, msgs []*Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[url]
	q.ready = append(slices.Clone(msgs), q.ready...)
}

// Ready counts url's visible messages.
func (m *SQSModel) Ready(url string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.queues[url]; q != nil {
		return len(q.ready)
	}
	return 0
}

// Push puts a message (one moved from a dead-letter queue) at the end of
// url's queue.
func (m *SQSModel) Push(url string, msg *Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[url]
	q.ready = append(q.ready, msg)
}

// nextSeq returns a new sequence number, for message ids.
func (m *SQSModel) nextSeq() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	return m.seq
}

// sqsError is an error as the SDK returns it for an SQS error answer.
func sqsError(status int, code, msg string) error {
	fault := smithy.FaultClient
	if status >= 500 {
		fault = smithy.FaultServer
	}
	return &smithy.OperationError{ServiceID: "SQS", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault}},
	}}
}

func (m *SQSModel) queue(url string) (*queue, error) {
	q := m.queues[url]
	if q == nil {
		return nil, sqsError(400, "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
	}
	return q, nil
}

// GetQueueUrl finds a queue by name.
func (m *SQSModel) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q, err := m.queue(QueueURLPrefix + aws.ToString(in.QueueName))
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
}

// GetQueueAttributes answers MaximumMessageSize, FifoQueue,
// ContentBasedDeduplication and QueueArn.
func (m *SQSModel) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q, err := m.queue(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	all := map[string]string{
		"MaximumMessageSize": strconv.Itoa(q.maxSize),
		"QueueArn":           "arn:aws:sqs:us-east-1:000000000000:" + q.name,
	}
	if q.fifo {
		// Standard queues do not have these attributes.
		all["FifoQueue"] = "true"
		all["ContentBasedDeduplication"] = strconv.FormatBool(q.contentDup)
	}
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if v, ok := all[string(n)]; ok {
			out[string(n)] = v
		} else if n == types.QueueAttributeNameAll {
			out = all
			break
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// entrySize is what SQS counts of an entry: its body and each attribute's
// name, type and value. It and validChars are written apart from
// pkg/sqsbatch's own rules on purpose: the model judges the sender, and
// TestConformanceSQS holds both to the stand-in.
func entrySize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// validChars reports whether s holds only the characters SQS accepts:
// #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func validChars(s string) bool {
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			return false
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// SendMessageBatch checks the request as SQS does (1 to 10 entries with
// distinct ids, 1 MiB in all), then each entry (size, characters, FIFO
// group and deduplication ids), and accepts the rest. A FIFO entry whose
// deduplication id the queue saw in the last 5 minutes is answered as
// accepted but not stored.
func (m *SQSModel) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q, err := m.queue(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	switch n := len(in.Entries); {
	case n == 0:
		return nil, sqsError(400, "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one SendMessageBatchRequestEntry in the request.")
	case n > 10:
		return nil, sqsError(400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", fmt.Sprintf("Maximum number of entries per request are 10. You have sent %d.", n))
	}
	ids := map[string]bool{}
	total := 0
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		if ids[id] {
			return nil, sqsError(400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id "+id+" repeated.")
		}
		ids[id] = true
		total += entrySize(e)
	}
	if total > maxBatchBytes {
		return nil, sqsError(400, "AWS.SimpleQueueService.BatchRequestTooLong", "Batch requests cannot be longer than 1048576 bytes.")
	}
	out := &sqs.SendMessageBatchOutput{}
	fail := func(e types.SendMessageBatchRequestEntry, code, msg string) {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String(msg), SenderFault: true})
	}
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		switch {
		case body == "":
			fail(e, "InvalidParameterValue", "The request must contain the parameter MessageBody.")
			continue
		case entrySize(e) > q.maxSize:
			fail(e, "InvalidParameterValue", fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.maxSize))
			continue
		case !validChars(body):
			fail(e, "InvalidMessageContents", "Invalid characters found.")
			continue
		}
		group, dedup := aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId)
		if q.fifo {
			if group == "" {
				fail(e, "MissingParameter", "The request must contain the parameter MessageGroupId.")
				continue
			}
			if dedup == "" {
				if !q.contentDup {
					fail(e, "InvalidParameterValue", "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
					continue
				}
				sum := sha256Hex(body)
				dedup = sum
			}
		}
		m.seq++
		msgID := fmt.Sprintf("%08x-0000-4000-8000-%012x", m.seq, m.seq)
		ok := types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(msgID), MD5OfMessageBody: aws.String(md5Hex(body))}
		if q.fifo {
			ok.SequenceNumber = aws.String(fmt.Sprintf("%020d", m.seq))
			if until, seen := q.dedup[dedup]; seen && m.clock.Before(until) {
				q.deduped++
				out.Successful = append(out.Successful, ok)
				continue
			}
			q.dedup[dedup] = m.clock.Add(dedupWindow)
		}
		msg := &Message{ID: msgID, Body: body, GroupID: group, DedupID: dedup, seq: m.seq, Attributes: map[string]string{}}
		for k, v := range e.MessageAttributes {
			msg.Attributes[k] = aws.ToString(v.StringValue)
		}
		q.all = append(q.all, msg)
		q.ready = append(q.ready, msg)
		out.Successful = append(out.Successful, ok)
	}
	return out, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
