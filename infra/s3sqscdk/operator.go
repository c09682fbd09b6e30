package s3sqscdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// receiveActions are what `s3sqs redrive` needs on a queue it takes
// messages from: it reads the queue's size, receives, deletes what it
// sent and hands back what it could not.
var receiveActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}

// buildOperatorPolicy creates OperatorPolicy, the managed policy that the
// role of whoever runs the CLI against this stack attaches: with fanout,
// planning a run of the datasets and queueing its tasks (s3sqs fanout
// -work-queue-url, with -dry-run too), and redriving the failure queue to
// the target and the work DLQ to the work queue; with the ingest path,
// redriving the ingest DLQ and (with claims) reconciling the source bucket
// into the ingest queue; with claims, status, pause, resume, cancel and
// set. Nothing else of the stack: no output queue, no DLQ of a consumer's
// queue, no report. TestOperatorPolicy (cmd/s3sqs) holds template.yaml's
// copy of it, which the SAM parity check holds equal to this one, to the
// calls the documented commands make.
func (s *S3SQS) buildOperatorPolicy() {
	var sts []awsiam.PolicyStatement
	var receiveFrom []*string
	datasets := s.datasets()
	if s.FanoutFunction != nil {
		if len(datasets) > 0 {
			list, read, keys := datasetAccess(datasets)
			sts = append(sts, list...)
			sts = append(sts, read)
			if keys != nil {
				sts = append(sts, keys)
			}
		}
		sts = append(sts,
			allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, s.WorkQueue.QueueArn()),
			allow([]string{"sqs:GetQueueUrl", "sqs:SendMessage", "sqs:GetQueueAttributes"}, s.TargetQueue.QueueArn()))
		if fo := s.p.Fanout; fo.TargetKeyARN != "" {
			sts = append(sts, kmsSend(fo.TargetKeyARN))
		}
		receiveFrom = append(receiveFrom, s.FailureQueue.QueueArn(), s.WorkDLQ.QueueArn())
	}
	if s.IngestQueue != nil {
		receiveFrom = append(receiveFrom, s.IngestDLQ.QueueArn())
		sts = append(sts, allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, s.IngestQueue.QueueArn()))
		if s.ClaimsTable != nil {
			list := allow([]string{"s3:ListBucketVersions"}, s.Bucket.BucketArn())
			if p := s.p.Ingest.KeyPrefix; p != "" {
				list.AddCondition(jsii.String("StringLike"), map[string]any{"s3:prefix": []string{p + "*"}})
			}
			sts = append(sts, list)
		}
	}
	if len(receiveFrom) > 0 {
		sts = append(sts, allow(receiveActions, receiveFrom...))
	}
	if s.ClaimsTable != nil {
		sts = append(sts, allow([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, s.ClaimsTable.TableArn()))
	}
	if s.QueueKey != nil {
		sts = append(sts, kmsSend(*s.QueueKey.KeyArn()))
	}
	if len(sts) == 0 {
		return
	}
	s.OperatorPolicy = awsiam.NewManagedPolicy(s.Construct, jsii.String("OperatorPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("s3sqs: what the s3sqs CLI needs to start, watch, steer, redrive and reconcile this stack's runs; attach it to an operator's role"),
		Statements:  &sts,
	})
	if s.FanoutFunction != nil && len(datasets) > 0 {
		suppressObjectARNs(s.OperatorPolicy, "an operator plans and previews runs of the datasets (buckets and prefixes) fanout reads, as fanout does", datasetPrefixes(datasets)...)
	}
}
