package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// smallPages lists versions two at a time, so that a key's versions
// split across pages.
type smallPages struct{ *s3.Client }

func (c smallPages) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	in.MaxKeys = aws.Int32(2)
	return c.Client.ListObjectVersions(ctx, in, opts...)
}

// versionedBucket makes a versioned bucket on moto and writes, under v/,
// keys with several versions (one deleted since, one a prefix of another
// key), a key with only a delete marker, a hidden key and a key outside
// v/. It returns the versions of each key under v/ it wrote, oldest first.
func versionedBucket(t *testing.T) (*s3.Client, string, map[string][]dataset.Object) {
	t.Helper()
	c := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	bucket := localaws.VersionedBucket(t, c, "versions")
	want := map[string][]dataset.Object{}
	put := func(key, body string) {
		out, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(key, "v/") && !strings.HasPrefix(key, "v/_") {
			want[key] = append(want[key], dataset.Object{Bucket: bucket, Key: key, Size: int64(len(body)),
				ETag: strings.Trim(aws.ToString(out.ETag), `"`), VersionID: aws.ToString(out.VersionId)})
		}
	}
	del := func(key string) {
		if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		put("v/a", strings.Repeat("a", i+1))
		put("v/a2", strings.Repeat("b", i+2))
	}
	put("v/gone", "x")
	put("v/gone", "xy")
	del("v/gone")
	put("v/marker-only", "m")
	del("v/marker-only")
	// A key with only a delete marker left: its one version is removed.
	vs := want["v/marker-only"]
	if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("v/marker-only"), VersionId: aws.String(vs[0].VersionID)}); err != nil {
		t.Fatal(err)
	}
	delete(want, "v/marker-only")
	put("v/_hidden", "h")
	put("w/outside", "o")
	return c, bucket, want
}

// TestListVersions lists every version under a prefix, two entries a page,
// and from a cursor: each key once, with its versions oldest first and its
// newest as the listed object; keys with only delete markers, hidden keys
// and keys outside the prefix are left out, and the cursor is a whole key.
func TestListVersions(t *testing.T) {
	c, bucket, want := versionedBucket(t)
	list := func(from dataset.Cursor) (map[string][]dataset.Object, []string) {
		got := map[string][]dataset.Object{}
		var order []string
		for l, err := range dataset.List(t.Context(), smallPages{c}, dataset.Source{Bucket: bucket, Prefix: "v/", Versions: true}, from, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if l.Mark() {
				continue
			}
			if l.Next != (dataset.Cursor{After: l.Key}) || l.Object != l.Versions[len(l.Versions)-1] {
				t.Errorf("listed %+v: want its newest version and the cursor after its key", l)
			}
			order = append(order, l.Key)
			got[l.Key] = l.Versions
		}
		return got, order
	}
	got, order := list(dataset.Cursor{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"v/a", "v/a2", "v/gone"}, order); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	_, order = list(dataset.Cursor{After: "v/a"})
	if diff := cmp.Diff([]string{"v/a2", "v/gone"}, order); diff != "" {
		t.Errorf("keys after v/a (-want +got):\n%s", diff)
	}

	var objs []dataset.Object
	for o, err := range dataset.Objects(t.Context(), c, dataset.Source{Bucket: bucket, Keys: []string{"v/gone", "v/a"}, Versions: true}) {
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	if diff := cmp.Diff(append(append([]dataset.Object{}, want["v/gone"]...), want["v/a"]...), objs); diff != "" {
		t.Errorf("Objects of keys, each version oldest first (-want +got):\n%s", diff)
	}
}

// TestVersions finds one key's versions apart from the longer keys it is a
// prefix of, and says when a key has none.
func TestVersions(t *testing.T) {
	c, bucket, want := versionedBucket(t)
	got, err := dataset.Versions(t.Context(), smallPages{c}, bucket, "v/a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want["v/a"], got); diff != "" {
		t.Errorf("versions of v/a (-want +got):\n%s", diff)
	}
	for _, key := range []string{"v/marker-only", "v/nothing"} {
		if _, err := dataset.Versions(t.Context(), c, bucket, key); !errors.Is(err, dataset.ErrNotFound) || !strings.Contains(err.Error(), key) {
			t.Errorf("Versions(%s) = %v, want ErrNotFound naming the key", key, err)
		}
	}
	if err := (dataset.Source{Manifest: "s3://b/manifest.json", Versions: true}).Validate(); err == nil || !strings.Contains(err.Error(), "versions is not used with manifest") {
		t.Errorf("Validate of versions with a manifest = %v", err)
	}
}

// TestVersionsUnversioned lists a bucket that keeps no versions: each
// object is its one version, pinned by its ETag, as S3 reports "null".
func TestVersionsUnversioned(t *testing.T) {
	c := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	bucket := fmt.Sprintf("unversioned-%d", time.Now().UnixNano()%1e12)
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	out, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("abc")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dataset.Versions(t.Context(), c, bucket, "k")
	want := []dataset.Object{{Bucket: bucket, Key: "k", Size: 3, ETag: strings.Trim(aws.ToString(out.ETag), `"`)}}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("Versions = %+v, %v; want %+v", got, err, want)
	}
}
