package redrive

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/awserr"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// pending is a failure output record on its way.
type pending struct {
	f engine.Failure
	// obj is the record's object, pinned as the failure says (its
	// version id or ETag, in Pin), for its record id.
	obj  dataset.Object
	item Item
	// dupOf is the record of this run with the same record id, which is
	// sent in its stead.
	dupOf *pending
	// msg is the failure queue message that holds it.
	msg string
	// sentBefore: a message sent earlier in this run had the same record.
	sentBefore bool
}

// delivered reports whether the record reached the target in this run,
// itself or as the duplicate of one that did.
func (p *pending) delivered() bool {
	if p.sentBefore {
		return true
	}
	if p.dupOf != nil {
		return p.dupOf.item.Outcome == Sent
	}
	return p.item.Outcome == Sent
}

// newPending reads a failure output record; the item says why when it is
// not one (Outcome Skipped).
func newPending(body []byte, from string) *pending {
	p := &pending{item: Item{From: from}}
	if err := json.Unmarshal(body, &p.f); err != nil || p.f.Source == "" {
		err = cmp.Or(err, errors.New("no source"))
		p.item.Outcome, p.item.Reason = Skipped, "not a failure record: "+err.Error()
		return p
	}
	bucket, key, err := dataset.ParseS3URI(p.f.Source)
	if err != nil {
		p.item.Outcome, p.item.Reason = Skipped, "not a failure record: source: "+err.Error()
		return p
	}
	p.obj = dataset.Object{Bucket: bucket, Key: key, VersionID: p.f.Version}
	// The id the engine gave the record or message; a failure written
	// before failures named it has the id the engine gave then, from the
	// version id (or ETag) Version holds.
	p.item.ID = cmp.Or(p.f.RecordID, engine.RecordID(p.obj, p.f.Offset))
	p.item.Source, p.item.Offset, p.item.Code = p.f.Source, new(p.f.Offset), p.f.Code
	return p
}

// choose applies the code filter; it reports whether p is still to send.
func (r *Redriver) choose(p *pending) bool {
	if p.item.Outcome != "" {
		return false
	}
	if ok, why := r.opts.Codes.allows(p.f.Code); !ok {
		p.item.Outcome, p.item.Reason = Skipped, why
		return false
	}
	return true
}

// sendFailures sends the records of ps still to send (no Outcome yet),
// each once per record id, and sets every one's outcome.
func (r *Redriver) sendFailures(ctx context.Context, ps []*pending, pace *pace) {
	first := map[string]*pending{}
	var direct, again []*pending
	for _, p := range ps {
		if p.item.Outcome != "" {
			continue
		}
		p.item.To = r.opts.TargetQueueURL
		if q, ok := first[p.item.ID]; ok {
			p.dupOf = q
			continue
		}
		first[p.item.ID] = p
		if p.f.Body != "" && !p.f.Truncated && !r.opts.Reread {
			direct = append(direct, p)
		} else {
			again = append(again, p)
		}
	}
	r.sendBodies(ctx, direct, pace)
	r.readAgain(ctx, again, pace)
	for _, p := range ps {
		if p.dupOf == nil {
			continue
		}
		p.item.Outcome = Skipped
		if p.dupOf.item.Outcome == Sent || p.dupOf.item.Outcome == WouldSend {
			p.item.Reason = "the same record as " + p.dupOf.item.From + ", sent once"
		} else {
			p.item.Reason = "the same record as " + p.dupOf.item.From + ", which was not sent"
		}
	}
}

