package dataset

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/internal/inorder"
)

// Object is one S3 object of a dataset, pinned to the version that was
// listed.
type Object struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	// ETag is the entity tag, without quotes.
	ETag string `json:"etag,omitempty"`
	// VersionID is set when S3 reported a version.
	VersionID string `json:"versionId,omitempty"`
	// StorageClass is the object's storage class as its listing or
	// HeadObject gave it; empty for STANDARD or when not known.
	StorageClass string `json:"storageClass,omitempty"`
	// Archive is set when the object cannot be read until it is restored:
	// its storage class (GLACIER, DEEP_ARCHIVE) or, in
	// INTELLIGENT_TIERING, its archive tier (ARCHIVE_ACCESS,
	// DEEP_ARCHIVE_ACCESS), and no restored copy is ready. List tells it
	// from HeadObject for every object a listing gives in one of those
	// classes; empty means the object can be read.
	Archive string `json:"archive,omitempty"`
}

// String returns s3://bucket/key, with ?versionId= when pinned to one.
func (o Object) String() string {
	if o.VersionID != "" {
		return o.URI() + "?versionId=" + o.VersionID
	}
	return o.URI()
}

// URI returns s3://bucket/key.
func (o Object) URI() string { return "s3://" + o.Bucket + "/" + o.Key }

// GroupID returns the FIFO message group of the object's messages: a hash
// of bucket and key, so that the messages of one object stay in order,
// objects go in parallel, and any key (up to 1,024 bytes, any characters,
// where a group id allows 128 printable ASCII ones) gives a valid group id.
func (o Object) GroupID() string {
	h := sha256.Sum256([]byte(o.Bucket + "\x00" + o.Key))
	return hex.EncodeToString(h[:16])
}

// Pin returns what pins the object to the bytes that were listed: its
// version id, or else its ETag. Record ids, chunk ids and conditional reads
// are built from it.
func (o Object) Pin() string {
	if o.VersionID != "" {
		return o.VersionID
	}
	return o.ETag
}

// Source names a dataset. Set Bucket and exactly one of Key, Prefix, Keys
// or Manifest, or All for every object in the bucket. A source that names
// none is refused, so that a typo in a field name never sends a whole
// bucket.
type Source struct {
	// Bucket holds the dataset. A manifest names its own buckets.
	Bucket string `json:"bucket,omitempty"`
	// Key names one object.
	Key string `json:"key,omitempty"`
	// Prefix lists every object under it.
	Prefix string `json:"prefix,omitempty"`
	// Keys names the objects one by one.
	Keys []string `json:"keys,omitempty"`
	// Manifest is the s3:// URI of an S3 Batch Operations CSV manifest or
	// an S3 Inventory manifest.json.
	Manifest string `json:"manifest,omitempty"`
	// All names every object in Bucket. It must be said explicitly.
	All bool `json:"all,omitempty"`

	// Suffix keeps only keys that end with it.
	Suffix string `json:"suffix,omitempty"`
	// Glob keeps only keys that match it with path.Match, where "*" does
	// not cross "/".
	Glob string `json:"glob,omitempty"`
	// IncludeHidden keeps what listings skip by default: _SUCCESS and
	// keys whose last segment starts with "_" or ".". Keys the source
	// names itself (Key, Keys) are kept all the same.
	IncludeHidden bool `json:"includeHidden,omitempty"`
	// Filters leave more objects out; what each filter left out is
	// counted (see Listed.Filtered).
	Filters
	// Versions lists every version of each key, oldest first, with
	// ListObjectVersions, instead of the current version alone (key, keys,
	// prefix and all sources; a manifest names its versions itself).
	// Delete markers are left out, and so is a listed key that has only
	// them; a key the source names itself that has only them is missing,
	// as HeadObject says of a deleted key.
	Versions bool `json:"versions,omitempty"`
}

