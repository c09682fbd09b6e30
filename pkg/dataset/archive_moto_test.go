package dataset_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// headCounter counts the HeadObject calls of a client.
type headCounter struct {
	*s3.Client
	heads atomic.Int64
}

func (c *headCounter) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c.heads.Add(1)
	return c.Client.HeadObject(ctx, in, opts...)
}

// TestInventoryArchives lists a CSV S3 Inventory report with the
// StorageClass and IntelligentTieringAccessTier fields on moto_server,
// whose objects keep their storage classes: GLACIER and DEEP_ARCHIVE rows
// are looked at with HeadObject and come out archived; STANDARD and an
// Intelligent-Tiering row in a tier a GET reads get no HeadObject; a row in
// an archive tier gets one (moto has no archive tiers, so it comes out
// readable, as after a restore). A prefix listing of the same objects
// gives the same archives.
func TestInventoryArchives(t *testing.T) {
	client := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	c := &headCounter{Client: client}
	bucket := fmt.Sprintf("inv-archives-%d", time.Now().UnixNano())
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	rows := []struct{ key, class, tier string }{
		{"d/standard", "STANDARD", ""},
		{"d/glacier", "GLACIER", ""},
		{"d/deep", "DEEP_ARCHIVE", ""},
		{"d/it-frequent", "INTELLIGENT_TIERING", "FREQUENT"},
		{"d/it-archive", "INTELLIGENT_TIERING", "ARCHIVE_ACCESS"},
	}
	var csv bytes.Buffer
	for _, r := range rows {
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(r.key), StorageClass: s3types.StorageClass(r.class), Body: strings.NewReader("x\n")})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&csv, "%q,%q,\"2\",%q,%q\n", bucket, r.key, r.class, r.tier)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(csv.Bytes())
	zw.Close()
	manifest := putInventory(t, client, bucket, "inv", "CSV", "Bucket, Key, Size, StorageClass, IntelligentTieringAccessTier", [][]byte{gz.Bytes()})

	archives := func(src dataset.Source) map[string]string {
		got := map[string]string{}
		for l, err := range dataset.List(t.Context(), c, src, dataset.Cursor{}, dataset.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if !l.Mark() && l.Archive != "" {
				got[l.Key] = l.Archive
			}
		}
		return got
	}
	want := map[string]string{"d/glacier": "GLACIER", "d/deep": "DEEP_ARCHIVE"}
	if got := archives(dataset.Source{Manifest: manifest}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("inventory: archived %v, want %v", got, want)
	}
	if n := c.heads.Swap(0); n != 3 {
		t.Errorf("inventory: %d HeadObject calls, want 3 (glacier, deep, it-archive)", n)
	}
	if got := archives(dataset.Source{Bucket: bucket, Prefix: "d/"}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("prefix: archived %v, want %v", got, want)
	}
	if n := c.heads.Swap(0); n != 4 {
		t.Errorf("prefix: %d HeadObject calls, want 4 (each object in a class that may be archived)", n)
	}
}
