package s3sqscdk

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// FeatureFlagRestrictSqsDecryption is the CDK feature flag (context key)
// that makes an SNS subscription of a KMS-encrypted queue grant SNS the key
// only for its topic (aws:SourceArn). Set it to true in cdk.json, as new CDK
// apps do; with EncryptionKMS, [New] warns when it is off.
const FeatureFlagRestrictSqsDecryption = "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption"

// S3SQS is the construct [New] builds. The fields give access to its parts,
// for outputs and for extending it; a field of a disabled path is nil.
//
// To extend the topic policy, call Topic.AddToResourcePolicy: the topic has
// one policy, which already holds the S3 and TLS statements.
type S3SQS struct {
	constructs.Construct

	// TopicKey encrypts the topic (nil without the ingest path); QueueKey
	// encrypts the queues with EncryptionKMS (nil with SSE-SQS). Both are
	// Props.EncryptionKey when it is set; otherwise two new keys, because
	// SNS may use the queue key only for this topic (aws:SourceArn), and
	// the topic itself depends on its key.
	TopicKey awskms.IKey
	QueueKey awskms.IKey

	// Ingest path.
	Bucket         awss3.IBucket
	Topic          awssns.Topic
	IngestQueue    awssqs.Queue
	IngestDLQ      awssqs.Queue
	OutputQueue    awssqs.Queue
	OutputDLQ      awssqs.Queue
	IngestFunction awslambda.Function

	// Fanout path.
	FanoutFunction awslambda.Function
	WorkQueue      awssqs.Queue
	WorkDLQ        awssqs.Queue
	FailureQueue   awssqs.Queue
	TargetQueue    awssqs.IQueue
	// TargetDLQ is the new target queue's DLQ; nil for an existing target.
	TargetDLQ awssqs.Queue

	// OffloadBucket receives the records too large for their queue, when
	// Props.Offload.Enabled; nil otherwise. Consumers read them with
	// GrantReadPayloads.
	OffloadBucket awss3.IBucket

	// BatchOperationsRole is the role of S3 Batch Operations jobs that
	// invoke fanout, when FanoutProps.BatchOperations.Enabled; nil
	// otherwise.
	BatchOperationsRole awsiam.Role
	// ReconcileScheduleRole is the role of the schedule that invokes
	// fanout's reconcile, when FanoutProps.ReconcileEveryMinutes is set;
	// nil otherwise.
	ReconcileScheduleRole awsiam.Role

	// OperatorPolicy is a managed policy for the role of whoever runs the
	// s3sqs CLI against this stack: planning and queueing runs, status,
	// pause, resume, cancel, set, redrive of the failure queue and the
	// DLQs of the work and ingest queues, reconcile.
	OperatorPolicy awsiam.ManagedPolicy

	// ReportBucket receives fanout's run reports, when
	// FanoutProps.Report.Enabled; nil otherwise.
	ReportBucket awss3.IBucket

	// ClaimsTable holds the run-once claims of both functions (see
	// pkg/claims) and what fanout's runs share across invocations: their
	// control records, counters and rate budget (see pkg/runstate). A
	// DynamoDB table, on demand, with TTL. Nil with Props.DisableClaims.
	ClaimsTable awsdynamodb.Table

	// Alarms on dead-letter queue depth, failure queue depth, the age of
	// the oldest ingest message and chunk task, and each function's
	// errors, throttles, failed records and bad records.
	Alarms []awscloudwatch.Alarm
	// Dashboard shows records, requests, failures, duration and queue
	// depths; nil with Props.DisableDashboard.
	Dashboard awscloudwatch.Dashboard

	p     resolved
	stack awscdk.Stack
}

