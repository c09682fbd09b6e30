// Package s3sqscdk is the s3sqs deployment as a CDK construct: the ingest
// path (bucket → SNS topic → ingest queue → s3ingest → output queue) and the
// fanout path (fanout function, its work and failure queues, the target
// queue), secure by default.
//
// Create one with [New]:
//
//	s, err := s3sqscdk.New(stack, "S3SQS", &s3sqscdk.Props{
//		Ingest: s3sqscdk.IngestProps{KeyPrefix: "incoming/"},
//		Fanout: s3sqscdk.FanoutProps{TargetQueueARN: "arn:aws:sqs:eu-west-1:111122223333:orders"},
//	})
//
// Every field of [Props] is optional: its zero value means the documented
// default. [New] checks the props and returns every problem at once.
//
// What it builds, for a security review:
//   - least privilege: each function has its own role whose statements name
//     exact actions (no "*" actions) on the ARNs of this construct's
//     resources, the buckets and prefixes it is given, and nothing else;
//   - encryption at rest on every queue (SSE-SQS, or a KMS key with
//     [EncryptionKMS]) and on the topic (always a KMS key, because S3 cannot
//     publish to a topic encrypted with the AWS managed key); TLS-only
//     policies on the buckets, queues and topic;
//   - a topic policy that lets only s3.amazonaws.com publish, and only for
//     the source bucket (aws:SourceArn) in this account (aws:SourceAccount);
//   - dead-letter queues with maxReceiveCount of at least 5, visibility
//     timeouts of at least 6x the consuming function's timeout, partial
//     batch responses (ReportBatchItemFailures);
//   - log groups with retention and JSON logs; alarms on dead-letter queue
//     depth and on the age of the oldest ingest message;
//   - cdk-nag suppressions (AwsSolutions, Serverless) only where a rule does
//     not fit, each with its reason, attached to the resource concerned.
package s3sqscdk
