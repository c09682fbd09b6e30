package s3sqscdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// batchOperationsPrincipal is the service that assumes a Batch
// Operations job's role.
const batchOperationsPrincipal = "batchoperations.s3.amazonaws.com"

// buildBatchOperations creates the role an S3 Batch Operations job that
// invokes fanout needs: it may invoke fanout (the function, its versions
// and aliases), read the job's manifest under the manifest prefix, and
// write the completion report under the report prefix; nothing else.
// fanout itself reads the objects the manifest names: they must be among
// its datasets.
func (s *S3SQS) buildBatchOperations() {
	bo := s.p.Fanout.BatchOperations
	role := awsiam.NewRole(s.Construct, jsii.String("BatchOperationsRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String(batchOperationsPrincipal), nil),
		Description: jsii.String("s3sqs: S3 Batch Operations jobs that invoke fanout (read the manifest, write the completion report)"),
	})
	s.BatchOperationsRole = role
	fn := s.FanoutFunction.FunctionArn()
	invoke := awsiam.NewPolicy(s.Construct, jsii.String("BatchOperationsInvoke"), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{allow([]string{"lambda:InvokeFunction"}, fn, jsii.String(*fn+":*"))},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(invoke, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String(nagIAM5),
		Reason: jsii.String("Batch Operations invokes the function ARN a job names, which may be a version or an alias of fanout " +
			"(<function ARN>:<qualifier>); the wildcard is only in the qualifier of this one function."),
		// The policy holds this one statement: the only <...Arn>:* is fanout's.
		AppliesTo: &[]any{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]+\.Arn>:\*$/`)}},
	}}, jsii.Bool(true))

	manifest := bucketARN(bo.ManifestBucketName)
	read := awsiam.NewPolicy(s.Construct, jsii.String("BatchOperationsManifest"), &awsiam.PolicyProps{
		Roles: &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{
			allow([]string{"s3:GetObject", "s3:GetObjectVersion"}, objectARNs(manifest, bo.ManifestPrefix)...),
			allow([]string{"s3:GetBucketLocation"}, &manifest),
		},
	})
	suppressObjectARNs(read, "a job reads its manifest (a CSV list or an S3 Inventory manifest) from the manifest prefix, at the version the job names", bo.ManifestPrefix)

	report := bucketARN(bo.ReportBucketName)
	write := awsiam.NewPolicy(s.Construct, jsii.String("BatchOperationsReport"), &awsiam.PolicyProps{
		Roles: &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{
			allow([]string{"s3:PutObject"}, objectARNs(report, bo.ReportPrefix)...),
			allow([]string{"s3:GetBucketLocation"}, &report),
		},
	})
	suppressObjectARNs(write, "a job writes its completion report (one CSV per job and a manifest of them) under the report prefix", bo.ReportPrefix)
}
