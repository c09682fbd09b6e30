package s3sqscdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// useReport creates the run report bucket, or takes the existing one, and
// gives fanout REPORT_S3_URI; the returned function grants s3:PutObject
// under the prefix only (fanout writes the report and reads none of it).
func (s *S3SQS) useReport(own map[string]string) func(role awsiam.Role) {
	rp := s.p.Fanout.Report
	if !rp.Enabled {
		return func(awsiam.Role) {}
	}
	if rp.ExistingBucketName != "" {
		s.ReportBucket = awss3.Bucket_FromBucketName(s.Construct, jsii.String("ReportBucket"), jsii.String(rp.ExistingBucketName))
	} else {
		b := s.privateBucket("ReportBucket", &awss3.LifecycleRule{
			Id:         jsii.String("expire-run-reports"),
			Prefix:     jsii.String(rp.Prefix),
			Expiration: awscdk.Duration_Days(jsii.Number(rp.ExpirationDays)),
		})
		suppress(b, nagS1, "The report bucket holds fanout's run reports (a manifest per run, the failed ranges of each task), written by the fanout role only and deleted by the lifecycle rule; each write is logged by the run that made it. Server access logs would add a second log of the same writes; turn on CloudTrail data events for the bucket when an audit trail is needed.")
		s.ReportBucket = b
	}
	name := *s.ReportBucket.BucketName()
	own["REPORT_S3_URI"] = s.ReportS3URI()
	return func(role awsiam.Role) {
		s.grantPutUnder(role, "Report", name, rp.Prefix, "fanout writes its run reports under the report prefix, objects named by run and task")
	}
}

// ReportS3URI is fanout's REPORT_S3_URI, s3://<report bucket>/<prefix>, or
// "" when the run report is off.
func (s *S3SQS) ReportS3URI() string {
	if s.ReportBucket == nil {
		return ""
	}
	return "s3://" + *s.ReportBucket.BucketName() + "/" + s.p.Fanout.Report.Prefix
}
