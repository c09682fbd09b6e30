package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// newStack builds the s3sqs stack from cfg, with the outputs a user needs.
func newStack(scope constructs.Construct, cfg appConfig, env *awscdk.Environment) (awscdk.Stack, *s3sqscdk.S3SQS, error) {
	stack := awscdk.NewStack(scope, jsii.String(cfg.stackName), &awscdk.StackProps{
		Env:         env,
		Description: jsii.String("s3sqs: S3 → SNS → SQS → s3ingest, and fanout from S3 datasets to SQS"),
	})
	props := cfg.props
	if cfg.alarmTopicARN != "" {
		topic := awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(cfg.alarmTopicARN))
		props.AlarmActions = []awscloudwatch.IAlarmAction{awscloudwatchactions.NewSnsAction(topic)}
	}
	s, err := s3sqscdk.New(stack, "S3SQS", &props)
	if err != nil {
		return nil, nil, err
	}

	out := func(id, description string, value *string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	if s.Topic != nil {
		out("SourceBucketName", "bucket whose new objects s3ingest reads", s.Bucket.BucketName())
		out("TopicArn", "SNS topic of the bucket's object-created notifications; subscribe more queues to it", s.Topic.TopicArn())
		out("IngestQueueUrl", "queue of S3 notifications that s3ingest consumes", s.IngestQueue.QueueUrl())
		out("IngestDLQUrl", "notifications s3ingest failed repeatedly; redrive to the ingest queue once fixed", s.IngestDLQ.QueueUrl())
		out("OutputQueueUrl", "queue s3ingest sends records to", s.OutputQueue.QueueUrl())
		out("OutputQueueArn", "ARN of the output queue, for its consumers' permissions", s.OutputQueue.QueueArn())
		out("OutputDLQUrl", "DLQ of the output queue", s.OutputDLQ.QueueUrl())
		out("S3IngestFunctionName", "the s3ingest function", s.IngestFunction.FunctionName())
	}
	if s.FanoutFunction != nil {
		out("FanoutFunctionName", "the fanout function; invoke it with a dataset request", s.FanoutFunction.FunctionName())
		out("FanoutRoleArn", "fanout's role: allow it sqs:SendMessage and sqs:GetQueueUrl (and sqs:GetQueueAttributes for TARGET_MAX_BACKLOG) in an existing target queue's policy", s.FanoutFunction.Role().RoleArn())
		out("WorkQueueUrl", "fanout's queue of chunk tasks (s3sqs fanout and s3sqs resume -work-queue-url)", s.WorkQueue.QueueUrl())
		out("WorkDLQUrl", "chunk tasks and asynchronous invocations fanout failed repeatedly", s.WorkDLQ.QueueUrl())
		out("FailureQueueUrl", "records fanout could not deliver, with the reason", s.FailureQueue.QueueUrl())
		out("TargetQueueUrl", "queue fanout sends records to", s.TargetQueue.QueueUrl())
		out("TargetQueueArn", "ARN of the target queue", s.TargetQueue.QueueArn())
		if s.TargetDLQ != nil {
			out("TargetDLQUrl", "DLQ of the target queue", s.TargetDLQ.QueueUrl())
		}
		if s.BatchOperationsRole != nil {
			out("BatchOperationsRoleArn", "role of S3 Batch Operations jobs that invoke fanout (create-job --role-arn)", s.BatchOperationsRole.RoleArn())
		}
		if uri := s.ReportS3URI(); uri != "" {
			out("ReportS3Uri", "where fanout writes its run reports (REPORT_S3_URI)", &uri)
		}
	}
	if s.ClaimsTable != nil {
		out("ClaimsTableName", "the claims table: run-once claims and the state fanout's runs share (s3sqs status -claims-table)", s.ClaimsTable.TableName())
	}
	if s.OperatorPolicy != nil {
		out("OperatorPolicyArn", "managed policy for an operator's role: what the s3sqs CLI needs against this stack (docs/deploy-cdk.md#operating-a-run)", s.OperatorPolicy.ManagedPolicyArn())
	}
	if s.QueueKey != nil {
		out("QueueKeyArn", "KMS key of the queues; consumers need kms:Decrypt on it", s.QueueKey.KeyArn())
	}
	return stack, s, nil
}
