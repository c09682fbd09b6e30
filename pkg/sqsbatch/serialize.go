package sqsbatch

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// exactBodies is the client option of every SendMessageBatch the Sender
// makes: the request's JSON is written into one buffer of its exact size,
// and the MD5 of each accepted body is checked without copying the body,
// entry by entry (see bodyChecksums). The SDK's own encoder grows its buffer as it writes (by a quarter at a
// time once a body holds a character it escapes, as JSON records do: about
// five times a request's size in garbage) and then copies it, and its MD5
// check copies each body again; with requests of up to a MiB in flight,
// that was most of a run's memory.
func exactBodies(o *sqs.Options) {
	// Only SQS's JSON protocol: the body written is its JSON, and under
	// another protocol the SDK's own serializer stays.
	if o.Protocol != nil && o.Protocol.ID() == awsJSON10 {
		o.Protocol = exactBatchProtocol{o.Protocol}
	}
	if !o.DisableMessageChecksumValidation {
		o.DisableMessageChecksumValidation = true
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(bodyChecksums{}, middleware.Before)
		})
	}
}

// awsJSON10 is the protocol whose SendMessageBatch body batchBody writes.
var awsJSON10 = smithy.ShapeID{Namespace: "aws.protocols", Name: "awsJson1_0"}

// bodyChecksums checks, as the SDK does when its own check is on, that
// SQS's MD5 of each accepted body is the MD5 of the body sent. Where the
// SDK fails the whole call, which would report every entry of the request
// failed although SQS accepted the others, an entry whose MD5 does not
// match is moved from the answer's Successful to its Failed entries with
// code CodeMD5Mismatch, not the sender's fault: the Sender retries it as
// it retries a throttled entry, and counts the others accepted.
type bodyChecksums struct{}

func (bodyChecksums) ID() string { return "SQSBatchBodyChecksums" }

func (bodyChecksums) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	out, meta, err := next.HandleInitialize(ctx, in)
	if err != nil {
		return out, meta, err
	}
	input, ok1 := in.Parameters.(*sqs.SendMessageBatchInput)
	output, ok2 := out.Result.(*sqs.SendMessageBatchOutput)
	if !ok1 || !ok2 {
		return out, meta, nil
	}
	sums := md5Sums.Get().(*md5Sum)
	defer md5Sums.Put(sums)
	accepted := output.Successful[:0]
	for _, ok := range output.Successful {
		i := entryOf(aws.ToString(ok.Id), input.Entries)
		if i < 0 || input.Entries[i].MessageBody == nil || ok.MD5OfMessageBody == nil {
			accepted = append(accepted, ok)
			continue
		}
		if sum := sums.hex(*input.Entries[i].MessageBody); string(sum) != *ok.MD5OfMessageBody {
			output.Failed = append(output.Failed, md5Mismatch(ok.Id, *ok.MD5OfMessageBody, aws.ToString(ok.MessageId), sum))
			continue
		}
		accepted = append(accepted, ok)
	}
	output.Successful = accepted
	return out, meta, nil
}

// md5Mismatch is the failure of the accepted entry id, message messageID,
// whose body has the MD5 sum where SQS answered answered.
func md5Mismatch[S string | []byte](id *string, answered, messageID S, sum []byte) types.BatchResultErrorEntry {
	return types.BatchResultErrorEntry{
		Id:   id,
		Code: aws.String(CodeMD5Mismatch),
		Message: aws.String(fmt.Sprintf("SQS answered MD5 %s for message %s, but the body sent has MD5 %s",
			answered, messageID, sum)),
	}
}

// md5Sums holds the digests of the MD5 checks with their buffers, so that
// a check allocates nothing.
var md5Sums = sync.Pool{New: func() any { return &md5Sum{h: md5.New()} }}

// md5Sum computes MD5s in hex, copying what it reads a little at a time.
type md5Sum struct {
	h   hash.Hash
	buf [8 << 10]byte
	sum [md5.Size]byte
	out [2 * md5.Size]byte
}

// hex returns the MD5 of s in hex, in m's own buffer: valid until the
// next call.
func (m *md5Sum) hex(s string) []byte {
	m.h.Reset()
	for len(s) > 0 {
		n := copy(m.buf[:], s)
		m.h.Write(m.buf[:n])
		s = s[n:]
	}
	hex.Encode(m.out[:], m.h.Sum(m.sum[:0]))
	return m.out[:]
}

// exactBatchProtocol is the client's protocol, but for the bodies of
// SendMessageBatch requests, which it writes itself (see batchBody).
// Headers, signing, answers and every other operation are the protocol's.
type exactBatchProtocol struct {
	smithyhttp.ClientProtocol
}

// SerializeRequest lets the protocol build the request of an empty input
// (its method, path and headers), then sets the body to the input's JSON.
func (p exactBatchProtocol) SerializeRequest(ctx context.Context, schema *smithy.OperationSchema, in smithy.Serializable, req *smithyhttp.Request) error {
	batch, ok := in.(*sqs.SendMessageBatchInput)
	if !ok || !plainEntries(batch.Entries) {
		return p.ClientProtocol.SerializeRequest(ctx, schema, in, req)
	}
	if err := p.ClientProtocol.SerializeRequest(ctx, schema, &sqs.SendMessageBatchInput{}, req); err != nil {
		return err
	}
	sreq, err := req.SetStream(newBatchBody(batch))
	if err != nil {
		return err
	}
	*req = *sreq
	return nil
}

// plainEntries reports whether entries use only the members the Sender
// sets, which batchBody writes; others go through the SDK.
func plainEntries(entries []types.SendMessageBatchRequestEntry) bool {
	for i := range entries {
		if entries[i].MessageSystemAttributes != nil {
			return false
		}
		for _, a := range entries[i].MessageAttributes {
			if a.StringListValues != nil || a.BinaryListValues != nil {
				return false
			}
		}
	}
	return true
}
