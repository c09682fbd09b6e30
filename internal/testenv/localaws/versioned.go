package localaws

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// VersionedBucket creates a bucket that keeps versions, named prefix and
// a number of this run, on the S3 that c talks to (moto_server's keeps
// versions; the in-process one does not), and returns its name.
func VersionedBucket(tb testing.TB, c *s3.Client, prefix string) string {
	tb.Helper()
	bucket := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e12)
	ctx := tb.Context()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		tb.Fatal(err)
	}
	return bucket
}