// FailureS3 redrives the failure output under uri (FAILURE_S3_URI's
// s3://bucket/prefix, or one .jsonl file of it) to the target. The record
// ids sent from a file are recorded in <file>.redriven, which the next run
// reads to skip them; with Delete, a file all of whose records have been
// sent is deleted, with its marker.
func (r *Redriver) FailureS3(ctx context.Context, uri string) (*Summary, error) {
	t := newTally(r.opts, uri, r.opts.TargetQueueURL)
	bucket, prefix, err := dataset.ParseS3URI(uri)
	if err != nil {
		return t.summary(), err
	}
	if r.target == nil {
		return t.summary(), errors.New("redrive: the failure output goes to a target queue; none is set")
	}
	keys := []string{prefix}
	if !strings.HasSuffix(prefix, ".jsonl") {
		if keys, err = listKeys(ctx, r.s3, bucket, prefix, ".jsonl"); err != nil {
			return t.summary(), err
		}
	}
	pace := newPace(r.opts.Rate)
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return t.summary(), err
		}
		if err := r.failureFile(ctx, t, s3Files{c: r.s3, bucket: bucket}, key, pace); err != nil {
			return t.summary(), err
		}
	}
	return t.summary(), nil
}

// sendBatch is how many records are sent at a time, for the rate and the
// progress.
const sendBatch = 10

// FailureFile redrives the failure file at path on this machine (the
// s3sqs-failures-RUNID.jsonl that `s3sqs fanout` writes) to the target, as
// FailureS3 redrives one file in S3: the record ids sent are recorded in
// <path>.redriven beside it.
func (r *Redriver) FailureFile(ctx context.Context, path string) (*Summary, error) {
	t := newTally(r.opts, path, r.opts.TargetQueueURL)
	if r.target == nil {
		return t.summary(), errors.New("redrive: the failure output goes to a target queue; none is set")
	}
	if _, err := os.Stat(path); err != nil {
		return t.summary(), err
	}
	return t.summary(), r.failureFile(ctx, t, localFiles{}, path, newPace(r.opts.Rate))
}

// failureFiles is where failure files and their markers are: S3 or this
// machine.
type failureFiles interface {
	name(key string) string
	read(ctx context.Context, key string) ([]byte, error)
	write(ctx context.Context, key string, b []byte) error
	remove(ctx context.Context, key string) error
}

// s3Files are failure files in a bucket.
type s3Files struct {
	c      S3API
	bucket string
}

func (f s3Files) name(key string) string { return "s3://" + f.bucket + "/" + key }
func (f s3Files) read(ctx context.Context, key string) ([]byte, error) {
	return getObject(ctx, f.c, f.bucket, key)
}
func (f s3Files) write(ctx context.Context, key string, b []byte) error {
	_, err := f.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key),
		Body: bytes.NewReader(b), ContentType: aws.String("application/json")})
	return err
}
func (f s3Files) remove(ctx context.Context, key string) error {
	_, err := f.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key)})
	return err
}

// localFiles are failure files on this machine, named by path.
type localFiles struct{}

func (localFiles) name(path string) string { return path }
func (localFiles) read(_ context.Context, path string) ([]byte, error) {
	return os.ReadFile(path)
}
func (localFiles) write(_ context.Context, path string, b []byte) error {
	return os.WriteFile(path, b, 0o644)
}
func (localFiles) remove(_ context.Context, path string) error { return os.Remove(path) }

// failureFile redrives one failure output file.
func (r *Redriver) failureFile(ctx context.Context, t *tally, files failureFiles, key string, pace *pace) error {
	file := files.name(key)
	body, err := files.read(ctx, key)
	if awserr.Missing(err) == awserr.Key {
		return nil // deleted since it was listed
	}
	if err != nil {
		return err
	}
	markerKey := key + ".redriven"
	m, err := readMarker(ctx, files, markerKey)
	if err != nil {
		return err
	}
	var ps []*pending
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		ps = append(ps, newPending(sc.Bytes(), fmt.Sprintf("%s line %d", file, n)))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	t.expect(len(ps))
	for _, p := range ps {
		if r.choose(p) && m.has(p.item.ID) {
			p.item.Outcome, p.item.Reason = Skipped, "sent by an earlier redrive (marker "+files.name(markerKey)+")"
		}
	}
	for start := 0; start < len(ps); start += sendBatch {
		batch := ps[start:min(start+sendBatch, len(ps))]
		r.sendFailures(ctx, batch, pace)
		for _, p := range batch {
			t.add(p.item)
		}
	}
	if r.opts.DryRun {
		return nil
	}
	var sent []string
	all := true
	for _, p := range ps {
		switch {
		case p.delivered():
			sent = append(sent, p.item.ID)
		case p.item.ID == "" || !m.has(p.item.ID):
			all = false
		}
	}
	if r.opts.Delete && all {
		for _, k := range []string{key, markerKey} {
			if err := files.remove(ctx, k); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.log.WarnContext(ctx, "the failure file's records are all sent, but it was not deleted", "file", files.name(k), "err", err)
				r.markFile(ctx, files, markerKey, m, r.opts.TargetQueueURL, sent)
				return nil
			}
		}
		return nil
	}
	r.markFile(ctx, files, markerKey, m, r.opts.TargetQueueURL, sent)
	return nil
}

