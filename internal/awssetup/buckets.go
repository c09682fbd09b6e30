package awssetup

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// S3Output is an S3 output (s3://bucket/prefix) by the setting that names
// it: a variable, or a flag with its dash.
type S3Output struct{ Setting, URI string }

// HeadBucketAPI is the part of the S3 client CheckBuckets uses.
type HeadBucketAPI interface {
	HeadBucket(ctx context.Context, params *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
}

// CheckBuckets asks S3 for the bucket of each output named (one
// HeadBucket each, empty URIs apart), before a record is read: a bucket
// that does not exist is refused, naming its setting. Found when a record
// first needed it, the records refused by then would end nowhere. Any
// other answer passes: a bucket these credentials may write but not list
// (403, as a function's role without s3:ListBucket gets) is taken as it
// is, since only writing tells.
func CheckBuckets(ctx context.Context, s3c HeadBucketAPI, outputs ...S3Output) error {
	for _, o := range outputs {
		if o.URI == "" {
			continue
		}
		bucket, _, err := dataset.ParseS3URI(o.URI)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Setting, err)
		}
		_, err = s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		if nf := (*types.NotFound)(nil); errors.As(err, &nf) {
			return fmt.Errorf("%s: bucket %s does not exist (or is in another account's partition); nothing was read or sent", o.Setting, bucket)
		}
	}
	return nil
}
