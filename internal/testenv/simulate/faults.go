package simulate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Rates are the chances of each fault, per call (per entry for
// EntryFailed, per GetObject body for BodyCut and BodyStall).
type Rates struct {
	// SQS: entries refused with a retryable code; requests answered 500,
	// throttled, reset before they took effect, reset after (a lost
	// answer), answered with a bad MD5 for one entry, or stalled until
	// the caller's deadline (and then taken or not).
	EntryFailed, SQS500, Throttled, ResetBefore, ResetAfter, BadMD5, SQSStall float64
	// S3: calls answered 500, bodies cut short or stalled, and
	// PutObjects (failure output, run report, offload) refused (SlowDown
	// after the SDK's retries) or reset after they took effect.
	S3500, BodyCut, BodyStall, PutRefused, PutLost float64
	// Claims: a claims store call that fails; a write to the runs' state
	// (counters, control, parking) that fails, as a throttled table's
	// does after the SDK's retries.
	ClaimsErr, RunsErr float64
}

// Faults decides the faults of one scenario. Each decision is a function
// of the seed, the call's content and how many times that content was
// called, not of the order of the calls, so that a seed replays the same
// faults whatever the goroutines do. It is safe for concurrent use.
type Faults struct {
	seed   uint64
	rates  Rates
	healed atomic.Bool

	mu    sync.Mutex
	calls map[uint64]uint64
	// lost holds the message ids SQS accepted in requests whose answers
	// were lost.
	lost  map[string]bool
	Stats FaultStats
}

// FaultStats counts the faults injected.
type FaultStats struct {
	EntryFailed, SQS500, Throttled, ResetBefore, ResetAfter, BadMD5, SQSStall int
	S3500, BodyCut, BodyStall, PutRefused, PutLost, ClaimsErr, RunsErr, Died  int
	// PutFailed counts the PutObject calls whose every attempt failed
	// (500s and lost answers): the caller sees an error as for PutRefused.
	PutFailed int
}

// NewFaults returns the faults of seed at rates.
func NewFaults(seed uint64, rates Rates) *Faults {
	return &Faults{seed: seed, rates: rates, calls: map[uint64]uint64{}, lost: map[string]bool{}}
}

// Heal stops every fault.
func (f *Faults) Heal() { f.healed.Store(true) }

// rng returns the random source of one call of op on content.
func (f *Faults) rng(op string, content ...string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(op))
	for _, c := range content {
		h.Write([]byte{0})
		h.Write([]byte(c))
	}
	k := h.Sum64()
	f.mu.Lock()
	n := f.calls[k]
	f.calls[k]++
	f.mu.Unlock()
	return rand.New(rand.NewPCG(f.seed^k, n))
}

func (f *Faults) count(p *int) {
	f.mu.Lock()
	*p++
	f.mu.Unlock()
}

// Lost reports whether SQS accepted message id in a request whose answer
// was lost.
func (f *Faults) Lost(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[id]
}

func (f *Faults) markLost(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.lost[id] = true
	}
}

// errReset is a connection reset, as the transport reports it.
func errReset(op string) error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET), Source: nil, Addr: nil}
}

// invocation is what the fault layer knows of the Lambda invocation a call
// belongs to: it can die after a number of calls, and it collects the
// messages accepted in it.
type invocation struct {
	id    int
	calls atomic.Int64
	dieAt int64 // 0: never
	die   context.CancelCauseFunc
	died  atomic.Bool
	// disrupted is set by a fault after which the engine, by design,
	// sends again some records it had sent: a send cut off at the
	// deadline (those accepted in requests in flight beside it), a claims
	// store call or a failure output write that failed.
	disrupted atomic.Bool
	mu        sync.Mutex
	sentTo    []string // message ids accepted during the invocation
}

type invocationKey struct{}

// errDied is the cause of an invocation's context when it dies.
var errDied = errors.New("simulate: the invocation died")

