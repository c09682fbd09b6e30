package s3sqscdk

import (
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// buildFanout creates the work queue, the failure queue, the target queue
// (or takes the existing one), fanout and its permissions.
func (s *S3SQS) buildFanout() {
	fo := s.p.Fanout
	s.WorkDLQ = s.deadLetterQueue("WorkDLQ", "chunk tasks that fanout failed "+itoa(s.p.MaxReceiveCount)+" times, and failed asynchronous invocations of fanout", false)
	s.WorkQueue = s.queue("WorkQueue", queueOpts{
		visibility: visibilityFor(fo.Timeout, fo.MaxBatchingWindow),
		dlq:        s.WorkDLQ,
	})
	// The failure queue is itself a dead-letter output: records that SQS
	// refused or fanout could not read, with the reason.
	s.FailureQueue = s.queue("FailureQueue", queueOpts{maxSize: 1 << 20, retention: 14 * 24 * time.Hour})
	const failureReason = "The failure queue is fanout's dead-letter output for single records (refused by SQS, unreadable, unmappable), each with its reason. Nothing consumes it automatically, so there is nothing to redrive from it; its depth has an alarm."
	suppress(s.FailureQueue, nagSQS3, failureReason)
	suppress(s.FailureQueue, nagSQSRedrivePolicy, failureReason)
	s.depthAlarm("FailureQueueAlarm", s.FailureQueue, "records fanout could not deliver")

	own := map[string]string{
		"TARGET_MAX_MESSAGE_SIZE": itoa(fo.TargetMaxMessageSize),
		"WORK_QUEUE_URL":          *s.WorkQueue.QueueUrl(),
		"FAILURE_QUEUE_URL":       *s.FailureQueue.QueueUrl(),
		"FORMAT":                  fo.Format,
		"MODE":                    fo.Mode,
		"NOTIFICATION_FORMAT":     fo.NotificationFormat,
		"CHUNK_SIZE":              fo.ChunkSize,
	}
	if fo.MaxInFlight > 0 {
		own["MAX_IN_FLIGHT"] = itoa(fo.MaxInFlight)
	}
	if fo.FailOnError {
		own["FAIL_ON_ERROR"] = "true"
	}
	if fo.MaxRate > 0 {
		own["MAX_RATE"] = itoa(fo.MaxRate)
	}
	if fo.TargetMaxBacklog > 0 {
		own["TARGET_MAX_BACKLOG"] = itoa(fo.TargetMaxBacklog)
	}
	if fo.MaxFailures != "" {
		own["MAX_FAILURES"] = fo.MaxFailures
	}
	if fo.MaxFailedObjects != "" {
		own["MAX_FAILED_OBJECTS"] = fo.MaxFailedObjects
	}
	maps.Copy(own, fo.Filters.env())
	s.p.Read.env(own)
	grantClaims := s.useClaims(own)
	grantOffload := s.useOffload(own)
	grantReport := s.useReport(own)
	if fo.TargetQueueARN == "" {
		s.TargetDLQ = s.deadLetterQueue("TargetDLQ", "records that the target queue's consumer failed to process", fo.TargetFIFO)
		s.TargetQueue = s.queue("TargetQueue", queueOpts{dlq: s.TargetDLQ, fifo: fo.TargetFIFO, maxSize: fo.TargetMaxMessageSize})
		own["TARGET_QUEUE_URL"] = *s.TargetQueue.QueueUrl()
	} else {
		s.TargetQueue = awssqs.Queue_FromQueueArn(s.Construct, jsii.String("TargetQueue"), jsii.String(fo.TargetQueueARN))
		// By name and owner: GetQueueUrl finds the queue in another account.
		parts := strings.Split(fo.TargetQueueARN, ":")
		own["TARGET_QUEUE_NAME"] = parts[5]
		own["TARGET_QUEUE_OWNER_ACCOUNT_ID"] = parts[4]
	}

	fn, role := s.function("Fanout", functionOpts{
		description: "s3sqs fanout: sends the records of S3 datasets to the target queue, in chunk tasks through its work queue",
		codeDir:     fo.CodeDir,
		timeout:     fo.Timeout,
		memoryMiB:   fo.MemoryMiB,
		env:         env(own, fo.Environment),
		// Direct invocations may be asynchronous (an Event invoke, an
		// S3 event): the ones that fail end up next to the failed tasks.
		dlq: s.WorkDLQ,
	})
	s.FanoutFunction = fn
	grantClaims(role)
	grantOffload(role)
	grantReport(role)
	eventSource(fn, s.WorkQueue, fo.eventSource())

	// Continuation and chunk tasks to its own work queue, refused records
	// to the failure queue: sqsbatch reads each queue's attributes once.
	role.AddToPolicy(allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, s.WorkQueue.QueueArn(), s.FailureQueue.QueueArn()))
	// The target: exactly GetQueueUrl (by name), SendMessage
	// (SendMessageBatch) and GetQueueAttributes, which backpressure
	// (TARGET_MAX_BACKLOG) reads ApproximateNumberOfMessages with. It is
	// granted whether or not TargetMaxBacklog is set: a request or the
	// CLI can set targetMaxBacklog for one run. Its size still comes from
	// TARGET_MAX_MESSAGE_SIZE, since an existing target's own policy may
	// not allow the read.
	role.AddToPolicy(allow([]string{"sqs:GetQueueUrl", "sqs:SendMessage", "sqs:GetQueueAttributes"}, s.TargetQueue.QueueArn()))
	if s.p.Encryption == EncryptionKMS {
		role.AddToPolicy(kmsSend(*s.QueueKey.KeyArn()))
	}
	if fo.TargetKeyARN != "" {
		role.AddToPolicy(kmsSend(fo.TargetKeyARN))
	}

	// Read-only S3 on the datasets: objects (pinned reads ask for a
	// version), and listing limited to the prefixes, of the objects and of
	// their versions (a request with "versions" replays every version).
	datasets := s.datasets()
	if len(datasets) == 0 {
		return
	}
	list, read, keys := datasetAccess(datasets)
	for _, st := range list {
		role.AddToPolicy(st)
	}
	readPolicy := awsiam.NewPolicy(s.Construct, jsii.String("FanoutReadObjects"), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{read},
	})
	suppressObjectARNs(readPolicy, "fanout reads every object of the datasets (buckets and prefixes) it is given, pinned to versions (s3:GetObjectVersion)", datasetPrefixes(datasets)...)
	fn.Node().AddDependency(readPolicy)
	if keys != nil {
		role.AddToPolicy(keys)
	}
}