// Validate reports a source that does not name exactly one dataset, or
// names it with an empty key or a malformed bucket, manifest or glob. Its
// errors name the fields as a request writes them.
func (s Source) Validate() error {
	var named []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"key", s.Key != ""}, {"prefix", s.Prefix != ""}, {"keys", len(s.Keys) > 0}, {"manifest", s.Manifest != ""}, {"all", s.All}} {
		if f.set {
			named = append(named, f.name)
		}
	}
	switch {
	case len(named) > 1:
		return fmt.Errorf("dataset: the source names %s: give exactly one of key, prefix, keys, manifest or all", strings.Join(named, " and "))
	case len(named) == 0:
		return errors.New("dataset: the source names no dataset: give one of key, prefix, keys (not empty) or manifest, or all: true for every object in the bucket")
	case s.Manifest == "" && s.Bucket == "":
		return errors.New("dataset: bucket is missing")
	case s.Manifest != "" && s.Bucket != "":
		return errors.New("dataset: bucket is not used with manifest: the manifest names its objects' buckets")
	case s.Manifest != "" && s.Versions:
		return errors.New("dataset: versions is not used with manifest: a manifest names the versions it holds; list a prefix or keys for every version")
	}
	if s.Bucket != "" {
		if err := CheckBucket(s.Bucket); err != nil {
			return err
		}
	}
	if i := slices.Index(s.Keys, ""); i >= 0 {
		return fmt.Errorf("dataset: keys[%d] is empty", i)
	}
	if s.Manifest != "" {
		if _, _, err := ParseS3URI(s.Manifest); err != nil {
			return fmt.Errorf("dataset: manifest: %w", err)
		}
	}
	if s.Glob != "" {
		if _, err := path.Match(s.Glob, ""); err != nil {
			return fmt.Errorf("dataset: glob %q: %w", s.Glob, err)
		}
	}
	return s.Filters.Validate()
}

// CheckBucket reports a bucket name that S3 would refuse, such as an
// s3:// URI or a name with a slash, given where the bare name is wanted.
func CheckBucket(b string) error {
	if strings.HasPrefix(b, "s3://") || strings.HasPrefix(b, "arn:") || strings.Contains(b, "/") {
		return fmt.Errorf("dataset: bucket %q is not a bucket name: give the name alone (my-bucket), and the key or prefix in their own fields", b)
	}
	return nil
}