// New builds the construct in scope. It returns an error naming every prop
// that is out of range, and every code directory without a bootstrap.
func New(scope constructs.Construct, id string, props *Props) (*S3SQS, error) {
	p, err := resolve(props)
	if err == nil {
		err = checkRegion(awscdk.Stack_Of(scope), p)
	}
	if err == nil && p.EncryptionKey != nil && p.Encryption == EncryptionKMS && !p.Ingest.Disabled &&
		*awscdk.Resource_IsOwnedResource(p.EncryptionKey) {
		err = errors.New("EncryptionKey: a key created in this app cannot encrypt both the topic and the queues " +
			"(the key policy would name the topic, which depends on the key); pass an imported key, or none")
	}
	if err != nil {
		return nil, fmt.Errorf("s3sqscdk: %w", err)
	}
	s := &S3SQS{Construct: constructs.NewConstruct(scope, jsii.String(id)), p: p}
	s.stack = awscdk.Stack_Of(s.Construct)

	if !p.Ingest.Disabled {
		s.TopicKey = s.key("TopicKey", "s3sqs: encrypts the S3 notification topic")
	}
	if p.Encryption == EncryptionKMS {
		s.QueueKey = s.key("QueueKey", "s3sqs: encrypts the queues")
	}

	if p.Encryption == EncryptionKMS && p.EncryptionKey == nil && !*awscdk.FeatureFlags_Of(s.Construct).IsEnabled(jsii.String(FeatureFlagRestrictSqsDecryption)) {
		awscdk.Annotations_Of(s.Construct).AddWarningV2(jsii.String("s3sqs:restrictSqsDecryption"), jsii.String(
			"set the context flag "+FeatureFlagRestrictSqsDecryption+" to true: without it, the key policy lets SNS use the queue key for any topic"), nil)
	}
	if !p.DisableClaims {
		s.buildClaims()
	}
	if p.Offload.Enabled {
		s.buildOffload()
	}
	if !p.Ingest.Disabled {
		s.buildSource()
	}
	if !p.Fanout.Disabled {
		s.buildFanout()
		if p.Fanout.BatchOperations.Enabled {
			s.buildBatchOperations()
		}
	}
	if !p.Ingest.Disabled {
		s.buildIngest()
	}
	if !p.Fanout.Disabled && p.Fanout.ReconcileEveryMinutes > 0 {
		s.buildReconcile()
	}
	s.buildOperatorPolicy()
	s.buildMonitoring()
	return s, nil
}

// checkRegion rejects an existing target queue in another region than a
// stack with a known region: fanout's SQS client sends in its own region.
func checkRegion(stack awscdk.Stack, p resolved) error {
	if p.Fanout.Disabled || p.Fanout.TargetQueueARN == "" || *awscdk.Token_IsUnresolved(stack.Region()) {
		return nil
	}
	if r := strings.Split(p.Fanout.TargetQueueARN, ":")[3]; r != *stack.Region() {
		return fmt.Errorf("Fanout.TargetQueueARN: the queue is in %s, the stack in %s; fanout sends in its own region", r, *stack.Region())
	}
	return nil
}

// key returns Props.EncryptionKey, or a new key with rotation.
func (s *S3SQS) key(id, description string) awskms.IKey {
	if s.p.EncryptionKey != nil {
		return s.p.EncryptionKey
	}
	return awskms.NewKey(s.Construct, jsii.String(id), &awskms.KeyProps{
		Description:       jsii.String(description),
		EnableKeyRotation: jsii.Bool(true),
	})
}

// queueOpts describes one queue.
type queueOpts struct {
	visibility time.Duration
	dlq        awssqs.IQueue
	fifo       bool
	maxSize    int
	retention  time.Duration
}

// queue creates a queue with TLS-only access and the configured encryption.
func (s *S3SQS) queue(id string, o queueOpts) awssqs.Queue {
	props := &awssqs.QueueProps{
		EnforceSSL: jsii.Bool(true),
		Encryption: awssqs.QueueEncryption_SQS_MANAGED,
	}
	if s.p.Encryption == EncryptionKMS {
		props.Encryption = awssqs.QueueEncryption_KMS
		props.EncryptionMasterKey = s.QueueKey
	}
	if o.visibility > 0 {
		props.VisibilityTimeout = seconds(o.visibility)
	}
	if o.dlq != nil {
		props.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: o.dlq, MaxReceiveCount: jsii.Number(s.p.MaxReceiveCount)}
	}
	if o.fifo {
		props.Fifo = jsii.Bool(true)
	}
	if o.maxSize > 0 {
		props.MaxMessageSizeBytes = jsii.Number(o.maxSize)
	}
	if o.retention > 0 {
		props.RetentionPeriod = seconds(o.retention)
	}
	return awssqs.NewQueue(s.Construct, jsii.String(id), props)
}

// deadLetterQueue creates a DLQ: 14 days retention (longer than any source
// queue keeps a message), 1 MiB messages, an alarm on its depth.
func (s *S3SQS) deadLetterQueue(id, what string, fifo bool) awssqs.Queue {
	q := s.queue(id, queueOpts{fifo: fifo, maxSize: 1 << 20, retention: 14 * 24 * time.Hour})
	suppress(q, nagSQSRedrivePolicy, "This queue is a dead-letter queue, the end of its redrive chain; a DLQ of a DLQ would only move the messages again. Its depth has an alarm; redrive it to its source once the cause is fixed.")
	s.depthAlarm(id+"Alarm", q, what)
	return q
}

// depthAlarm raises an alarm as soon as q holds a message.
func (s *S3SQS) depthAlarm(id string, q awssqs.IQueue, what string) {
	s.alarm(id, q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
		Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
	}), 1, fmt.Sprintf("s3sqs: %s holds messages: %s", *q.Node().Path(), what))
}

