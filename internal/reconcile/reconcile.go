// Package reconcile compares the object versions under an S3 prefix with
// what s3ingest recorded as ingested in the claims table, and lists or
// sends again the notifications of those it never ingested: the ones S3
// did not announce, or whose notification was lost.
//
// s3ingest, when it has a claims table, marks each object version it
// ingested under claims.ObjectKey (its bucket, key and version id, or ETag
// where the bucket keeps no versions), state done, kept for the table's
// TTL (CLAIMS_TTL, claims.DefaultTTL by default). A version whose marker
// is done was ingested; any other (no marker) is missing. A version older
// than the TTL may have had its marker expired, so that Run skips it,
// unless told to look further back (Options.MaxAge).
//
// Each version costs one strongly consistent GetItem (one read unit) on
// the claims table; a prefix of n versions costs n read units and n/1000
// ListObjectVersions requests.
package reconcile

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// DefaultConcurrency is how many GetItems are in flight at once when
// Options.Concurrency is zero.
const DefaultConcurrency = 16

// ListAPI is the part of the S3 client Run uses. *s3.Client satisfies it.
type ListAPI = dataset.ListAPI

// Ingested tells whether s3ingest recorded the work key names as done.
// *claims.Table satisfies it.
type Ingested interface {
	IsDone(ctx context.Context, key string) (bool, error)
}

var _ Ingested = (*claims.Table)(nil)

// Options says what to reconcile and what to do with the missing
// versions.
type Options struct {
	// Bucket and Prefix name the object versions to compare.
	Bucket, Prefix string
	// Manifest, when set, is the s3:// URI of an S3 Inventory manifest.json
	// or a Batch Operations CSV manifest whose objects are compared instead
	// of the versions under Prefix (Bucket then only names the report). Its
	// rows carry no date that Run reads: MaxAge must be negative.
	Manifest string
	// MaxAge skips versions last modified longer ago than it, whose
	// markers the claims table may have expired; zero means
	// claims.DefaultTTL, a negative value compares every version.
	MaxAge time.Duration
	// Concurrency is how many GetItems are in flight at once; zero means
	// DefaultConcurrency.
	Concurrency int
	// SendTo, when set, receives a notification of each missing version
	// (batched ten per SendMessageBatch); nil lists them only (a dry run).
	SendTo *sqsbatch.Sender
	// Format is the shape of the notifications sent; empty is
	// s3event.FormatS3.
	Format s3event.Format
	// RunID names this reconcile in the notifications' replay marker.
	RunID string
	// Region is the awsRegion the notifications name: the bucket's, as
	// S3's own notifications say it.
	Region string
	// KeyMarker and VersionIDMarker start the listing after that version
	// (ListObjectVersions' markers): where an earlier Run stopped (see
	// Report.NextKeyMarker). Empty starts at the prefix's first key.
	KeyMarker, VersionIDMarker string
	// Now returns the time; nil means time.Now.
	Now func() time.Time
	// Filters leave versions out of the comparison, as they leave objects
	// out of a fanout run (Report.FilteredBy counts them).
	Filters dataset.Filters
}

