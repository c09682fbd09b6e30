package s3sqscdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// buildOffload creates the offload bucket, or takes the existing one.
func (s *S3SQS) buildOffload() {
	off := s.p.Offload
	if off.ExistingBucketName != "" {
		s.OffloadBucket = awss3.Bucket_FromBucketName(s.Construct, jsii.String("OffloadBucket"), jsii.String(off.ExistingBucketName))
		return
	}
	b := s.privateBucket("OffloadBucket", &awss3.LifecycleRule{
		Id:                                  jsii.String("expire-offloaded-records"),
		Prefix:                              jsii.String(off.Prefix),
		Expiration:                          awscdk.Duration_Days(jsii.Number(off.ExpirationDays)),
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
	})
	suppress(b, nagS1, "The offload bucket holds record payloads that the lifecycle rule deletes after days; each object is written by one function call that the function's log and metrics count (RecordsOffloaded). Server access logs would log every PUT and GET of payloads a second time; turn on CloudTrail data events for the bucket when an audit trail is needed.")
	s.OffloadBucket = b
}

// useOffload gives a function the offload bucket: OFFLOAD_S3_URI (and
// OFFLOAD), and s3:PutObject under the prefix only.
func (s *S3SQS) useOffload(own map[string]string) func(role awsiam.Role) {
	if s.OffloadBucket == nil {
		return func(awsiam.Role) {}
	}
	off := s.p.Offload
	own["OFFLOAD_S3_URI"] = "s3://" + *s.OffloadBucket.BucketName() + "/" + off.Prefix
	if off.Always {
		own["OFFLOAD"] = "always"
	}
	return func(role awsiam.Role) {
		s.grantPutUnder(role, "Offload", *s.OffloadBucket.BucketName(), off.Prefix, "the functions write offloaded records under the offload prefix, one object per record")
	}
}

// GrantReadPayloads lets grantee, a consumer of the output or target
// queue, read the offloaded records (s3:GetObject under the offload
// prefix), as an SQS Extended Client or pkg/sqsextended's Resolver does.
// With deletePayloads it may also delete them after processing
// (s3:DeleteObject), as the Extended Clients' deletePayloadFromS3 does. It
// returns nil when offload is off.
func (s *S3SQS) GrantReadPayloads(grantee awsiam.IGrantable, deletePayloads bool) awsiam.Grant {
	if s.OffloadBucket == nil {
		return nil
	}
	actions := []string{"s3:GetObject"}
	if deletePayloads {
		actions = append(actions, "s3:DeleteObject")
	}
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(actions...),
		ResourceArns: &[]*string{jsii.String(*s.OffloadBucket.BucketArn() + "/" + s.p.Offload.Prefix + "*")},
	})
}