// ListAPI is the part of the S3 client that listing uses. *s3.Client
// satisfies it.
type ListAPI interface {
	ListObjectsV2(ctx context.Context, params *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	HeadObject(ctx context.Context, params *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectVersions(ctx context.Context, params *s3.ListObjectVersionsInput, optFns ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

var _ ListAPI = (*s3.Client)(nil)

// Objects yields the objects of the dataset src names, pinned, as it lists
// them (with Source.Versions, each version): a prefix of any size is listed
// page by page. A single key or a key list is pinned with HeadObject (with
// Source.Versions, listed with ListObjectVersions); a missing one is an
// error naming it. Listing stops at the first error, which is yielded last.
func Objects(ctx context.Context, client ListAPI, src Source) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		for l, err := range List(ctx, client, src, Cursor{}, ListOptions{}) {
			if err == nil && l.Mark() {
				continue
			}
			err = cmp.Or(err, l.Err)
			if err != nil || len(l.Versions) == 0 {
				if !yield(l.Object, err) || err != nil {
					return
				}
				continue
			}
			for _, v := range l.Versions {
				if !yield(v, nil) {
					return
				}
			}
		}
	}
}

// Cursor is where a listing resumes: just after the objects it has
// yielded. The zero Cursor is the start. It is small and encodes as JSON,
// so that a planning step that runs out of time hands the rest of a
// listing to the next one.
type Cursor struct {
	// After is the last key listed under a prefix: the next step lists
	// from after it (ListObjectsV2's StartAfter).
	After string `json:"after,omitempty"`
	// Index is the next key of a key list, or the next data file of an S3
	// Inventory report.
	Index int `json:"index,omitempty"`
	// Offset is the byte offset of the next line of a Batch Operations
	// manifest, or how many rows of inventory data file Index were read.
	Offset int64 `json:"offset,omitempty"`
	// ETag pins the manifest the listing reads, so that every step reads
	// the same one; a manifest replaced in between fails the step.
	ETag string `json:"etag,omitempty"`
}

// IsZero reports whether c is the start of a listing.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// Listed is an object of a listing and the cursor just after it, or a
// mark (see Mark).
type Listed struct {
	Object
	Next Cursor
	// Err is set, for an object a manifest names, when S3 says it is not
	// there (it wraps ErrNotFound): the listing goes on past it, since a
	// manifest made earlier may name objects deleted since. A key the
	// source names itself (Key, Keys) that is missing ends the listing.
	Err error
	// Versions is, with Source.Versions, every version of the key that the
	// source's filters keep, oldest first; Object is then the newest of
	// them.
	Versions []Object
	// Filtered holds what the source's filters left out here: the object,
	// or, with Source.Versions, some of the key's versions. When they left
	// out everything, l is a mark.
	Filtered []Filtered
	// settled is set when the listing knows the object is not archived
	// (see Object.Archive), so that no HeadObject asks.
	settled bool
}

// Mark reports whether l names no object: the listing passed over keys
// that are not data (directory markers, old versions and delete markers of
// an inventory) up to Next, or over an object that the source's filters
// left out (l.Filtered). Marks of keys that are not data come at most once
// per listing page or markEvery rows, so that a step that meets only such
// keys still moves its cursor on.
func (l Listed) Mark() bool { return l.Key == "" }

// dirMarker reports whether key is a "directory" marker, such as the
// S3 console's folders make: not data, and not counted as left out.
func dirMarker(key string) bool { return strings.HasSuffix(key, "/") }

// filtered is the mark of obj, which filter by left out, before cursor
// next.
func filtered(obj Object, by string, next Cursor) Listed {
	return Listed{Next: next, Filtered: []Filtered{{Object: obj, By: by}}}
}

// markEvery is how many manifest rows left out make a mark.
const markEvery = 1000

// DefaultPinConcurrency is the number of HeadObject calls in flight when
// ListOptions.PinConcurrency is zero.
const DefaultPinConcurrency = 16

// ListOptions configures List. The zero value is ready to use.
type ListOptions struct {
	// PinConcurrency bounds the HeadObject calls that pin the objects of
	// a key list or of a manifest without sizes; zero means
	// DefaultPinConcurrency. Objects are yielded in listing order all the
	// same.
	PinConcurrency int
}

// List yields the objects of the dataset src names from cursor from on,
// pinned, each with the cursor that resumes the listing after it, and what
// the source's filters left out (see Listed.Filtered). Objects whose size
// the listing does not give (a key, a key list, a Batch Operations
// manifest) are pinned with HeadObject, several at once. The first error
// is yielded last.
func List(ctx context.Context, client ListAPI, src Source, from Cursor, opts ListOptions) iter.Seq2[Listed, error] {
	if err := src.Validate(); err != nil {
		return func(yield func(Listed, error) bool) { yield(Listed{}, err) }
	}
	if src.Key != "" || len(src.Keys) > 0 {
		src.IncludeHidden = true // a key the source names is never hidden
	}
	f, _ := src.Filter() // Validate checked it
	raw := func(yield func(Listed, error) bool) {
		// A key the source names is pinned before it is judged, so that
		// one that is missing ends the listing whatever the filters say.
		switch {
		case src.Key != "":
			if from.Index == 0 {
				yield(Listed{Object: Object{Bucket: src.Bucket, Key: src.Key, Size: -1}, Next: Cursor{Index: 1}}, nil)
			}
		case len(src.Keys) > 0:
			for i := from.Index; i < len(src.Keys); i++ {
				if !yield(Listed{Object: Object{Bucket: src.Bucket, Key: src.Keys[i], Size: -1}, Next: Cursor{Index: i + 1}}, nil) {
					return
				}
			}
		case src.Manifest != "":
			listManifest(ctx, client, src, f, from, yield)
		case src.Versions:
			listPrefixVersions(ctx, client, src, f, from, yield)
		default:
			listPrefix(ctx, client, src, f, from, yield)
		}
	}
	pin := func(ctx context.Context, l Listed) (Listed, error) {
		if l.Mark() || l.Err != nil {
			return l, nil
		}
		if l.Size >= 0 {
			return archived(ctx, client, l) // the listing judged it
		}
		if src.Versions {
			k, err := versionsOf(ctx, client, l.Bucket, l.Key)
			if err != nil {
				return l, err
			}
			return k.listed(f, l.Next), nil
		}
		obj, modified, err := head(ctx, client, l.Bucket, l.Key, l.VersionID)
		if src.Manifest != "" && errors.Is(err, ErrNotFound) {
			l.Err = err
			return l, nil
		}
		if by := f.LeftOut(obj, modified); err == nil && by != "" {
			return filtered(obj, by, l.Next), nil
		}
		l.Object = obj
		return l, err
	}
	return inorder.Map(ctx, raw, cmp.Or(opts.PinConcurrency, DefaultPinConcurrency), pin)
}

func listPrefix(ctx context.Context, client ListAPI, src Source, f *Filter, from Cursor, yield func(Listed, error) bool) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(src.Bucket), Prefix: aws.String(src.Prefix)}
	if from.After != "" {
		in.StartAfter = aws.String(from.After)
	}
	p := s3.NewListObjectsV2Paginator(client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			yield(Listed{}, fmt.Errorf("dataset: list s3://%s/%s: %w", src.Bucket, src.Prefix, err))
			return
		}
		passed := "" // the last directory marker since the last object
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if dirMarker(key) {
				passed = key
				continue
			}
			passed = ""
			obj := Object{Bucket: src.Bucket, Key: key, Size: aws.ToInt64(o.Size), ETag: trimETag(aws.ToString(o.ETag)), StorageClass: storageClass(string(o.StorageClass))}
			l := Listed{Object: obj, Next: Cursor{After: key}}
			if by := f.LeftOut(obj, aws.ToTime(o.LastModified)); by != "" {
				l = filtered(obj, by, l.Next)
			}
			if !yield(l, nil) {
				return
			}
		}
		if passed != "" && !yield(Listed{Next: Cursor{After: passed}}, nil) {
			return
		}
	}
}

