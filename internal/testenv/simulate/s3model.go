package simulate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3Model is an in-process S3: buckets (versioned or not) of objects with
// ETags, Content-Encoding, ranged and pinned (VersionId, If-Match) GETs,
// conditional PutObject (If-None-Match: *), ListObjectsV2 with StartAfter
// and pagination, HeadObject and DeleteObject. It answers as S3 does on the
// calls the engine makes (see the conformance test), and keeps every write
// so that a checker can see an object rewritten with other bytes. It is
// safe for concurrent use.
type S3Model struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	seq     int
	// writes is every PutObject that took effect, in order.
	writes []Write
}

// Write is one PutObject that took effect.
type Write struct {
	Bucket, Key string
	Body        []byte
}

type bucket struct {
	versioned bool
	objects   map[string][]*version // oldest first
}

type version struct {
	id       string // "" in an unversioned bucket
	body     []byte
	etag     string // quoted
	encoding string
	deleted  bool // a delete marker
	modified time.Time
}

// NewS3Model returns an S3 with no buckets.
func NewS3Model() *S3Model { return &S3Model{buckets: map[string]*bucket{}} }

// CreateBucket makes a bucket; versioned turns versioning on.
func (m *S3Model) CreateBucket(name string, versioned bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets[name] = &bucket{versioned: versioned, objects: map[string][]*version{}}
}

// Writes returns the PutObjects that took effect so far.
func (m *S3Model) Writes() []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.writes)
}

// Object returns the latest body of bucket/key, if there is one.
func (m *S3Model) Object(bkt, key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.latest(bkt, key)
	if v == nil {
		return nil, false
	}
	return v.body, true
}