func (s *S3SQS) alarm(id string, m awscloudwatch.IMetric, threshold float64, description string) {
	a := awscloudwatch.NewAlarm(s.Construct, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             m,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		AlarmDescription:   jsii.String(description),
	})
	for _, act := range s.p.AlarmActions {
		a.AddAlarmAction(act)
		a.AddOkAction(act)
	}
	s.Alarms = append(s.Alarms, a)
}

// functionOpts describes one function.
type functionOpts struct {
	description string
	codeDir     string
	timeout     time.Duration
	memoryMiB   int
	env         map[string]*string
	dlq         awssqs.IQueue
}

// function creates a Lambda function (provided.al2023, arm64) with its own
// role and log group. The role may write to the log group and nothing else
// yet.
func (s *S3SQS) function(id string, o functionOpts) (awslambda.Function, awsiam.Role) {
	logs := awslogs.NewLogGroup(s.Construct, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention: s.p.LogRetention,
	})
	role := awsiam.NewRole(s.Construct, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("s3sqs " + id + " function"),
	})
	role.AddToPolicy(allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn()))
	tracing, layers := awslambda.Tracing_DISABLED, []awslambda.ILayerVersion{}
	if tr := s.p.Tracing; tr.Enabled {
		tracing = awslambda.Tracing_ACTIVE
		if tr.CollectorLayerARN != "" {
			layers = append(layers, awslambda.LayerVersion_FromLayerVersionArn(s.Construct, jsii.String(id+"CollectorLayer"), jsii.String(tr.CollectorLayerARN)))
			o.env["TRACING"] = jsii.String("otlp")
		}
	}
	fn := awslambda.NewFunction(s.Construct, jsii.String(id), &awslambda.FunctionProps{
		Description:           jsii.String(o.description),
		Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:          awslambda.Architecture_ARM_64(),
		Handler:               jsii.String("bootstrap"),
		Code:                  awslambda.Code_FromAsset(jsii.String(o.codeDir), nil),
		Timeout:               seconds(o.timeout),
		MemorySize:            jsii.Number(o.memoryMiB),
		Role:                  role,
		LogGroup:              logs,
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
		SystemLogLevelV2:      awslambda.SystemLogLevel_WARN,
		Environment:           &o.env,
		DeadLetterQueue:       o.dlq,
		Tracing:               tracing,
		Layers:                &layers,
	})
	if s.p.Tracing.Enabled {
		cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
			Id:        jsii.String(nagIAM5),
			Reason:    jsii.String("xray:PutTraceSegments and xray:PutTelemetryRecords, which active tracing needs, have no resource-level permissions: X-Ray accepts only Resource \"*\" for them."),
			AppliesTo: &[]any{jsii.String("Resource::*")},
		}}, jsii.Bool(true))
	} else {
		suppress(fn, nagLambdaTracing, "Tracing is off by default, at no cost (Props.Tracing turns on X-Ray active tracing and, with the ADOT collector layer, the functions' own spans); without it the functions report per-invocation metrics as CloudWatch EMF and log JSON.")
	}
	return fn, role
}

