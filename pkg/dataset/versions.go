package dataset

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
	var out []Object
	for k, err := range keyVersions(ctx, client, bucket, key, "") {
		switch {
		case err != nil:
			return nil, err
		case k.key != key:
			// A longer key with key as its prefix: key's versions, listed
			// first, are all there.
			return checkVersions(bucket, key, out)
		}
		out = k.versions
	}
	return checkVersions(bucket, key, out)
}

// checkVersions returns vs, the versions of key, or, when there are none,
// the error that says so.
func checkVersions(bucket, key string, vs []Object) ([]Object, error) {
	if len(vs) == 0 {
		return nil, fmt.Errorf("dataset: no version of %s: %w", Object{Bucket: bucket, Key: key}, ErrNotFound)
	}
	return vs, nil
}

// keyVersion is one key of a version listing and its versions, oldest
// first, without delete markers: none when it has only delete markers.
type keyVersion struct {
	key      string
	versions []Object
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
			for _, e := range pageEntries(page) {
				if after != "" && e.key <= after {
					continue // some stand-ins list the marker's key too; S3 starts after it
				}
				if started && e.key != cur.key {
					slices.Reverse(cur.versions)
					if !yield(cur, nil) {
						return
					}
					cur = keyVersion{}
				}
				started, cur.key = true, e.key
				if !e.deleted {
					cur.versions = append(cur.versions, Object{Bucket: bucket, Key: e.key, Size: e.size, ETag: trimETag(e.etag), VersionID: e.versionID})
				}
			}
			if !aws.ToBool(page.IsTruncated) {
				break
			}
			in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
		}
		if started {
			slices.Reverse(cur.versions)
			yield(cur, nil)
		}
	}
}

// versionEntry is a version or a delete marker of a ListObjectVersions
// page.
type versionEntry struct {
	key, versionID, etag string
	size                 int64
	deleted              bool
}

// pageEntries returns page's versions and delete markers in S3's order:
// by key, then newest first. S3 returns the two kinds in two lists, each in
// that order; within a key only the versions' order matters, since delete
// markers are left out, and a stable sort by key keeps it.
func pageEntries(page *s3.ListObjectVersionsOutput) []versionEntry {
	es := make([]versionEntry, 0, len(page.Versions)+len(page.DeleteMarkers))
	for _, v := range page.Versions {
		es = append(es, versionEntry{key: aws.ToString(v.Key), versionID: versionID(v.VersionId), etag: aws.ToString(v.ETag), size: aws.ToInt64(v.Size)})
	}
	for _, d := range page.DeleteMarkers {
		es = append(es, versionEntry{key: aws.ToString(d.Key), versionID: versionID(d.VersionId), deleted: true})
	}
	slices.SortStableFunc(es, func(a, b versionEntry) int { return strings.Compare(a.key, b.key) })
	return es
}

// versionID returns a listed version id, with S3's "null" (an object
// written while the bucket kept no versions) as none: it is then pinned by
// its ETag, as s3ingest and its ingested markers pin it.
func versionID(id *string) string {
	if s := aws.ToString(id); s != "null" {
		return s
	}
	return ""
}