// datasets are the datasets fanout reads: FanoutProps.Datasets, and with
// a handoff from s3ingest the source bucket under its key prefix first.
func (s *S3SQS) datasets() []Dataset {
	datasets := s.p.Fanout.Datasets
	if !s.p.Ingest.Disabled && s.p.Ingest.HandoffBytes != "" {
		var pre []string
		if s.p.Ingest.KeyPrefix != "" {
			pre = []string{s.p.Ingest.KeyPrefix}
		}
		datasets = append([]Dataset{{Bucket: *s.Bucket.BucketName(), Prefixes: pre, KeyARN: s.p.Ingest.ExistingBucketKeyARN}}, datasets...)
	}
	return datasets
}

// datasetAccess is read-only S3 on datasets: a listing statement per
// bucket (of its objects and their versions, limited to its prefixes), the
// reading of their objects and, when a dataset has a KMS key, kms:Decrypt
// on the keys (nil otherwise).
func datasetAccess(datasets []Dataset) (list []awsiam.PolicyStatement, read, keys awsiam.PolicyStatement) {
	var objects, keyARNs []*string
	for _, d := range datasets {
		arn := bucketARN(d.Bucket)
		objects = append(objects, objectARNs(arn, d.Prefixes...)...)
		st := allow([]string{"s3:ListBucket", "s3:ListBucketVersions"}, &arn)
		if len(d.Prefixes) > 0 {
			like := make([]string, len(d.Prefixes))
			for i, p := range d.Prefixes {
				like[i] = p + "*"
			}
			st.AddCondition(jsii.String("StringLike"), map[string]any{"s3:prefix": like})
		}
		list = append(list, st)
		if d.KeyARN != "" {
			keyARNs = append(keyARNs, jsii.String(d.KeyARN))
		}
	}
	if len(keyARNs) > 0 {
		keys = allow([]string{"kms:Decrypt"}, keyARNs...)
	}
	return list, allow([]string{"s3:GetObject", "s3:GetObjectVersion"}, objects...), keys
}

// datasetPrefixes lists the prefixes of the datasets, "" for a whole bucket.
func datasetPrefixes(ds []Dataset) []string {
	var out []string
	for _, d := range ds {
		if len(d.Prefixes) == 0 {
			out = append(out, "")
		}
		out = append(out, d.Prefixes...)
	}
	return out
}