// buildClaims creates the claims table: partition key "claim", on demand,
// items expiring through TTL on "expiresAt" (names from pkg/claims).
func (s *S3SQS) buildClaims() {
	s.ClaimsTable = awsdynamodb.NewTable(s.Construct, jsii.String("ClaimsTable"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("claim"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("expiresAt"),
		// Claims are about work in flight, kept for days at most; with the
		// stack they lose their purpose.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	suppress(s.ClaimsTable, nagDDB3, "The claims table holds leases and offsets of work in flight, which expire within days (TTL); restoring it to an earlier point would hand out claims again, not recover data.")
}

// useClaims gives a function the claims table: its name in CLAIMS_TABLE,
// Props.ClaimsTTL in CLAIMS_TTL (the same in both functions, since
// fanout's reconcile looks back as far as s3ingest's markers live), and
// the two calls pkg/claims and pkg/runstate make (a cancelled run's
// parked tasks are written with UpdateItem too; pausing, resuming and
// reading a run are the CLI's, with its user's credentials).
func (s *S3SQS) useClaims(own map[string]string) func(role awsiam.Role) {
	if s.ClaimsTable == nil {
		return func(awsiam.Role) {}
	}
	own["CLAIMS_TABLE"] = *s.ClaimsTable.TableName()
	own["CLAIMS_TTL"] = s.p.ClaimsTTL
	return func(role awsiam.Role) {
		role.AddToPolicy(allow([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, s.ClaimsTable.TableArn()))
	}
}

// eventSourceOpts are the settings of a function's SQS event source.
type eventSourceOpts struct {
	batch                  int
	window                 time.Duration
	concurrency            int
	minPollers, maxPollers int
}

// provisioned reports whether the event source uses provisioned mode.
func (es eventSourceOpts) provisioned() bool {
	return es.minPollers != 0 || es.maxPollers != 0
}

func (in IngestProps) eventSource() eventSourceOpts {
	return eventSourceOpts{in.BatchSize, in.MaxBatchingWindow, in.MaxConcurrency, in.MinPollers, in.MaxPollers}
}

func (fo FanoutProps) eventSource() eventSourceOpts {
	return eventSourceOpts{fo.BatchSize, fo.MaxBatchingWindow, fo.MaxConcurrency, fo.MinPollers, fo.MaxPollers}
}

// eventSource subscribes fn to q with partial batch responses. In
// provisioned mode it writes only the poller counts that are set, so that
// AWS's defaults (2 and 200) apply to the other, as in template.yaml.
func eventSource(fn awslambda.Function, q awssqs.IQueue, es eventSourceOpts) {
	props := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(es.batch),
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if es.window > 0 {
		props.MaxBatchingWindow = seconds(es.window)
	}
	if es.concurrency > 0 {
		props.MaxConcurrency = jsii.Number(es.concurrency)
	}
	if es.provisioned() {
		pc := &awslambda.ProvisionedPollerConfig{}
		if es.minPollers > 0 {
			pc.MinimumPollers = jsii.Number(es.minPollers)
		}
		if es.maxPollers > 0 {
			pc.MaximumPollers = jsii.Number(es.maxPollers)
		}
		props.ProvisionedPollerConfig = pc
	}
	fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(q, props))
	for _, child := range *fn.Node().Children() {
		if _, ok := child.(awslambda.EventSourceMapping); ok {
			suppress(child, nagLambdaESMDestination, "SQS event source mappings cannot have an on-failure destination (only stream and Kafka sources can). A message that keeps failing moves to the source queue's dead-letter queue by its redrive policy, which has an alarm.")
		}
	}
}

// visibilityFor is the visibility timeout of a queue that fn consumes: six
// times the function timeout plus the batching window, as AWS recommends.
func visibilityFor(timeout, window time.Duration) time.Duration {
	return 6*timeout + window
}

// kmsSend is the KMS access needed to send to a queue encrypted with key.
func kmsSend(key string) awsiam.PolicyStatement {
	return allow([]string{"kms:GenerateDataKey", "kms:Decrypt"}, &key)
}

// allow is an Allow statement of actions on resources.
func allow(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// env turns a variable map into what CDK takes, merging extra under the
// construct's own variables (resolve has checked that they do not clash).
func env(own map[string]string, extra map[string]string) map[string]*string {
	out := make(map[string]*string, len(own)+len(extra))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		out[k] = jsii.String(extra[k])
	}
	for k, v := range own {
		if v != "" {
			out[k] = jsii.String(v)
		}
	}
	return out
}

// privateBucket creates a bucket only this stack's roles use: SSE-S3, TLS
// 1.2 only, no public access, no ACLs, objects expiring by rule; retained
// when the stack goes, as what it holds outlives it by the rule's days.
func (s *S3SQS) privateBucket(id string, rule *awss3.LifecycleRule) awss3.Bucket {
	return awss3.NewBucket(s.Construct, jsii.String(id), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules:    &[]*awss3.LifecycleRule{rule},
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
}

// grantPutUnder gives role s3:PutObject on the objects under prefix in the
// named bucket, and nothing else, in a policy of its own named after the
// role and what (cdk-nag's finding on the key wildcard suppressed with
// why).
func (s *S3SQS) grantPutUnder(role awsiam.Role, what, bucket, prefix, why string) {
	policy := awsiam.NewPolicy(s.Construct, jsii.String(*role.Node().Id()+what), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{allow([]string{"s3:PutObject"}, objectARNs(bucketARN(bucket), prefix)...)},
	})
	suppressObjectARNs(policy, why, prefix)
}

// objectARNs lists the object ARNs under prefixes of a bucket given by its
// ARN; no prefix means every object.
func objectARNs(bucketARN string, prefixes ...string) []*string {
	if len(prefixes) == 0 {
		prefixes = []string{""}
	}
	out := make([]*string, len(prefixes))
	for i, p := range prefixes {
		out[i] = jsii.String(bucketARN + "/" + p + "*")
	}
	return out
}

// bucketARN is the ARN of a bucket by name.
func bucketARN(name string) string {
	return "arn:" + *awscdk.Aws_PARTITION() + ":s3:::" + name
}

func itoa(n int) string { return strconv.Itoa(n) }