// listPrefixVersions lists every version under src's prefix, a key at a
// time (see keyVersions), with a mark for each key left out: a key's
// versions may fill pages, and a step that meets only such keys must still
// move its cursor on.
func listPrefixVersions(ctx context.Context, client ListAPI, src Source, f *Filter, from Cursor, yield func(Listed, error) bool) {
	for k, err := range keyVersions(ctx, client, src.Bucket, src.Prefix, from.After) {
		if err != nil {
			yield(Listed{}, err)
			return
		}
		if !yield(k.listed(f, Cursor{After: k.key}), nil) {
			return
		}
	}
}

// Head pins one object with HeadObject: its size, ETag and version (the
// given one, or the latest). A missing object or version wraps
// ErrNotFound.
func Head(ctx context.Context, client ListAPI, bucket, key, versionID string) (Object, error) {
	o, _, err := head(ctx, client, bucket, key, versionID)
	return o, err
}

// head is Head, with the object's time of last modification.
func head(ctx context.Context, client ListAPI, bucket, key, versionID string) (Object, time.Time, error) {
	in := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if versionID != "" {
		in.VersionId = aws.String(versionID)
	}
	out, err := client.HeadObject(ctx, in)
	if err != nil {
		return Object{}, time.Time{}, fmt.Errorf("dataset: head %s: %w", Object{Bucket: bucket, Key: key, VersionID: versionID}, classify(err))
	}
	return Object{
		Bucket:       bucket,
		Key:          key,
		Size:         aws.ToInt64(out.ContentLength),
		ETag:         trimETag(aws.ToString(out.ETag)),
		VersionID:    aws.ToString(out.VersionId),
		StorageClass: storageClass(string(out.StorageClass)),
		Archive:      archiveOf(string(out.StorageClass), string(out.ArchiveStatus), aws.ToString(out.Restore)),
	}, aws.ToTime(out.LastModified), nil
}

func trimETag(s string) string { return strings.Trim(s, `"`) }

// ParseS3URI splits s3://bucket/key. The key is taken as written, not
// URL-decoded.
func ParseS3URI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("dataset: %q is not an s3://bucket/key URI", uri)
	}
	return bucket, key, nil
}
