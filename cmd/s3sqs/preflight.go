package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// s3Output is an S3 output a command writes to, by its flag.
type s3Output struct{ flag, uri string }

// checkBuckets asks S3 for the bucket of each S3 output named
// (HeadBucket), before a record is read: a bucket that does not exist is
// refused, naming its flag. Found when a record first needed it, the
// records refused by then would end nowhere. A bucket these credentials
// may write but not list (403) is taken as it is: only writing tells.
func checkBuckets(ctx context.Context, s3c *s3.Client, outputs ...s3Output) error {
	for _, o := range outputs {
		if o.uri == "" {
			continue
		}
		bucket, _, err := dataset.ParseS3URI(o.uri)
		if err != nil {
			return fmt.Errorf("-%s: %w", o.flag, err)
		}
		_, err = s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		var nf *types.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("-%s: bucket %s does not exist (or is in another account's partition); nothing was read or sent", o.flag, bucket)
		}
	}
	return nil
}