// Report is what Run found and did.
type Report struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	// Manifest is Options.Manifest.
	Manifest string `json:"manifest,omitempty"`
	// MaxAge is the oldest a version may be and be compared ("0s": all).
	MaxAge string `json:"maxAge"`
	// Seen counts the object versions listed (delete markers apart).
	Seen int `json:"seen"`
	// Ingested counts the versions s3ingest marked as ingested.
	Ingested int `json:"ingested"`
	// Missing counts the versions with no marker.
	Missing int `json:"missing"`
	// Sent counts the notifications of missing versions sent.
	Sent int `json:"sent"`
	// SkippedTooOld counts the versions older than MaxAge, not compared.
	SkippedTooOld int `json:"skippedTooOld"`
	// SkippedDeleteMarkers counts the delete markers listed.
	SkippedDeleteMarkers int `json:"skippedDeleteMarkers"`
	// Filtered counts the versions seen that Options.Filters (and, in a
	// manifest, the rule of hidden keys) left out, not compared, and
	// FilteredBy them by filter (see dataset.Filter.Key).
	Filtered   int            `json:"filtered,omitempty"`
	FilteredBy map[string]int `json:"filteredBy,omitempty"`
	// Failed counts the versions whose marker could not be read or whose
	// notification could not be sent.
	Failed int `json:"failed"`
	// Objects lists the missing versions, the first maxListed of them
	// (ObjectsCut is set when there were more): Missing counts them all,
	// and a function's answer is at most 6 MB.
	Objects    []Object `json:"missingObjects"`
	ObjectsCut bool     `json:"missingObjectsCut,omitempty"`
	// NextKeyMarker and NextVersionIDMarker, when set, are where the
	// listing stopped because ctx ended (a function's deadline): what was
	// found before was sent, and a Run with them as KeyMarker and
	// VersionIDMarker goes on from there.
	NextKeyMarker       string `json:"nextKeyMarker,omitempty"`
	NextVersionIDMarker string `json:"nextVersionIdMarker,omitempty"`
	// Errors holds the first few failures.
	Errors []string `json:"errors,omitempty"`
	// DryRun reports that nothing was sent.
	DryRun bool `json:"dryRun"`
}

// Object is one missing version.
type Object struct {
	// Bucket is set when it is not the Report's (a manifest's object).
	Bucket       string    `json:"bucket,omitempty"`
	Key          string    `json:"key"`
	VersionID    string    `json:"versionId,omitempty"`
	ETag         string    `json:"etag"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"lastModified"`
}

// maxErrors is how many failures a Report keeps; maxListed how many
// missing versions it lists.
const (
	maxErrors = 10
	maxListed = 1000
)

// Run lists the versions under o.Prefix, looks each one up in ingested,
// and sends the notifications of the missing ones when o.SendTo is set, a
// listing page at a time (a manifest's objects, maxListed at a time), so
// that what it found is sent when it stops early. It fails only when the
// listing fails; a version it cannot look up or send is counted in
// Report.Failed. When ctx ends during the listing, the Report says where
// it stopped (NextKeyMarker).
func Run(ctx context.Context, s3c ListAPI, ingested Ingested, o Options) (Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.MaxAge = cmp.Or(o.MaxAge, claims.DefaultTTL)
	if o.Manifest != "" && o.MaxAge > 0 {
		return Report{}, errors.New("reconcile: a manifest's objects carry no date to skip the ones older than the claims' TTL by: compare them all (a negative MaxAge, -max-age off) and reconcile a report of recent objects")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	f, err := o.source().Filter()
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: %w", err)
	}
	c := &comparison{filter: f,
		ctx: ctx, o: o, ingested: ingested, sem: make(chan struct{}, o.Concurrency), missing: map[int]Object{},
		rep: Report{Bucket: o.Bucket, Prefix: o.Prefix, Manifest: o.Manifest, MaxAge: max(o.MaxAge, 0).String(), DryRun: o.SendTo == nil, Objects: []Object{}},
	}
	if o.Manifest != "" {
		err = c.listManifest(s3c)
	} else {
		err = c.list(s3c)
	}
	// What was found before a listing error is sent all the same.
	return c.rep, errors.Join(err, c.flush())
}

// flush waits for the lookups started, and sends the notifications of
// the versions they found missing, in listing order.
func (c *comparison) flush() error {
	c.wg.Wait()
	var objs []Object
	for i := c.flushed; i < c.n; i++ {
		if obj, ok := c.missing[i]; ok {
			objs = append(objs, obj)
			delete(c.missing, i)
		}
	}
	c.flushed = c.n
	rep := &c.rep
	rep.Missing += len(objs)
	for _, obj := range objs {
		if len(rep.Objects) == maxListed {
			rep.ObjectsCut = true
			break
		}
		rep.Objects = append(rep.Objects, obj)
	}
	if c.o.SendTo == nil || len(objs) == 0 {
		return nil
	}
	entries, err := notifications(c.o, objs, c.sent)
	if err != nil {
		return err
	}
	c.sent += len(entries)
	// In the send context, which outlives a function's work context.
	res, err := c.o.SendTo.SendEntries(partialbatch.SendContext(c.ctx), entries)
	rep.Sent += res.Sent
	for _, f := range res.Failures {
		rep.fail(f)
	}
	if err != nil && res.Failed == 0 {
		return fmt.Errorf("reconcile: send to %s: %w", c.o.SendTo.QueueURL(), err)
	}
	return nil
}

