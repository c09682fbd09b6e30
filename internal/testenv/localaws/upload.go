package localaws

import (
	"bytes"
	"context"
	"iter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// uploadPart is the size at which UploadLines sends a part.
const uploadPart = 16 << 20

// UploadLines writes lines, each followed by a newline, as one object of
// any size with a multipart upload, holding one 16 MiB part in memory at a
// time: the benchmarks' objects of a GiB and more.
func UploadLines(ctx context.Context, c *s3.Client, bucket, key string, lines iter.Seq[string]) error {
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return err
	}
	var (
		parts []types.CompletedPart
		buf   bytes.Buffer
	)
	flush := func() error {
		num := int32(len(parts) + 1)
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mu.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf.Bytes())})
		if err != nil {
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		buf.Reset()
		return nil
	}
	for line := range lines {
		buf.WriteString(line)
		buf.WriteByte('\n')
		if buf.Len() >= uploadPart {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if buf.Len() > 0 || len(parts) == 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: mu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}