func withInvocation(ctx context.Context, inv *invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

func invocationOf(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

// disrupt marks ctx's invocation as disrupted (see invocation).
func disrupt(ctx context.Context) {
	if inv := invocationOf(ctx); inv != nil {
		inv.disrupted.Store(true)
	}
}

// tick counts a call of ctx's invocation and kills it at its dieAt-th
// call; it reports the context's error.
func (f *Faults) tick(ctx context.Context) error {
	if inv := invocationOf(ctx); inv != nil && inv.dieAt > 0 && !f.healed.Load() {
		if inv.calls.Add(1) == inv.dieAt {
			inv.died.Store(true)
			f.count(&f.Stats.Died)
			inv.die(errDied)
		}
	}
	return ctx.Err()
}

// FaultSQS is the SQS the engine talks to: the model behind Faults,
// reached through a real SQS client (see NewSQSClient).
type FaultSQS struct {
	M *SQSModel
	F *Faults
	// client is a real SQS client whose requests M answers.
	client *sqs.Client
}

// NewFaultSQS returns the model m behind f.
func NewFaultSQS(m *SQSModel, f *Faults) *FaultSQS {
	return &FaultSQS{M: m, F: f, client: NewSQSClient(m)}
}

// GetQueueUrl implements sqsbatch.API.
func (c *FaultSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	return c.client.GetQueueUrl(ctx, in, o...)
}

// GetQueueAttributes implements sqsbatch.API.
func (c *FaultSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	return c.client.GetQueueAttributes(ctx, in, o...)
}

// SendMessageBatch implements sqsbatch.API with the faults.
func (c *FaultSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		// The send is cut off (its deadline, or the invocation died):
		// the requests in flight beside this one may have been taken.
		disrupt(ctx)
		return nil, err
	}
	f, r := c.F, c.F.rates
	if f.healed.Load() {
		return c.send(ctx, in, o)
	}
	content := []string{aws.ToString(in.QueueUrl)}
	for _, e := range in.Entries {
		content = append(content, aws.ToString(e.Id), aws.ToString(e.MessageDeduplicationId), md5Hex(aws.ToString(e.MessageBody)))
	}
	rng := f.rng("SendMessageBatch", content...)
	x := rng.Float64()
	switch {
	case x < r.SQS500:
		f.count(&f.Stats.SQS500)
		return nil, sqsError(500, "InternalError", "injected")
	case x < r.SQS500+r.Throttled:
		f.count(&f.Stats.Throttled)
		return nil, sqsError(400, "ThrottlingException", "Rate exceeded")
	case x < r.SQS500+r.Throttled+r.ResetBefore:
		f.count(&f.Stats.ResetBefore)
		return nil, errReset("SendMessageBatch")
	case x < r.SQS500+r.Throttled+r.ResetBefore+r.ResetAfter:
		f.count(&f.Stats.ResetAfter)
		out, err := c.send(ctx, in, o)
		if err == nil {
			f.markLost(acceptedIDs(out)...)
		}
		return nil, errReset("SendMessageBatch")
	case x < r.SQS500+r.Throttled+r.ResetBefore+r.ResetAfter+r.SQSStall:
		if shortDeadline(ctx) {
			f.count(&f.Stats.SQSStall)
			disrupt(ctx)
			<-ctx.Done()
			if rng.IntN(2) == 0 {
				// It took effect before the caller gave up.
				out, err := c.send(context.WithoutCancel(ctx), in, o)
				if err == nil {
					f.markLost(acceptedIDs(out)...)
				}
			}
			return nil, ctx.Err()
		}
	}
	// Entries refused with a retryable code are not sent.
	var failed []types.BatchResultErrorEntry
	sent := *in
	sent.Entries = nil
	for _, e := range in.Entries {
		if rng.Float64() < r.EntryFailed {
			f.count(&f.Stats.EntryFailed)
			code := []string{"InternalError", "ServiceUnavailable", "ThrottlingException"}[rng.IntN(3)]
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("injected"), SenderFault: false})
			continue
		}
		sent.Entries = append(sent.Entries, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(sent.Entries) > 0 {
		sendCtx := ctx
		if rng.Float64() < r.BadMD5 {
			// The answer arrives with a wrong MD5 for its first
			// accepted entry: SQS has every message all the same.
			f.count(&f.Stats.BadMD5)
			sendCtx = context.WithValue(ctx, badMD5Key{}, f)
		}
		var err error
		if out, err = c.send(sendCtx, &sent, o); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// send sends to the model and notes the messages accepted during ctx's
// invocation.
func (c *FaultSQS) send(ctx context.Context, in *sqs.SendMessageBatchInput, o []func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := c.client.SendMessageBatch(ctx, in, o...)
	if err != nil && ctx.Err() != nil {
		// Cut off by the deadline, maybe after the model took it: an
		// answer lost.
		disrupt(ctx)
	}
	if inv := invocationOf(ctx); inv != nil && err == nil {
		inv.mu.Lock()
		inv.sentTo = append(inv.sentTo, acceptedIDs(out)...)
		inv.mu.Unlock()
	}
	return out, err
}

func acceptedIDs(out *sqs.SendMessageBatchOutput) []string {
	var ids []string
	for _, s := range out.Successful {
		ids = append(ids, aws.ToString(s.MessageId))
	}
	return ids
}

// FaultS3 is the S3 the engine talks to: the model behind Faults.
type FaultS3 struct {
	M *S3Model
	F *Faults
}

// ListObjectsV2 implements engine.S3API.
func (c *FaultS3) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	if !c.F.healed.Load() && c.F.rng("ListObjectsV2", aws.ToString(in.Bucket), aws.ToString(in.Prefix), aws.ToString(in.StartAfter), aws.ToString(in.ContinuationToken)).Float64() < c.F.rates.S3500 {
		c.F.count(&c.F.Stats.S3500)
		return nil, s3Error(500, "InternalError", "injected")
	}
	return c.M.ListObjectsV2(ctx, in, o...)
}

// HeadObject implements engine.S3API.
func (c *FaultS3) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	if !c.F.healed.Load() && c.F.rng("HeadObject", aws.ToString(in.Bucket), aws.ToString(in.Key), aws.ToString(in.VersionId)).Float64() < c.F.rates.S3500 {
		c.F.count(&c.F.Stats.S3500)
		return nil, s3Error(500, "InternalError", "injected")
	}
	return c.M.HeadObject(ctx, in, o...)
}

// GetObject implements engine.S3API: 500s, and bodies cut short or
// stalled until the caller's deadline.
func (c *FaultS3) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	if c.F.healed.Load() {
		return c.M.GetObject(ctx, in, o...)
	}
	f, r := c.F, c.F.rates
	rng := f.rng("GetObject", aws.ToString(in.Bucket), aws.ToString(in.Key), aws.ToString(in.VersionId), aws.ToString(in.IfMatch), aws.ToString(in.Range))
	if rng.Float64() < r.S3500 {
		f.count(&f.Stats.S3500)
		return nil, s3Error(500, "InternalError", "injected")
	}
	out, err := c.M.GetObject(ctx, in, o...)
	if err != nil {
		return nil, err
	}
	n := aws.ToInt64(out.ContentLength)
	x := rng.Float64()
	switch {
	case n > 0 && x < r.BodyCut:
		f.count(&f.Stats.BodyCut)
		out.Body = &cutBody{r: out.Body, left: rng.Int64N(n)}
	case n > 0 && x < r.BodyCut+r.BodyStall:
		if shortDeadline(ctx) {
			f.count(&f.Stats.BodyStall)
			out.Body = &stallBody{r: out.Body, left: rng.Int64N(n), ctx: ctx, closed: make(chan struct{})}
		}
	}
	return out, nil
}