// source is the dataset o names, with its filters. A manifest is read as
// fanout reads it, hidden keys left out; every version under a prefix is
// compared, since s3ingest ingests every key it is told of.
func (o Options) source() dataset.Source {
	if o.Manifest != "" {
		return dataset.Source{Manifest: o.Manifest, Filters: o.Filters}
	}
	return dataset.Source{Bucket: o.Bucket, Prefix: o.Prefix, IncludeHidden: true, Filters: o.Filters}
}

// comparison is one Run's listing and the lookups it started.
type comparison struct {
	ctx      context.Context
	o        Options
	filter   *dataset.Filter
	ingested Ingested
	sem      chan struct{}
	wg       sync.WaitGroup
	n        int // versions looked up, in listing order
	flushed  int // versions whose lookups flush has taken
	sent     int // notifications made, for their sequencers

	mu      sync.Mutex
	rep     Report
	missing map[int]Object // by listing order
}

// list lists the versions, counting them, and looks up each one younger
// than o.MaxAge, o.Concurrency at a time.
func (c *comparison) list(s3c ListAPI) error {
	oldest := c.o.Now().Add(-c.o.MaxAge)
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(c.o.Bucket), Prefix: aws.String(c.o.Prefix)}
	if c.o.KeyMarker != "" {
		in.KeyMarker, in.VersionIdMarker = aws.String(c.o.KeyMarker), aws.String(c.o.VersionIDMarker)
	}
	for {
		if c.ctx.Err() != nil {
			c.rep.NextKeyMarker, c.rep.NextVersionIDMarker = aws.ToString(in.KeyMarker), aws.ToString(in.VersionIdMarker)
			return fmt.Errorf("reconcile: stopped before the listing of s3://%s/%s ended, at key marker %q: %w", c.o.Bucket, c.o.Prefix, c.rep.NextKeyMarker, c.ctx.Err())
		}
		page, err := s3c.ListObjectVersions(c.ctx, in)
		if err != nil {
			return fmt.Errorf("reconcile: list versions of s3://%s/%s: %w", c.o.Bucket, c.o.Prefix, err)
		}
		c.mu.Lock()
		c.rep.SkippedDeleteMarkers += len(page.DeleteMarkers)
		c.mu.Unlock()
		for _, v := range page.Versions {
			lm := aws.ToTime(v.LastModified)
			c.mu.Lock()
			c.rep.Seen++
			tooOld := c.o.MaxAge > 0 && lm.Before(oldest)
			if tooOld {
				c.rep.SkippedTooOld++
			}
			c.mu.Unlock()
			if tooOld {
				continue
			}
			o := dataset.ListedVersion(c.o.Bucket, v)
			if by := c.filter.LeftOut(o, lm); by != "" {
				c.mu.Lock()
				c.rep.filtered(by)
				c.mu.Unlock()
				continue
			}
			c.check(Object{Key: o.Key, VersionID: o.VersionID, ETag: o.ETag, Size: o.Size, LastModified: lm.UTC()})
		}
		if !aws.ToBool(page.IsTruncated) {
			return nil
		}
		if err := c.flush(); err != nil {
			return err
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// listManifest reads the objects of o.Manifest, as fanout reads them
// (pkg/dataset: an Inventory report's delete markers are left out), and
// looks each one up.
func (c *comparison) listManifest(s3c ListAPI) error {
	for l, err := range dataset.List(c.ctx, s3c, c.o.source(), dataset.Cursor{}, dataset.ListOptions{}) {
		if err = cmp.Or(err, l.Err); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		c.mu.Lock()
		for _, f := range l.Filtered {
			c.rep.Seen++
			c.rep.filtered(f.By)
		}
		if !l.Mark() {
			c.rep.Seen++
		}
		c.mu.Unlock()
		if l.Mark() {
			continue
		}
		obj := l.Object
		c.check(Object{Bucket: obj.Bucket, Key: obj.Key, VersionID: obj.VersionID, ETag: obj.ETag, Size: obj.Size})
		if (c.n-c.flushed)%maxListed == 0 {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// check looks obj's marker up in a goroutine of its own, once fewer than
// o.Concurrency are in flight.
func (c *comparison) check(obj Object) {
	i := c.n
	c.n++
	c.sem <- struct{}{}
	c.wg.Add(1)
	go func() {
		defer func() { <-c.sem; c.wg.Done() }()
		pin := cmp.Or(obj.VersionID, obj.ETag)
		// In the send context: a version listed before the work context
		// ended is looked up and, missing, sent.
		done, err := c.ingested.IsDone(partialbatch.SendContext(c.ctx), claims.ObjectKey(cmp.Or(obj.Bucket, c.o.Bucket), obj.Key, pin))
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case err != nil:
			c.rep.fail(err)
		case done:
			c.rep.Ingested++
		default:
			c.missing[i] = obj
		}
	}()
}

// filtered counts a version that filter by left out.
func (r *Report) filtered(by string) {
	r.Filtered++
	if r.FilteredBy == nil {
		r.FilteredBy = map[string]int{}
	}
	r.FilteredBy[by]++
}

// fail counts a failed version and keeps the first few errors.
func (r *Report) fail(err error) {
	r.Failed++
	if len(r.Errors) < maxErrors {
		r.Errors = append(r.Errors, err.Error())
	}
}

// notifications are the entries announcing objs as created, in the shape
// o.Format says; from is how many the Run made before. Each has a
// sequencer of its own (s3ingest's runs of an object are told apart by
// it), and on a FIFO queue the key's message group.
func notifications(o Options, objs []Object, from int) ([]sqsbatch.Entry, error) {
	enc := s3event.Encoder{Format: o.Format, RunID: o.RunID}
	entries := make([]sqsbatch.Entry, len(objs))
	for i, obj := range objs {
		body, err := enc.Encode(s3event.Object{
			Bucket: cmp.Or(obj.Bucket, o.Bucket), Key: obj.Key, Size: obj.Size, ETag: obj.ETag, VersionID: obj.VersionID,
			EventTime: o.Now(), Sequencer: s3event.ReplaySequencer(o.Now(), from+i), Region: o.Region,
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile: %w", err)
		}
		entries[i] = sqsbatch.Entry{ID: fmt.Sprint(i), Body: string(body)}
		if o.SendTo.FIFO() {
			sum := sha256.Sum256([]byte(cmp.Or(obj.Bucket, o.Bucket) + "\x00" + obj.Key + "\x00" + obj.VersionID + "\x00" + obj.ETag))
			// The object's group, as fanout's replays and records have it:
			// bucket/key as written is no group id for a key with a space
			// or past 128 bytes.
			group := dataset.Object{Bucket: cmp.Or(obj.Bucket, o.Bucket), Key: obj.Key}.GroupID()
			entries[i].GroupID, entries[i].DeduplicationID = group, hex.EncodeToString(sum[:])
		}
	}
	return entries, nil
}

// Request is a reconcile asked of the fanout function, the value of a
// request's "reconcile" field: {"reconcile": {"bucket": "b", "prefix":
// "p/"}}.
type Request struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	// SendTo is the ingest queue's URL; empty means the function's
	// RECONCILE_QUEUE_URL, the only queue it may send to.
	SendTo string `json:"sendTo,omitempty"`
	// DryRun lists the missing versions and sends nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// NotificationFormat is s3 (the default), eventbridge or sns.
	NotificationFormat string `json:"notificationFormat,omitempty"`
	// MaxAge is as Options.MaxAge, written as 7d or 36h, or off; empty
	// means the function's CLAIMS_TTL.
	MaxAge string `json:"maxAge,omitempty"`
	// KeyMarker and VersionIDMarker go on from where an earlier reconcile
	// stopped at its deadline: its answer's nextKeyMarker and
	// nextVersionIdMarker.
	KeyMarker       string `json:"keyMarker,omitempty"`
	VersionIDMarker string `json:"versionIdMarker,omitempty"`
	// Filters are as Options.Filters.
	dataset.Filters
}