// Keys returns the keys under prefix with a live latest version, sorted.
func (m *S3Model) Keys(bkt, prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if b := m.buckets[bkt]; b != nil {
		for k := range b.objects {
			if strings.HasPrefix(k, prefix) && m.latest(bkt, k) != nil {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (m *S3Model) latest(bkt, key string) *version {
	b := m.buckets[bkt]
	if b == nil {
		return nil
	}
	vs := b.objects[key]
	if len(vs) == 0 || vs[len(vs)-1].deleted {
		return nil
	}
	return vs[len(vs)-1]
}

// s3Error is an error as the SDK returns it for an S3 error response.
func s3Error(status int, code, msg string) error {
	fault := smithy.FaultClient
	if status >= 500 {
		fault = smithy.FaultServer
	}
	return &smithy.OperationError{ServiceID: "S3", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault}},
	}}
}

// PutObject stores a new version; If-None-Match: * fails with
// PreconditionFailed when the key has a live object.
func (m *S3Model) PutObject(ctx context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var body []byte
	if in.Body != nil {
		var err error
		if body, err = io.ReadAll(in.Body); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bk, key := aws.ToString(in.Bucket), aws.ToString(in.Key)
	b := m.buckets[bk]
	if b == nil {
		return nil, s3Error(404, "NoSuchBucket", "The specified bucket does not exist")
	}
	if aws.ToString(in.IfNoneMatch) == "*" && m.latest(bk, key) != nil {
		return nil, s3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	}
	v := m.add(b, key, body, aws.ToString(in.ContentEncoding))
	m.writes = append(m.writes, Write{Bucket: bk, Key: key, Body: body})
	out := &s3.PutObjectOutput{ETag: aws.String(v.etag)}
	if v.id != "" {
		out.VersionId = aws.String(v.id)
	}
	return out, nil
}

// Put stores an object directly (the scenario's data) and returns its
// version: its id (empty when the bucket is not versioned) and ETag.
func (m *S3Model) Put(bkt, key string, body []byte, encoding string) (versionID, etag string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.add(m.buckets[bkt], key, body, encoding)
	return v.id, strings.Trim(v.etag, `"`)
}

// Delete removes key: a delete marker in a versioned bucket.
func (m *S3Model) Delete(bkt, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.del(m.buckets[bkt], key)
}

func (m *S3Model) add(b *bucket, key string, body []byte, encoding string) *version {
	m.seq++
	sum := md5.Sum(body)
	v := &version{body: bytes.Clone(body), etag: `"` + hex.EncodeToString(sum[:]) + `"`, encoding: encoding,
		modified: time.Date(2026, 1, 1, 0, 0, m.seq, 0, time.UTC)}
	if b.versioned {
		v.id = fmt.Sprintf("v%06d.%s", m.seq, hex.EncodeToString(sum[:4]))
		b.objects[key] = append(b.objects[key], v)
	} else {
		b.objects[key] = []*version{v}
	}
	return v
}

func (m *S3Model) del(b *bucket, key string) {
	if b.versioned {
		m.seq++
		b.objects[key] = append(b.objects[key], &version{id: fmt.Sprintf("d%06d", m.seq), deleted: true})
		return
	}
	delete(b.objects, key)
}

// DeleteObject deletes the latest version (a delete marker when
// versioned) or, with VersionId, that version.
func (m *S3Model) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[aws.ToString(in.Bucket)]
	if b == nil {
		return nil, s3Error(404, "NoSuchBucket", "The specified bucket does not exist")
	}
	key := aws.ToString(in.Key)
	if id := aws.ToString(in.VersionId); id != "" {
		b.objects[key] = slices.DeleteFunc(b.objects[key], func(v *version) bool { return v.id == id })
		return &s3.DeleteObjectOutput{}, nil
	}
	m.del(b, key)
	return &s3.DeleteObjectOutput{}, nil
}

// find returns the version a GET or HEAD names.
func (m *S3Model) find(bk, key, versionID string) (*version, error) {
	b := m.buckets[bk]
	if b == nil {
		return nil, s3Error(404, "NoSuchBucket", "The specified bucket does not exist")
	}
	if versionID != "" {
		for _, v := range b.objects[key] {
			if v.id == versionID {
				if v.deleted {
					return nil, s3Error(405, "MethodNotAllowed", "The specified method is not allowed against this resource.")
				}
				return v, nil
			}
		}
		return nil, s3Error(404, "NoSuchVersion", "The specified version does not exist.")
	}
	v := m.latest(bk, key)
	if v == nil {
		return nil, s3Error(404, "NoSuchKey", "The specified key does not exist.")
	}
	return v, nil
}

// HeadObject answers with the version's size, ETag, version id and
// Content-Encoding; a missing one is NotFound, as S3 says it without a body.
func (m *S3Model) HeadObject(ctx context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, err := m.find(aws.ToString(in.Bucket), aws.ToString(in.Key), aws.ToString(in.VersionId))
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() != "MethodNotAllowed" {
			return nil, s3Error(404, "NotFound", "Not Found")
		}
		return nil, err
	}
	if im := aws.ToString(in.IfMatch); im != "" && im != v.etag {
		return nil, s3Error(412, "PreconditionFailed", "Precondition Failed")
	}
	out := &s3.HeadObjectOutput{ContentLength: aws.Int64(int64(len(v.body))), ETag: aws.String(v.etag), LastModified: aws.Time(v.modified)}
	if v.id != "" {
		out.VersionId = aws.String(v.id)
	}
	if v.encoding != "" {
		out.ContentEncoding = aws.String(v.encoding)
	}
	return out, nil
}

