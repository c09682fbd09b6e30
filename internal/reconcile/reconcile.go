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
	// Now returns the time; nil means time.Now.
	Now func() time.Time
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
	// Failed counts the versions whose marker could not be read or whose
	// notification could not be sent.
	Failed int `json:"failed"`
	// Objects lists the missing versions.
	Objects []Object `json:"missingObjects"`
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

// maxErrors is how many failures a Report keeps.
const maxErrors = 10

// Run lists the versions under o.Prefix, looks each one up in ingested,
// and sends the notifications of the missing ones when o.SendTo is set. It
// fails only when the listing fails; a version it cannot look up or send
// is counted in Report.Failed.
func Run(ctx context.Context, s3c ListAPI, ingested Ingested, o Options) (Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAge == 0 {
		o.MaxAge = claims.DefaultTTL
	}
	if o.Manifest != "" && o.MaxAge > 0 {
		return Report{}, errors.New("reconcile: a manifest's objects carry no date to skip the ones older than the claims' TTL by: compare them all (a negative MaxAge, -max-age off) and reconcile a report of recent objects")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	c := &comparison{
		ctx: ctx, o: o, ingested: ingested, sem: make(chan struct{}, o.Concurrency), missing: map[int]Object{},
		rep: Report{Bucket: o.Bucket, Prefix: o.Prefix, Manifest: o.Manifest, MaxAge: max(o.MaxAge, 0).String(), DryRun: o.SendTo == nil, Objects: []Object{}},
	}
	var listErr error
	if o.Manifest != "" {
		listErr = c.listManifest(s3c)
	} else {
		listErr = c.list(s3c)
	}
	c.wg.Wait()
	rep := c.rep
	if listErr != nil {
		return rep, listErr
	}
	for i := range c.n {
		if obj, ok := c.missing[i]; ok {
			rep.Objects = append(rep.Objects, obj)
		}
	}
	rep.Missing = len(rep.Objects)
	if o.SendTo == nil || rep.Missing == 0 {
		return rep, nil
	}
	entries, err := notifications(o, rep.Objects)
	if err != nil {
		return rep, err
	}
	res, err := o.SendTo.SendEntries(ctx, entries)
	rep.Sent = res.Sent
	for _, f := range res.Failures {
		rep.fail(f)
	}
	if err != nil && res.Failed == 0 {
		return rep, fmt.Errorf("reconcile: send to %s: %w", o.SendTo.QueueURL(), err)
	}
	return rep, nil
}

// comparison is one Run's listing and the lookups it started.
type comparison struct {
	ctx      context.Context
	o        Options
	ingested Ingested
	sem      chan struct{}
	wg       sync.WaitGroup
	n        int // versions looked up, in listing order

	mu      sync.Mutex
	rep     Report
	missing map[int]Object // by listing order
}

// list lists the versions, counting them, and looks up each one younger
// than o.MaxAge, o.Concurrency at a time.
func (c *comparison) list(s3c ListAPI) error {
	oldest := c.o.Now().Add(-c.o.MaxAge)
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(c.o.Bucket), Prefix: aws.String(c.o.Prefix)}
	for {
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
			c.check(Object{Key: o.Key, VersionID: o.VersionID, ETag: o.ETag, Size: o.Size, LastModified: lm.UTC()})
		}
		if !aws.ToBool(page.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// listManifest reads the objects of o.Manifest, as fanout reads them
// (pkg/dataset: an Inventory report's delete markers are left out), and
// looks each one up.
func (c *comparison) listManifest(s3c ListAPI) error {
	for obj, err := range dataset.Objects(c.ctx, s3c, dataset.Source{Manifest: c.o.Manifest}) {
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		c.mu.Lock()
		c.rep.Seen++
		c.mu.Unlock()
		c.check(Object{Bucket: obj.Bucket, Key: obj.Key, VersionID: obj.VersionID, ETag: obj.ETag, Size: obj.Size})
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
		pin := obj.VersionID
		if pin == "" {
			pin = obj.ETag
		}
		done, err := c.ingested.IsDone(c.ctx, claims.ObjectKey(cmp.Or(obj.Bucket, c.o.Bucket), obj.Key, pin))
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

// fail counts a failed version and keeps the first few errors.
func (r *Report) fail(err error) {
	r.Failed++
	if len(r.Errors) < maxErrors {
		r.Errors = append(r.Errors, err.Error())
	}
}

// notifications are the entries announcing objs as created, in the shape
// o.Format says. Each has a sequencer of its own (s3ingest's runs of an
// object are told apart by it), and on a FIFO queue the key's message
// group.
func notifications(o Options, objs []Object) ([]sqsbatch.Entry, error) {
	enc := s3event.Encoder{Format: o.Format, RunID: o.RunID}
	entries := make([]sqsbatch.Entry, len(objs))
	for i, obj := range objs {
		body, err := enc.Encode(s3event.Object{
			Bucket: cmp.Or(obj.Bucket, o.Bucket), Key: obj.Key, Size: obj.Size, ETag: obj.ETag, VersionID: obj.VersionID,
			EventTime: o.Now(), Sequencer: s3event.ReplaySequencer(o.Now(), i), Region: o.Region,
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
}