// markFile adds the record ids sent to the marker at key and writes it.
// When it cannot be written, the records were sent all the same: a
// warning says that the next redrive will send them again.
func (r *Redriver) markFile(ctx context.Context, files failureFiles, key string, m *Marker, to string, sent []string) {
	if len(sent) == 0 || r.opts.DryRun {
		return
	}
	m.add(to, sent...)
	if err := writeMarker(ctx, files, key, m); err != nil {
		r.log.WarnContext(ctx, "records sent, but the marker that keeps the next redrive from sending them again was not written", "marker", files.name(key), "records", len(sent), "err", err)
	}
}

// FailureQueue redrives the failure queue at url to the target. Each
// message whose record was sent is deleted, after the send; the others
// (skipped, failed, or all in a dry run) are left on the queue and made
// visible again when the run ends.
func (r *Redriver) FailureQueue(ctx context.Context, url string) (*Summary, error) {
	t := newTally(r.opts, url, r.opts.TargetQueueURL)
	if r.target == nil {
		return t.summary(), errors.New("redrive: the failure output goes to a target queue; none is set")
	}
	q := r.newQueueReader(url)
	if v, _, err := q.counts(ctx); err != nil {
		return t.summary(), &engine.QueueError{Role: engine.RoleFailure, Queue: url, Err: err}
	} else {
		t.expect(int(v))
	}
	defer func() { t.sum.Left = q.left(context.WithoutCancel(ctx)) }()
	defer q.release(context.WithoutCancel(ctx))
	pace := newPace(r.opts.Rate)
	// sent holds the record ids sent in this run, so that a record on the
	// queue twice (its task failed twice) is sent once.
	sent := map[string]bool{}
	for msgs, err := range q.receive(ctx) {
		if err != nil {
			return t.summary(), err
		}
		ps := make([]*pending, len(msgs))
		for i, msg := range msgs {
			ps[i] = newPending([]byte(aws.ToString(msg.Body)), url+" message "+aws.ToString(msg.MessageId))
			ps[i].msg = aws.ToString(msg.MessageId)
			if r.choose(ps[i]) && sent[ps[i].item.ID] {
				ps[i].item.Outcome, ps[i].item.Reason = Skipped, "the same record as a message sent earlier in this run, sent once"
				ps[i].item.To, ps[i].sentBefore = r.opts.TargetQueueURL, true
			}
		}
		r.sendFailures(ctx, ps, pace)
		var del []string
		for _, p := range ps {
			if p.delivered() {
				del = append(del, p.msg)
			}
			if p.item.Outcome == Sent {
				sent[p.item.ID] = true
			}
		}
		var undeleted map[string]string
		if !r.opts.DryRun {
			undeleted = q.delete(ctx, del)
		}
		for _, p := range ps {
			if why, ok := undeleted[p.msg]; ok {
				p.item.Outcome, p.item.Reason = Failed, "sent, but not deleted from the failure queue ("+why+"); the next redrive sends it again"
			}
			t.add(p.item)
		}
	}
	return t.summary(), nil
}
