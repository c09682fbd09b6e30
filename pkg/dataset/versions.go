package dataset

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// A listing of every version (Source.Versions) uses ListObjectVersions,
// which lists each key's versions newest first and may split them across
// pages. The listing gathers a key's versions, turns them oldest first and
// yields the key once, as one Listed whose Versions holds them all, so
// that its cursor is always a whole key: a step resumes after the last
// key it yielded (KeyMarker), never in the middle of one.

// Versions returns every version of key in bucket, oldest first, without
// its delete markers. A key with none wraps ErrNotFound.
func Versions(ctx context.Context, client ListAPI, bucket, key string) ([]Object, error) {
	k, err := versionsOf(ctx, client, bucket, key)
	return k.versions, err
}

// versionsOf is Versions, with each version's time of last modification.
func versionsOf(ctx context.Context, client ListAPI, bucket, key string) (keyVersion, error) {
	var out keyVersion
	for k, err := range keyVersions(ctx, client, bucket, key, "") {
		switch {
		case err != nil:
			return keyVersion{}, err
		case k.key != key:
			// A longer key with key as its prefix: key's versions, listed
			// first, are all there.
			return checkVersions(bucket, key, out)
		}
		out = k
	}
	return checkVersions(bucket, key, out)
}

// checkVersions returns k, the versions of key, or, when there are none,
// the error that says so.
func checkVersions(bucket, key string, k keyVersion) (keyVersion, error) {
	if len(k.versions) == 0 {
		return keyVersion{}, fmt.Errorf("dataset: no version of %s: %w", Object{Bucket: bucket, Key: key}, ErrNotFound)
	}
	return k, nil
}

// keyVersion is one key of a version listing and its versions, oldest
// first, without delete markers: none when it has only delete markers.
// modified holds the time of last modification of each version.
type keyVersion struct {
	key      string
	versions []Object
	modified []time.Time
}

// listed is the Listed of k's versions that f keeps, with those it leaves
// out: a mark when it keeps none, or k has none, or is a directory marker.
func (k keyVersion) listed(f *Filter, next Cursor) Listed {
	l := Listed{Next: next}
	if dirMarker(k.key) {
		return l
	}
	keyBy := f.Key(k.key)
	for i, v := range k.versions {
		if by := cmp.Or(keyBy, f.Object(v, k.modified[i])); by != "" {
			l.Filtered = append(l.Filtered, Filtered{Object: v, By: by})
			continue
		}
		l.Versions = append(l.Versions, v)
	}
	if len(l.Versions) > 0 {
		l.Object = l.Versions[len(l.Versions)-1]
	}
	return l
}

// keyVersions lists the keys under prefix after key marker after, each once
// with its versions. It stops at the first error, yielded last.
func keyVersions(ctx context.Context, client ListAPI, bucket, prefix, after string) iter.Seq2[keyVersion, error] {
	return func(yield func(keyVersion, error) bool) {
		in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
		if after != "" {
			in.KeyMarker = aws.String(after)
		}
		var cur keyVersion
		started := false
		for {
			page, err := client.ListObjectVersions(ctx, in)
			if err != nil {
				yield(keyVersion{}, fmt.Errorf("dataset: list versions of s3://%s/%s: %w", bucket, prefix, err))
				return
			}
			for _, e := range pageEntries(bucket, page) {
				if after != "" && e.obj.Key <= after {
					continue // some stand-ins list the marker's key too; S3 starts after it
				}
				if started && e.obj.Key != cur.key {
					slices.Reverse(cur.versions)
					slices.Reverse(cur.modified)
					if !yield(cur, nil) {
						return
					}
					cur = keyVersion{}
				}
				started, cur.key = true, e.obj.Key
				if !e.deleted {
					cur.versions = append(cur.versions, e.obj)
					cur.modified = append(cur.modified, e.modified)
				}
			}
			if !aws.ToBool(page.IsTruncated) {
				break
			}
			in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
		}
		if started {
			slices.Reverse(cur.versions)
			slices.Reverse(cur.modified)
			yield(cur, nil)
		}
	}
}

// versionEntry is a version or a delete marker (of which only the key
// counts) of a ListObjectVersions page.
type versionEntry struct {
	obj      Object
	modified time.Time
	deleted  bool
}

// pageEntries returns page's versions and delete markers in S3's order:
// by key, then newest first. S3 returns the two kinds in two lists, each in
// that order; within a key only the versions' order matters, since delete
// markers are left out, and a stable sort by key keeps it.
func pageEntries(bucket string, page *s3.ListObjectVersionsOutput) []versionEntry {
	es := make([]versionEntry, 0, len(page.Versions)+len(page.DeleteMarkers))
	for _, v := range page.Versions {
		es = append(es, versionEntry{obj: ListedVersion(bucket, v), modified: aws.ToTime(v.LastModified)})
	}
	for _, d := range page.DeleteMarkers {
		es = append(es, versionEntry{obj: Object{Bucket: bucket, Key: aws.ToString(d.Key)}, deleted: true})
	}
	slices.SortStableFunc(es, func(a, b versionEntry) int { return strings.Compare(a.obj.Key, b.obj.Key) })
	return es
}

// ListedVersion returns the object version v of a ListObjectVersions
// page, in bucket, pinned as the engine pins what it lists: S3's version
// id "null" (an object written while the bucket kept no versions) is none,
// so that the version is pinned by its ETag, as s3ingest and its ingested
// markers pin it.
func ListedVersion(bucket string, v types.ObjectVersion) Object {
	id := aws.ToString(v.VersionId)
	if id == "null" {
		id = ""
	}
	return Object{Bucket: bucket, Key: aws.ToString(v.Key), Size: aws.ToInt64(v.Size), ETag: trimETag(aws.ToString(v.ETag)), VersionID: id,
		StorageClass: storageClass(string(v.StorageClass))}
}
