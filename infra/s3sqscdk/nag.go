package s3sqscdk

import (
	"regexp"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The cdk-nag rules this construct suppresses somewhere, each with its
// reason where it is suppressed.
const (
	nagDDB3                 = "AwsSolutions-DDB3"
	nagIAM4                 = "AwsSolutions-IAM4"
	nagS1                   = "AwsSolutions-S1"
	nagIAM5                 = "AwsSolutions-IAM5"
	nagSQS3                 = "AwsSolutions-SQS3"
	nagLambdaDLQ            = "Serverless-LambdaDLQ"
	nagLambdaESMDestination = "Serverless-LambdaEventSourceMappingDestination"
	nagLambdaTracing        = "Serverless-LambdaTracing"
	nagSQSRedrivePolicy     = "Serverless-SQSRedrivePolicy"
)

// suppress records a cdk-nag suppression of rule on c and its children.
func suppress(c constructs.IConstruct, rule, reason string) {
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String(rule),
		Reason: jsii.String(reason),
	}}, jsii.Bool(true))
}

// suppressObjectARNs suppresses AwsSolutions-IAM5 on policy for the object
// ARNs under prefixes only ("<bucket ARN>/<prefix>*"): reading or writing
// any object of a prefix is the job, and S3 has no narrower resource for it. Any other
// wildcard in the policy still fails the check.
func suppressObjectARNs(policy constructs.IConstruct, why string, prefixes ...string) {
	if len(prefixes) == 0 {
		prefixes = []string{""}
	}
	applies := make([]any, 0, len(prefixes))
	for _, p := range prefixes {
		// cdk-nag shows an object ARN as
		// "Resource::arn:<AWS::Partition>:s3:::<bucket>/<prefix>*", the
		// bucket being a name or a <Ref>; the bucket part may not hold a
		// slash or a wildcard.
		applies = append(applies, &cdknag.RegexAppliesTo{
			Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:s3:::[^/*]+\/` + jsRegexpQuote(p) + `\*$/`),
		})
	}
	cdknag.NagSuppressions_AddResourceSuppressions(policy, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String(nagIAM5),
		Reason:    jsii.String("Object ARNs ending in '*' under the given prefixes: " + why + ". The wildcard is only in the object key, within the named bucket."),
		AppliesTo: &applies,
	}}, jsii.Bool(true))
}

// jsRegexpQuote escapes s for a JavaScript regular expression literal.
func jsRegexpQuote(s string) string {
	return regexp.MustCompile(`[\\^$.|?*+()\[\]{}/]`).ReplaceAllString(s, `\$0`)
}