// PutObject implements engine.S3API: refused (SlowDown, after the SDK's
// retries gave up), or failing for now (500, a reset after it took
// effect), which the SDK's retryer retries up to 3 attempts in all, as the
// real client would under the engine.
func (c *FaultS3) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	if c.F.healed.Load() {
		return c.M.PutObject(ctx, in, o...)
	}
	body, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	f, r := c.F, c.F.rates
	rng := f.rng("PutObject", aws.ToString(in.Bucket), aws.ToString(in.Key))
	if rng.Float64() < r.PutRefused {
		f.count(&f.Stats.PutRefused)
		disrupt(ctx)
		return nil, s3Error(503, "SlowDown", "injected: Please reduce your request rate.")
	}
	var last error
	for range 3 {
		again := *in
		again.Body = bytes.NewReader(body)
		switch x := rng.Float64(); {
		case x < r.S3500:
			f.count(&f.Stats.S3500)
			last = s3Error(500, "InternalError", "injected")
		case x < r.S3500+r.PutLost:
			f.count(&f.Stats.PutLost)
			if _, err := c.M.PutObject(ctx, &again, o...); err != nil {
				return nil, err
			}
			last = errReset("PutObject")
		default:
			return c.M.PutObject(ctx, &again, o...)
		}
	}
	// Every attempt failed: what the engine wrote with it must be written
	// again, and what it sent before may be sent again.
	f.count(&f.Stats.PutFailed)
	disrupt(ctx)
	return nil, last
}

// DeleteObject implements redrive.S3API.
func (c *FaultS3) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	return c.M.DeleteObject(ctx, in, o...)
}

// cutBody ends with a reset after left bytes.
type cutBody struct {
	r    io.ReadCloser
	left int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errReset("GetObject body")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cutBody) Close() error { return b.r.Close() }

// stallBody stops sending after left bytes, until its request's context
// ends or it is closed.
type stallBody struct {
	r      io.ReadCloser
	left   int64
	ctx    context.Context
	once   sync.Once
	closed chan struct{}
}

func (b *stallBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		select {
		case <-b.ctx.Done():
			return 0, fmt.Errorf("stalled body: %w", b.ctx.Err())
		case <-b.closed:
			return 0, errors.New("read on closed body")
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *stallBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.r.Close()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// seedOf mixes a scenario seed into the seed of one of its parts.
func seedOf(seed uint64, part string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(part))
	return h.Sum64()
}

// shortDeadline reports whether ctx ends soon, as an invocation's does:
// only then may a call stall until it ends.
func shortDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < 5*time.Second
}

// ListObjectVersions implements engine.S3API.
func (c *FaultS3) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, o ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	if err := c.F.tick(ctx); err != nil {
		return nil, err
	}
	if !c.F.healed.Load() && c.F.rng("ListObjectVersions", aws.ToString(in.Bucket), aws.ToString(in.Prefix), aws.ToString(in.KeyMarker), aws.ToString(in.VersionIdMarker)).Float64() < c.F.rates.S3500 {
		c.F.count(&c.F.Stats.S3500)
		return nil, s3Error(500, "InternalError", "injected")
	}
	return c.M.ListObjectVersions(ctx, in, o...)
}
