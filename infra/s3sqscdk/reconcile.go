package s3sqscdk

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"
)

// buildReconcile runs a reconcile of the source bucket (under KeyPrefix)
// every FanoutProps.ReconcileEveryMinutes: an EventBridge Scheduler schedule
// invokes fanout with {"reconcile": ...}, and fanout sends the
// notifications of the object versions s3ingest never ingested to the
// ingest queue (RECONCILE_QUEUE_URL). fanout gets exactly that: listing the
// bucket's versions under the prefix, and sending to the ingest queue; the
// schedule's role may only invoke fanout.
func (s *S3SQS) buildReconcile() {
	fn := s.FanoutFunction
	role := fn.Role()
	fn.AddEnvironment(jsii.String("RECONCILE_QUEUE_URL"), s.IngestQueue.QueueUrl(), nil)
	role.AddToPrincipalPolicy(allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, s.IngestQueue.QueueArn()))
	list := allow([]string{"s3:ListBucketVersions"}, s.Bucket.BucketArn())
	if p := s.p.Ingest.KeyPrefix; p != "" {
		list.AddCondition(jsii.String("StringLike"), map[string]any{"s3:prefix": []string{p + "*"}})
	}
	role.AddToPrincipalPolicy(list)

	s.ReconcileScheduleRole = awsiam.NewRole(s.Construct, jsii.String("ReconcileScheduleRole"), &awsiam.RoleProps{
		Description: jsii.String("s3sqs: the reconcile schedule, which invokes fanout"),
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil),
	})
	invoker := s.ReconcileScheduleRole
	invoker.AddToPolicy(allow([]string{"lambda:InvokeFunction"}, fn.FunctionArn()))
	input := awscdk.Stack_Of(s.Construct).ToJsonString(map[string]any{
		"reconcile": map[string]any{"bucket": s.Bucket.BucketName(), "prefix": s.p.Ingest.KeyPrefix},
	}, nil)
	awsscheduler.NewCfnSchedule(s.Construct, jsii.String("ReconcileSchedule"), &awsscheduler.CfnScheduleProps{
		Description:        jsii.String("s3sqs: reconcile the source bucket with s3ingest's claims table, sending what it never ingested to the ingest queue"),
		ScheduleExpression: jsii.String(fmt.Sprintf("rate(%d minutes)", s.p.Fanout.ReconcileEveryMinutes)),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     fn.FunctionArn(),
			RoleArn: invoker.RoleArn(),
			Input:   input,
		},
	})
}
