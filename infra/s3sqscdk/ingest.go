package s3sqscdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// notificationsHandlerID is the id CDK gives its stack-wide bucket
// notifications custom resource handler (aws-s3 NotificationsResourceHandler).
// accessLogsPrefix is where the source bucket's access logs go in the log
// bucket.
const accessLogsPrefix = "source/"

const notificationsHandlerID = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"

// buildSource creates the topic and the source bucket (or takes the
// existing one) with its object-created notifications to the topic.
func (s *S3SQS) buildSource() {
	in := s.p.Ingest
	s.Topic = awssns.NewTopic(s.Construct, jsii.String("Topic"), &awssns.TopicProps{
		MasterKey:  s.TopicKey,
		EnforceSSL: jsii.Bool(true),
	})

	// The source bucket's ARN, known before the bucket exists: S3 checks
	// that it may publish when the notification is configured, so the
	// topic policy must come first and cannot refer to the bucket resource.
	var name string
	if in.ExistingBucketName != "" {
		name = in.ExistingBucketName
	} else {
		// s3sqs-<8 hex of this construct's address>-<the stack's UUID>:
		// unique per construct and stack, lowercase, 51 characters.
		name = *awscdk.Fn_Join(jsii.String("-"), jsii.Strings(
			"s3sqs",
			(*s.Node().Addr())[:8],
			*awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), awscdk.Aws_STACK_ID(), nil)),
		))
	}
	arn := bucketARN(name)

	// Only S3, only for this bucket, only in this account.
	s3Publish := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("S3PublishFromSourceBucket"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*s.Topic.TopicArn()),
		Conditions: &map[string]any{
			"ArnEquals":    map[string]any{"aws:SourceArn": arn},
			"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()},
		},
	})
	policy := s.Topic.AddToResourcePolicy(s3Publish).PolicyDependable
	// S3 encrypts what it publishes with the topic's key.
	s.TopicKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("S3PublishToEncryptedTopic"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{
			"ArnEquals":    map[string]any{"aws:SourceArn": arn},
			"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()},
		},
	}), jsii.Bool(true)) // an imported key's policy is left as it is (see Props.EncryptionKey)

	if in.ExistingBucketName != "" {
		s.Bucket = awss3.Bucket_FromBucketName(s.Construct, jsii.String("SourceBucket"), jsii.String(name))
		// CDK's notifications custom resource merges this notification into
		// the bucket's existing configuration, leaving the others alone.
		s.Bucket.AddEventNotification(awss3.EventType_OBJECT_CREATED, &topicDestination{topic: s.Topic, policy: policy}, s.keyFilter()...)
		if h := s.stack.Node().TryFindChild(jsii.String(notificationsHandlerID)); h != nil {
			suppress(h, nagIAM4, "CDK's bucket notifications handler (a custom resource that exists only for an existing bucket) uses the AWS managed AWSLambdaBasicExecutionRole to write its own logs; its only other permissions are s3:PutBucketNotification and s3:GetBucketNotification on the source bucket.")
		}
		return
	}

	logs := in.AccessLogsBucket
	if logs == nil {
		logs = s.privateBucket("AccessLogsBucket", &awss3.LifecycleRule{
			Id:         jsii.String("expire-access-logs"),
			Expiration: awscdk.Duration_Days(jsii.Number(in.AccessLogsExpirationDays)),
		})
	}
	b := awss3.NewBucket(s.Construct, jsii.String("SourceBucket"), &awss3.BucketProps{
		BucketName:        jsii.String(name),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		// s3ingest reads the notified version; versioning keeps it
		// readable after an overwrite or a delete.
		Versioned: jsii.Bool(true),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-noncurrent-versions"),
			NoncurrentVersionExpiration:         awscdk.Duration_Days(jsii.Number(in.NoncurrentVersionDays)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(7)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	s.Bucket = b
	// Server access logs, delivered under the log bucket's policy (not its
	// ACL): only the logging service, only for this bucket and account.
	logs.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("S3ServerAccessLogsFromSourceBucket"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("logging.s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  jsii.Strings(*logs.ArnForObjects(jsii.String(accessLogsPrefix + "*"))),
		Conditions: &map[string]any{
			"ArnEquals":    map[string]any{"aws:SourceArn": arn},
			"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()},
		},
	}))
	// The notification is a property of the bucket itself, so no custom
	// resource (and no function with its own role) is needed.
	cfn := b.Node().DefaultChild().(awss3.CfnBucket)
	topicConfig := &awss3.CfnBucket_TopicConfigurationProperty{
		Event: jsii.String("s3:ObjectCreated:*"),
		Topic: s.Topic.TopicArn(),
	}
	var rules []any
	if in.KeyPrefix != "" {
		rules = append(rules, &awss3.CfnBucket_FilterRuleProperty{Name: jsii.String("prefix"), Value: jsii.String(in.KeyPrefix)})
	}
	if in.KeySuffix != "" {
		rules = append(rules, &awss3.CfnBucket_FilterRuleProperty{Name: jsii.String("suffix"), Value: jsii.String(in.KeySuffix)})
	}
	if rules != nil {
		topicConfig.Filter = &awss3.CfnBucket_NotificationFilterProperty{S3Key: &awss3.CfnBucket_S3KeyFilterProperty{Rules: rules}}
	}
	cfn.SetLoggingConfiguration(&awss3.CfnBucket_LoggingConfigurationProperty{
		DestinationBucketName: logs.BucketName(),
		LogFilePrefix:         jsii.String(accessLogsPrefix),
	})
	cfn.SetNotificationConfiguration(&awss3.CfnBucket_NotificationConfigurationProperty{
		TopicConfigurations: []any{topicConfig},
	})
	// The topic policy depends on the topic, and the topic on its key, whose
	// policy lets S3 publish: S3 can check its destination when this runs.
	cfn.Node().AddDependency(policy)
}

func (s *S3SQS) keyFilter() []*awss3.NotificationKeyFilter {
	in := s.p.Ingest
	if in.KeyPrefix == "" && in.KeySuffix == "" {
		return nil
	}
	f := &awss3.NotificationKeyFilter{}
	if in.KeyPrefix != "" {
		f.Prefix = jsii.String(in.KeyPrefix)
	}
	if in.KeySuffix != "" {
		f.Suffix = jsii.String(in.KeySuffix)
	}
	return []*awss3.NotificationKeyFilter{f}
}

// topicDestination is the topic as a notification destination of an
// existing bucket. Unlike awss3notifications.SnsDestination it adds no
// statement of its own to the topic policy (that one would lack
// aws:SourceAccount); the policy made in buildSource already covers it.
type topicDestination struct {
	topic  awssns.ITopic
	policy constructs.IDependable
}

func (d *topicDestination) Bind(_ constructs.Construct, _ interfacesawss3.IBucketRef) *awss3.BucketNotificationDestinationConfig {
	return &awss3.BucketNotificationDestinationConfig{
		Arn:          d.topic.TopicArn(),
		Type:         awss3.BucketNotificationDestinationType_TOPIC,
		Dependencies: &[]constructs.IDependable{d.policy},
	}
}

// buildIngest creates the ingest queue (subscribed to the topic), the
// output queue, s3ingest and its permissions.
func (s *S3SQS) buildIngest() {
	in := s.p.Ingest
	s.IngestDLQ = s.deadLetterQueue("IngestDLQ", "S3 notifications that s3ingest failed to process "+itoa(s.p.MaxReceiveCount)+" times, or that SNS could not deliver", false)
	s.IngestQueue = s.queue("IngestQueue", queueOpts{
		visibility: visibilityFor(in.Timeout, in.MaxBatchingWindow),
		dlq:        s.IngestDLQ,
	})
	s.Topic.AddSubscription(awssnssubscriptions.NewSqsSubscription(s.IngestQueue, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    s.IngestDLQ,
	}))
	s.alarm("IngestQueueAgeAlarm", s.IngestQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
		Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
	}), in.OldestMessageAlarm.Seconds(), "s3sqs: the oldest S3 notification in "+*s.IngestQueue.Node().Path()+" waits longer than "+in.OldestMessageAlarm.String())

	s.OutputDLQ = s.deadLetterQueue("OutputDLQ", "records that the output queue's consumer failed to process", in.OutputFIFO)
	s.OutputQueue = s.queue("OutputQueue", queueOpts{dlq: s.OutputDLQ, fifo: in.OutputFIFO, maxSize: 1 << 20})

	own := map[string]string{
		"OUTPUT_QUEUE_URL": *s.OutputQueue.QueueUrl(),
		"FORMAT":           in.Format,
		"KEY_PREFIX":       in.KeyPrefix,
		"KEY_SUFFIX":       in.KeySuffix,
	}
	sendTo := []*string{s.OutputQueue.QueueArn()}
	if in.HandoffBytes != "" {
		own["HANDOFF_BYTES"] = in.HandoffBytes
		own["FANOUT_WORK_QUEUE_URL"] = *s.WorkQueue.QueueUrl()
		sendTo = append(sendTo, s.WorkQueue.QueueArn())
	}
	s.p.Read.env(own)
	grantClaims := s.useClaims(own)
	grantOffload := s.useOffload(own)
	fn, role := s.function("S3Ingest", functionOpts{
		description: "s3sqs s3ingest: reads the objects S3 notifications name and sends their records to the output queue",
		codeDir:     in.CodeDir,
		timeout:     in.Timeout,
		memoryMiB:   in.MemoryMiB,
		env:         env(own, in.Environment),
	})
	s.IngestFunction = fn
	grantClaims(role)
	grantOffload(role)
	suppress(fn, nagLambdaDLQ, "s3ingest is invoked only by its SQS event source mapping, synchronously; a notification that keeps failing moves to the ingest queue's dead-letter queue (maxReceiveCount "+itoa(s.p.MaxReceiveCount)+"). A function DLQ receives only failed asynchronous invocations, which never happen here.")
	eventSource(fn, s.IngestQueue, in.eventSource())

	// Send records (and chunk tasks to fanout): sqsbatch reads the queue's
	// MaximumMessageSize and FIFO attributes once, then sends batches.
	role.AddToPolicy(allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, sendTo...))
	if s.p.Encryption == EncryptionKMS {
		role.AddToPolicy(kmsSend(*s.QueueKey.KeyArn()))
	}
	// Read the notified objects, pinned to their version.
	srcARN := bucketARN(*s.Bucket.BucketName())
	read := awsiam.NewPolicy(s.Construct, jsii.String("S3IngestReadObjects"), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{allow([]string{"s3:GetObject", "s3:GetObjectVersion"}, objectARNs(srcARN, in.KeyPrefix)...)},
	})
	suppressObjectARNs(read, "s3ingest reads the objects that notifications name, which can be any object, pinned to versions (s3:GetObjectVersion)", in.KeyPrefix)
	fn.Node().AddDependency(read)
	// With s3:ListBucket, S3 answers 404 for an object deleted before it was
	// read, which s3ingest skips; without it, 403, which fails the message
	// until it lands in the DLQ. It lists key names only, of a bucket whose
	// objects s3ingest may read anyway.
	role.AddToPolicy(allow([]string{"s3:ListBucket"}, &srcARN))
	if in.ExistingBucketKeyARN != "" {
		role.AddToPolicy(allow([]string{"kms:Decrypt"}, jsii.String(in.ExistingBucketKeyARN)))
	}
}

// SubscribeQueue subscribes queue to the notification topic with raw
// message delivery, so that it receives the same S3 notifications as
// s3ingest (S3 → SNS → many SQS). deadLetterQueue, if not nil, receives what
// SNS cannot deliver. It returns the subscription. For an encrypted queue
// in the same app, CDK adds the key and queue policy statements SNS needs.
func (s *S3SQS) SubscribeQueue(queue awssqs.IQueue, deadLetterQueue awssqs.IQueue) awssns.Subscription {
	return s.Topic.AddSubscription(awssnssubscriptions.NewSqsSubscription(queue, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    deadLetterQueue,
	}))
}