// GetObject answers with the version's bytes, or the Range of them.
func (m *S3Model) GetObject(ctx context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, err := m.find(aws.ToString(in.Bucket), aws.ToString(in.Key), aws.ToString(in.VersionId))
	if err != nil {
		return nil, err
	}
	if im := aws.ToString(in.IfMatch); im != "" && im != v.etag && im != "*" {
		return nil, s3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	}
	size := int64(len(v.body))
	start, end := int64(0), size-1
	out := &s3.GetObjectOutput{ETag: aws.String(v.etag), LastModified: aws.Time(v.modified)}
	if r := aws.ToString(in.Range); r != "" {
		spec, ok := strings.CutPrefix(r, "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		s, err := strconv.ParseInt(a, 10, 64)
		if !ok || err != nil {
			return nil, s3Error(400, "InvalidArgument", "bad range "+r)
		}
		if s >= size {
			return nil, s3Error(416, "InvalidRange", "The requested range is not satisfiable")
		}
		start = s
		if b != "" {
			e, err := strconv.ParseInt(b, 10, 64)
			if err != nil || e < s {
				return nil, s3Error(400, "InvalidArgument", "bad range "+r)
			}
			end = min(e, size-1)
		}
		out.ContentRange = aws.String(fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	}
	body := v.body[start : end+1]
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = aws.Int64(int64(len(body)))
	if v.id != "" {
		out.VersionId = aws.String(v.id)
	}
	if v.encoding != "" {
		out.ContentEncoding = aws.String(v.encoding)
	}
	return out, nil
}

// ListObjectsV2 lists live keys in order, after StartAfter or the
// continuation token, MaxKeys (default 1000) at a time.
func (m *S3Model) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[aws.ToString(in.Bucket)]
	if b == nil {
		return nil, s3Error(404, "NoSuchBucket", "The specified bucket does not exist")
	}
	prefix := aws.ToString(in.Prefix)
	after := aws.ToString(in.StartAfter)
	if t := aws.ToString(in.ContinuationToken); t != "" {
		after = max(after, t)
	}
	maxKeys := int(aws.ToInt32(in.MaxKeys))
	if maxKeys <= 0 || maxKeys > 1000 {
		maxKeys = 1000
	}
	var keys []string
	for k := range b.objects {
		if strings.HasPrefix(k, prefix) && k > after && m.latest(aws.ToString(in.Bucket), k) != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := &s3.ListObjectsV2Output{Name: in.Bucket, Prefix: in.Prefix}
	if len(keys) > maxKeys {
		keys = keys[:maxKeys]
		out.IsTruncated = aws.Bool(true)
		out.NextContinuationToken = aws.String(keys[len(keys)-1])
	} else {
		out.IsTruncated = aws.Bool(false)
	}
	for _, k := range keys {
		v := b.objects[k][len(b.objects[k])-1]
		out.Contents = append(out.Contents, types.Object{Key: aws.String(k), Size: aws.Int64(int64(len(v.body))), ETag: aws.String(v.etag), LastModified: aws.Time(v.modified)})
	}
	out.KeyCount = aws.Int32(int32(len(out.Contents)))
	return out, nil
}

// ListObjectVersions lists the versions and delete markers of keys under
// Prefix, by key and then newest first, after KeyMarker (and, with it,
// VersionIdMarker), MaxKeys (default 1000) entries at a time. An
// unversioned bucket's objects have the version id "null", as on S3.
func (m *S3Model) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, _ ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[aws.ToString(in.Bucket)]
	if b == nil {
		return nil, s3Error(404, "NoSuchBucket", "The specified bucket does not exist")
	}
	prefix, after, afterVersion := aws.ToString(in.Prefix), aws.ToString(in.KeyMarker), aws.ToString(in.VersionIdMarker)
	maxKeys := int(aws.ToInt32(in.MaxKeys))
	if maxKeys <= 0 || maxKeys > 1000 {
		maxKeys = 1000
	}
	var keys []string
	for k := range b.objects {
		if strings.HasPrefix(k, prefix) && (k > after || k == after && afterVersion != "") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := &s3.ListObjectVersionsOutput{Name: in.Bucket, Prefix: in.Prefix, IsTruncated: aws.Bool(false)}
	n := 0
	for _, k := range keys {
		vs := b.objects[k]
		skip := k == after // resume after afterVersion, newest first
		for i := len(vs) - 1; i >= 0; i-- {
			v := vs[i]
			id := cmp.Or(v.id, "null")
			if skip {
				skip = id != afterVersion
				continue
			}
			if n == maxKeys {
				out.IsTruncated = aws.Bool(true)
				return out, nil
			}
			n++
			out.NextKeyMarker, out.NextVersionIdMarker = aws.String(k), aws.String(id)
			latest := i == len(vs)-1
			if v.deleted {
				out.DeleteMarkers = append(out.DeleteMarkers, types.DeleteMarkerEntry{Key: aws.String(k), VersionId: aws.String(id), IsLatest: aws.Bool(latest), LastModified: aws.Time(v.modified)})
				continue
			}
			out.Versions = append(out.Versions, types.ObjectVersion{Key: aws.String(k), VersionId: aws.String(id), IsLatest: aws.Bool(latest),
				Size: aws.Int64(int64(len(v.body))), ETag: aws.String(v.etag), LastModified: aws.Time(v.modified)})
		}
	}
	out.NextKeyMarker, out.NextVersionIdMarker = nil, nil
	return out, nil
}
