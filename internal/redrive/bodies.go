package redrive

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// sendBodies sends the records whose whole body the failure output holds,
// as the engine sent them: the body, the record id, and in fanout's
// encoding the source and version attributes; on a FIFO target the
// object's group and the record id as deduplication id. A body too large
// for the target goes as an SQS Extended Client pointer when an offload
// bucket is set. A dry run prepares each entry the same way (offloading
// nothing) and says what the real run would send or refuse.
func (r *Redriver) sendBodies(ctx context.Context, ps []*pending, pace *pace) {
	var entries []sqsbatch.Entry
	var sending []*pending
	for _, p := range ps {
		e, how, err := r.entryOf(ctx, p)
		switch {
		case err != nil && r.opts.DryRun:
			p.item.Outcome, p.item.Reason = Failed, "a real run would not send it: "+err.Error()
		case err != nil:
			p.item.Outcome, p.item.Reason = Failed, err.Error()
		case r.opts.DryRun:
			p.item.Outcome, p.item.Reason = WouldSend, how
		default:
			entries, sending = append(entries, e), append(sending, p)
		}
	}
	if len(entries) == 0 {
		return
	}
	if err := pace.wait(ctx, len(entries)); err != nil {
		for _, p := range sending {
			p.item.Outcome, p.item.Reason = Failed, "not sent: "+err.Error()
		}
		return
	}
	res, _ := r.target.SendEntries(ctx, entries)
	failed := map[int]*sqsbatch.EntryError{}
	for _, f := range res.Failures {
		failed[f.Seq] = f
	}
	for i, p := range sending {
		if f, ok := failed[i]; ok {
			p.item.Outcome, p.item.Reason = Failed, f.Code+": "+f.Message
			continue
		}
		p.item.Outcome, p.item.Reason = Sent, ""
	}
}

// entryOf returns the entry that sends p's body, offloaded to S3 when it
// must be, and how it goes; or why the target would refuse it, as its
// Send would before any request.
func (r *Redriver) entryOf(ctx context.Context, p *pending) (sqsbatch.Entry, string, error) {
	e := r.bodyEntry(p)
	how := "its body as the failure output holds it"
	if r.offload != nil {
		out, offloaded, err := r.offload.Entry(ctx, p.item.ID, e)
		if err != nil {
			return sqsbatch.Entry{}, "", fmt.Errorf("not offloaded: %w", err)
		}
		if offloaded {
			e, how = out, how+", as an SQS Extended Client pointer to its body in S3"
		}
	}
	if f := r.target.Check(e); f != nil {
		return sqsbatch.Entry{}, "", errors.New(f.Code + ": " + f.Message)
	}
	return e, how, nil
}

func (r *Redriver) bodyEntry(p *pending) sqsbatch.Entry {
	id := p.item.ID
	attrs := map[string]types.MessageAttributeValue{engine.AttrRecordID: stringAttr(id)}
	if r.opts.Ingest == nil {
		attrs[engine.AttrSource] = stringAttr(p.obj.URI())
		if v := p.obj.Pin(); v != "" {
			attrs[engine.AttrVersion] = stringAttr(v)
		}
	}
	e := sqsbatch.Entry{Body: p.f.Body, Attributes: attrs}
	if r.target.FIFO() {
		e.GroupID, e.DeduplicationID = engine.GroupID(p.obj), id
	}
	return e
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// newOffloader returns the offloader of the target's records that opts
// name, or nil without an offload bucket. A dry run's writes nothing.
func newOffloader(s3c sqsextended.OffloadAPI, target *sqsbatch.Sender, opts Options) (*sqsextended.Offloader, error) {
	if opts.Offload.S3URI == "" || target == nil {
		return nil, nil
	}
	o := sqsextended.OffloaderOptions{Mode: opts.Offload.Mode, KMSKeyID: opts.Offload.KMSKeyID, MaxMessageSize: target.MaxMessageSize()}
	var err error
	if o.Bucket, o.Prefix, err = dataset.ParseS3URI(opts.Offload.S3URI); err != nil {
		return nil, fmt.Errorf("redrive: offload: %w", err)
	}
	if opts.DryRun {
		s3c = sqsextended.Discard
	}
	return sqsextended.NewOffloader(s3c, o)
}
