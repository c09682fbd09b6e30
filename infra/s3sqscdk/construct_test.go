package s3sqscdk_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// existing is the props of a deployment on an existing bucket and an
// existing target queue in another account, with KMS, datasets and
// handoff: every optional wire switched on.
func existing() s3sqscdk.Props {
	return s3sqscdk.Props{
		Encryption: s3sqscdk.EncryptionKMS,
		Ingest: s3sqscdk.IngestProps{
			ExistingBucketName:   "lake-landing",
			ExistingBucketKeyARN: "arn:aws:kms:eu-west-1:111122223333:key/bucket-key",
			KeyPrefix:            "in/",
			KeySuffix:            ".jsonl",
			HandoffBytes:         "64MiB",
			Format:               "jsonl",
			BatchSize:            100,
			MaxBatchingWindow:    20 * time.Second,
			MaxConcurrency:       5,
			Environment:          map[string]string{"PARTITION_COLUMNS": "typed"},
		},
		Fanout: s3sqscdk.FanoutProps{
			TargetQueueARN:       "arn:aws:sqs:eu-west-1:444455556666:orders.fifo",
			TargetKeyARN:         "arn:aws:kms:eu-west-1:444455556666:key/target-key",
			TargetMaxMessageSize: 262144,
			Datasets: []s3sqscdk.Dataset{
				{Bucket: "lake", Prefixes: []string{"exports/", "backfill/2024/"}, KeyARN: "arn:aws:kms:eu-west-1:111122223333:key/lake-key"},
				{Bucket: "other"},
			},
			Mode:        "chunk",
			MaxInFlight: 4,
			FailOnError: true,
		},
	}
}

// TestNotificationChain follows a new object from the bucket to s3ingest:
// bucket notification → topic → raw subscription → ingest queue → event
// source with ReportBatchItemFailures.
func TestNotificationChain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
	}{
		{"new bucket", s3sqscdk.Props{Ingest: s3sqscdk.IngestProps{KeyPrefix: "incoming/", KeySuffix: ".csv"}}},
		{"existing bucket", existing()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, tc.props)
			topic, topicPolicy := f.id(f.s.Topic), f.tmpl.ofType("AWS::SNS::TopicPolicy")
			if len(topicPolicy) != 1 {
				t.Fatalf("topic policies: %v, want one", topicPolicy)
			}
			filter := []any{
				map[string]any{"Name": "prefix", "Value": tc.props.Ingest.KeyPrefix},
				map[string]any{"Name": "suffix", "Value": tc.props.Ingest.KeySuffix},
			}

			// Bucket → topic, after the topic policy lets S3 publish.
			if tc.props.Ingest.ExistingBucketName == "" {
				b := f.res(t, f.id(f.s.Bucket))
				want := map[string]any{"TopicConfigurations": []any{map[string]any{
					"Event":  "s3:ObjectCreated:*",
					"Topic":  ref(topic),
					"Filter": map[string]any{"S3Key": map[string]any{"Rules": filter}},
				}}}
				if got := b.Properties["NotificationConfiguration"]; canon(got) != canon(want) {
					t.Errorf("bucket NotificationConfiguration:\n got %s\nwant %s", canon(got), canon(want))
				}
				if !slices.Contains(b.DependsOn, topicPolicy[0]) {
					t.Errorf("bucket DependsOn %v, want the topic policy %s", b.DependsOn, topicPolicy[0])
				}
			} else {
				ids := f.tmpl.ofType("Custom::S3BucketNotifications")
				if len(ids) != 1 {
					t.Fatalf("bucket notification resources: %v, want one", ids)
				}
				n := f.tmpl.Resources[ids[0]]
				// CDK writes the suffix rule first.
				want := map[string]any{"TopicConfigurations": []any{map[string]any{
					"Events":   []any{"s3:ObjectCreated:*"},
					"TopicArn": ref(topic),
					"Filter":   map[string]any{"Key": map[string]any{"FilterRules": []any{filter[1], filter[0]}}},
				}}}
				if got := n.Properties["NotificationConfiguration"]; canon(got) != canon(want) {
					t.Errorf("NotificationConfiguration:\n got %s\nwant %s", canon(got), canon(want))
				}
				if n.Properties["BucketName"] != "lake-landing" || n.Properties["Managed"] != false {
					t.Errorf("BucketName %v, Managed %v: want lake-landing, false (merge with the bucket's other notifications)", n.Properties["BucketName"], n.Properties["Managed"])
				}
				if !slices.Contains(n.DependsOn, topicPolicy[0]) {
					t.Errorf("notifications DependsOn %v, want the topic policy %s", n.DependsOn, topicPolicy[0])
				}
			}

			// Topic → ingest queue, raw, with a DLQ for what SNS cannot deliver.
			ingestQueue, ingestDLQ := f.id(f.s.IngestQueue), f.id(f.s.IngestDLQ)
			var subs []map[string]any
			for _, id := range f.tmpl.ofType("AWS::SNS::Subscription") {
				subs = append(subs, f.tmpl.Resources[id].Properties)
			}
			wantSub := map[string]any{
				"Protocol":           "sqs",
				"TopicArn":           ref(topic),
				"Endpoint":           getAtt(ingestQueue),
				"RawMessageDelivery": true,
				"RedrivePolicy":      map[string]any{"deadLetterTargetArn": getAtt(ingestDLQ)},
			}
			if len(subs) != 1 || canon(subs[0]) != canon(wantSub) {
				t.Errorf("subscriptions:\n got %s\nwant [%s]", canon(subs), canon(wantSub))
			}
			// SNS may send to the ingest queue and its DLQ, for this topic only.
			for _, q := range []string{ingestQueue, ingestDLQ} {
				if !f.queuePolicyAllows(q, "sns.amazonaws.com", "sqs:SendMessage", map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": ref(topic)}}) {
					t.Errorf("queue policy of %s does not let SNS send for topic %s only", q, topic)
				}
			}

			// Ingest queue → s3ingest, with partial batch responses.
			esm := f.mapping(t, ingestQueue)
			in := tc.props.Ingest
			want := map[string]any{
				"EventSourceArn":        getAtt(ingestQueue),
				"FunctionName":          ref(f.id(f.s.IngestFunction)),
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
				"BatchSize":             float64(max(in.BatchSize, s3sqscdk.DefaultIngestBatchSize)),
			}
			if in.MaxBatchingWindow > 0 {
				want["MaximumBatchingWindowInSeconds"] = in.MaxBatchingWindow.Seconds()
			}
			if in.MaxConcurrency > 0 {
				want["ScalingConfig"] = map[string]any{"MaximumConcurrency": float64(in.MaxConcurrency)}
			}
			if canon(esm) != canon(want) {
				t.Errorf("ingest event source mapping:\n got %s\nwant %s", canon(esm), canon(want))
			}
			// s3ingest sends to the output queue (and, with handoff, to
			// fanout's work queue).
			envVars := prop(f.res(t, f.id(f.s.IngestFunction)).Properties, "Environment", "Variables").(map[string]any)
			if canon(envVars["OUTPUT_QUEUE_URL"]) != canon(ref(f.id(f.s.OutputQueue))) {
				t.Errorf("OUTPUT_QUEUE_URL = %v, want the output queue", envVars["OUTPUT_QUEUE_URL"])
			}
			if in.HandoffBytes != "" && (envVars["HANDOFF_BYTES"] != in.HandoffBytes || canon(envVars["FANOUT_WORK_QUEUE_URL"]) != canon(ref(f.id(f.s.WorkQueue)))) {
				t.Errorf("handoff variables: %v", envVars)
			}

			// Work queue → fanout, with partial batch responses.
			esm = f.mapping(t, f.id(f.s.WorkQueue))
			if canon(esm["FunctionResponseTypes"]) != canon([]any{"ReportBatchItemFailures"}) || canon(esm["FunctionName"]) != canon(ref(f.id(f.s.FanoutFunction))) {
				t.Errorf("work queue event source mapping: %s", canon(esm))
			}
		})
	}
}

// mapping returns the properties of the one event source mapping reading
// queue.
func (f *fixture) mapping(t *testing.T, queue string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, id := range f.tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		p := f.tmpl.Resources[id].Properties
		if canon(p["EventSourceArn"]) == canon(getAtt(queue)) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("event source mappings of %s: %d, want 1", queue, len(found))
	}
	return found[0]
}

// queuePolicyAllows reports whether a queue policy of queue allows
// service to run action on it under condition.
func (f *fixture) queuePolicyAllows(queue, service, action string, condition map[string]any) bool {
	for _, id := range f.tmpl.ofType("AWS::SQS::QueuePolicy") {
		p := f.tmpl.Resources[id].Properties
		if !slices.ContainsFunc(list(p["Queues"]), func(q any) bool { return canon(q) == canon(ref(queue)) }) {
			continue
		}
		for _, st := range list(prop(p, "PolicyDocument", "Statement")) {
			if prop(st, "Effect") == "Allow" && prop(st, "Principal", "Service") == service &&
				slices.Contains(list(prop(st, "Action")), any(action)) && canon(prop(st, "Condition")) == canon(condition) {
				return true
			}
		}
	}
	return false
}

// TestDeadLetterQueues checks that every queue a consumer reads has a DLQ
// reached after maxReceiveCount (at least 5) receives, and that the DLQs
// keep messages longer than their sources.
func TestDeadLetterQueues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
		count float64
	}{
		{"default", s3sqscdk.Props{}, 5},
		{"maxReceiveCount 8, FIFO output and target", s3sqscdk.Props{MaxReceiveCount: 8, Ingest: s3sqscdk.IngestProps{OutputFIFO: true}, Fanout: s3sqscdk.FanoutProps{TargetFIFO: true}}, 8},
		{"existing", existing(), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, tc.props)
			pairs := map[awssqs.Queue]awssqs.Queue{
				f.s.IngestQueue: f.s.IngestDLQ,
				f.s.OutputQueue: f.s.OutputDLQ,
				f.s.WorkQueue:   f.s.WorkDLQ,
			}
			if f.s.TargetDLQ != nil {
				pairs[f.s.TargetQueue.(awssqs.Queue)] = f.s.TargetDLQ
			}
			dlqs := map[string]bool{}
			for q, dlq := range pairs {
				qr, dr := f.res(t, f.id(q)), f.res(t, f.id(dlq))
				dlqs[f.id(dlq)] = true
				want := map[string]any{"deadLetterTargetArn": getAtt(f.id(dlq)), "maxReceiveCount": tc.count}
				if got := qr.Properties["RedrivePolicy"]; canon(got) != canon(want) {
					t.Errorf("%s RedrivePolicy = %s, want %s", f.id(q), canon(got), canon(want))
				}
				if qr.Properties["FifoQueue"] != dr.Properties["FifoQueue"] {
					t.Errorf("%s FifoQueue %v, its DLQ %v: must match", f.id(q), qr.Properties["FifoQueue"], dr.Properties["FifoQueue"])
				}
				if dr.Properties["MessageRetentionPeriod"] != float64(14*24*3600) {
					t.Errorf("%s MessageRetentionPeriod = %v, want 14 days", f.id(dlq), dr.Properties["MessageRetentionPeriod"])
				}
			}
			// Every other queue is a DLQ or the failure queue; none has a
			// redrive policy of its own.
			for _, id := range f.tmpl.ofType("AWS::SQS::Queue") {
				if (dlqs[id] || id == f.id(f.s.FailureQueue)) && f.tmpl.Resources[id].Properties["RedrivePolicy"] != nil {
					t.Errorf("%s is a dead-letter destination with a RedrivePolicy of its own", id)
				}
			}
			// fanout's failed asynchronous invocations go to the work DLQ.
			if got := prop(f.res(t, f.id(f.s.FanoutFunction)).Properties, "DeadLetterConfig", "TargetArn"); canon(got) != canon(getAtt(f.id(f.s.WorkDLQ))) {
				t.Errorf("fanout DeadLetterConfig = %s, want the work DLQ", canon(got))
			}
		})
	}
}

// TestVisibilityTimeout checks that each queue a function consumes hides a
// message for at least 6x the function's timeout (plus the batching window).
func TestVisibilityTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
	}{
		{"default", s3sqscdk.Props{}},
		{"long timeouts and windows", s3sqscdk.Props{
			Ingest: s3sqscdk.IngestProps{Timeout: 15 * time.Minute, MaxBatchingWindow: 5 * time.Minute, BatchSize: 1000},
			Fanout: s3sqscdk.FanoutProps{Timeout: 90 * time.Second, MaxBatchingWindow: 10 * time.Second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, tc.props)
			mappings := f.tmpl.ofType("AWS::Lambda::EventSourceMapping")
			if len(mappings) != 2 {
				t.Fatalf("event source mappings: %v, want 2", mappings)
			}
			for _, id := range mappings {
				esm := f.tmpl.Resources[id].Properties
				queue := prop(esm, "EventSourceArn", "Fn::GetAtt", 0).(string)
				fn := prop(esm, "FunctionName", "Ref").(string)
				timeout := f.res(t, fn).Properties["Timeout"].(float64)
				window, _ := esm["MaximumBatchingWindowInSeconds"].(float64)
				vis, _ := f.res(t, queue).Properties["VisibilityTimeout"].(float64)
				if vis < 6*timeout+window {
					t.Errorf("%s VisibilityTimeout %vs < 6 x %s Timeout %vs + window %vs", queue, vis, fn, timeout, window)
				}
			}
		})
	}
}

// TestTopicPolicy checks that only S3, for the source bucket and account,
// may publish, over TLS, and that S3 may use the topic's key under the
// same conditions.
func TestTopicPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
	}{
		{"new bucket", s3sqscdk.Props{}},
		{"existing bucket", existing()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, tc.props)
			topic := f.id(f.s.Topic)
			var bucketARN any = s3ARN("lake-landing", "")
			if tc.props.Ingest.ExistingBucketName == "" {
				// The ARN is built from the bucket's name expression, which
				// the bucket resource uses as its BucketName.
				name := f.res(t, f.id(f.s.Bucket)).Properties["BucketName"]
				if !strings.Contains(canon(name), `"Ref":"AWS::StackId"`) {
					t.Errorf("BucketName = %s, want one derived from the stack id", canon(name))
				}
				bucketARN = s3ARN(name, "")
			}
			conditions := map[string]any{
				"ArnEquals":    map[string]any{"aws:SourceArn": bucketARN},
				"StringEquals": map[string]any{"aws:SourceAccount": ref("AWS::AccountId")},
			}
			pol := f.res(t, f.tmpl.ofType("AWS::SNS::TopicPolicy")[0]).Properties
			if canon(pol["Topics"]) != canon([]any{ref(topic)}) {
				t.Errorf("topic policy Topics = %s", canon(pol["Topics"]))
			}
			want := []any{
				map[string]any{
					"Sid": "AllowPublishThroughSSLOnly", "Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
					"Resource": ref(topic), "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				},
				map[string]any{
					"Sid": "S3PublishFromSourceBucket", "Effect": "Allow", "Principal": map[string]any{"Service": "s3.amazonaws.com"},
					"Action": "sns:Publish", "Resource": ref(topic), "Condition": conditions,
				},
			}
			if got := prop(pol, "PolicyDocument", "Statement"); canon(got) != canon(want) {
				t.Errorf("topic policy statements:\n got %s\nwant %s", canon(got), canon(want))
			}

			key := f.id(f.s.TopicKey)
			if got := prop(f.res(t, topic).Properties, "KmsMasterKeyId"); canon(got) != canon(getAtt(key)) {
				t.Errorf("topic KmsMasterKeyId = %s, want the key", canon(got))
			}
			var s3Key []any
			for _, st := range list(prop(f.res(t, key).Properties, "KeyPolicy", "Statement")) {
				if prop(st, "Principal", "Service") == "s3.amazonaws.com" {
					s3Key = append(s3Key, st)
				}
			}
			wantKey := []any{map[string]any{
				"Sid": "S3PublishToEncryptedTopic", "Effect": "Allow", "Principal": map[string]any{"Service": "s3.amazonaws.com"},
				"Action": []any{"kms:GenerateDataKey", "kms:Decrypt"}, "Resource": "*", "Condition": conditions,
			}}
			if canon(s3Key) != canon(wantKey) {
				t.Errorf("key policy for S3:\n got %s\nwant %s", canon(s3Key), canon(wantKey))
			}
		})
	}
}

// TestIAM checks that each function's role grants exactly the listed
// actions on the listed resources, and that no policy in the template has
// a "*" action or a "*" resource.
func TestIAM(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		f := synth(t, s3sqscdk.Props{})
		bucket := ref(f.id(f.s.Bucket))
		var want []grant
		want = append(want, grants([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{getAtt(f.logGroup(t, f.s.IngestFunction))}, nil)...)
		want = append(want, grants(consume, []any{getAtt(f.id(f.s.IngestQueue))}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, []any{getAtt(f.id(f.s.OutputQueue))}, nil)...)
		want = append(want, grants([]string{"s3:GetObject", "s3:GetObjectVersion"}, []any{s3ARN(bucket, "/*")}, nil)...)
		want = append(want, grants([]string{"s3:ListBucket"}, []any{s3ARN(bucket, "")}, nil)...)
		want = append(want, grants([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, []any{getAtt(f.id(f.s.ClaimsTable))}, nil)...)
		if d := diffGrants(f.roleGrants(f.role(t, f.s.IngestFunction)), want); d != "" {
			t.Errorf("s3ingest role:%s", d)
		}

		want = nil
		want = append(want, grants([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{getAtt(f.logGroup(t, f.s.FanoutFunction))}, nil)...)
		want = append(want, grants(consume, []any{getAtt(f.id(f.s.WorkQueue))}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, []any{getAtt(f.id(f.s.WorkQueue)), getAtt(f.id(f.s.FailureQueue))}, nil)...)
		want = append(want, grants(onTarget, []any{getAtt(f.id(f.s.TargetQueue))}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage"}, []any{getAtt(f.id(f.s.WorkDLQ))}, nil)...)
		want = append(want, grants([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, []any{getAtt(f.id(f.s.ClaimsTable))}, nil)...)
		if d := diffGrants(f.roleGrants(f.role(t, f.s.FanoutFunction)), want); d != "" {
			t.Errorf("fanout role:%s", d)
		}
		f.noWildcards(t)
	})

	t.Run("existing, KMS, datasets, handoff", func(t *testing.T) {
		p := existing()
		f := synth(t, p)
		key := getAtt(f.id(f.s.QueueKey))
		var want []grant
		want = append(want, grants([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{getAtt(f.logGroup(t, f.s.IngestFunction))}, nil)...)
		want = append(want, grants(consume, []any{getAtt(f.id(f.s.IngestQueue))}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, []any{getAtt(f.id(f.s.OutputQueue)), getAtt(f.id(f.s.WorkQueue))}, nil)...)
		want = append(want, grants([]string{"kms:GenerateDataKey", "kms:Decrypt"}, []any{key}, nil)...)
		want = append(want, grants([]string{"s3:GetObject", "s3:GetObjectVersion"}, []any{s3ARN("lake-landing", "/in/*")}, nil)...)
		want = append(want, grants([]string{"s3:ListBucket"}, []any{s3ARN("lake-landing", "")}, nil)...)
		want = append(want, grants([]string{"kms:Decrypt"}, []any{p.Ingest.ExistingBucketKeyARN}, nil)...)
		want = append(want, grants([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, []any{getAtt(f.id(f.s.ClaimsTable))}, nil)...)
		if d := diffGrants(f.roleGrants(f.role(t, f.s.IngestFunction)), want); d != "" {
			t.Errorf("s3ingest role:%s", d)
		}

		want = nil
		want = append(want, grants([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{getAtt(f.logGroup(t, f.s.FanoutFunction))}, nil)...)
		want = append(want, grants(consume, []any{getAtt(f.id(f.s.WorkQueue))}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, []any{getAtt(f.id(f.s.WorkQueue)), getAtt(f.id(f.s.FailureQueue))}, nil)...)
		want = append(want, grants(onTarget, []any{p.Fanout.TargetQueueARN}, nil)...)
		want = append(want, grants([]string{"sqs:SendMessage"}, []any{getAtt(f.id(f.s.WorkDLQ))}, nil)...)
		want = append(want, grants([]string{"kms:GenerateDataKey", "kms:Decrypt"}, []any{key, p.Fanout.TargetKeyARN}, nil)...)
		want = append(want, grants([]string{"s3:GetObject", "s3:GetObjectVersion"}, []any{
			s3ARN("lake-landing", "/in/*"), s3ARN("lake", "/exports/*"), s3ARN("lake", "/backfill/2024/*"), s3ARN("other", "/*"),
		}, nil)...)
		// Listing objects and their versions (a request with "versions"),
		// under the same prefixes.
		list := []string{"s3:ListBucket", "s3:ListBucketVersions"}
		want = append(want, grants(list, []any{s3ARN("lake-landing", "")}, map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"in/*"}}})...)
		want = append(want, grants(list, []any{s3ARN("lake", "")}, map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"exports/*", "backfill/2024/*"}}})...)
		want = append(want, grants(list, []any{s3ARN("other", "")}, nil)...)
		want = append(want, grants([]string{"kms:Decrypt"}, []any{p.Ingest.ExistingBucketKeyARN, p.Fanout.Datasets[0].KeyARN}, nil)...)
		want = append(want, grants([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, []any{getAtt(f.id(f.s.ClaimsTable))}, nil)...)
		if d := diffGrants(f.roleGrants(f.role(t, f.s.FanoutFunction)), want); d != "" {
			t.Errorf("fanout role:%s", d)
		}
		f.noWildcards(t)

		// Existing target by name and owner, with its real size limit.
		envVars := prop(f.res(t, f.id(f.s.FanoutFunction)).Properties, "Environment", "Variables").(map[string]any)
		for k, v := range map[string]string{
			"TARGET_QUEUE_NAME": "orders.fifo", "TARGET_QUEUE_OWNER_ACCOUNT_ID": "444455556666", "TARGET_MAX_MESSAGE_SIZE": "262144",
			"MODE": "chunk", "MAX_IN_FLIGHT": "4", "FAIL_ON_ERROR": "true",
		} {
			if envVars[k] != v {
				t.Errorf("fanout %s = %v, want %s", k, envVars[k], v)
			}
		}
		if _, ok := envVars["TARGET_QUEUE_URL"]; ok {
			t.Errorf("fanout has TARGET_QUEUE_URL and TARGET_QUEUE_NAME")
		}
	})
}

// consume is what an SQS event source mapping needs on its queue (CDK's
// grantConsumeMessages).
var consume = []string{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// onTarget is what fanout may do on the target queue: find it by name,
// send, and read its backlog (TARGET_MAX_BACKLOG).
var onTarget = []string{"sqs:GetQueueUrl", "sqs:SendMessage", "sqs:GetQueueAttributes"}

// TestPacingAndControl checks what run pacing and control need of the
// stack: MAX_RATE and TARGET_MAX_BACKLOG only when given, and grants that
// do not depend on them. fanout's run state lives in the claims table, so
// its role may do exactly GetItem and UpdateItem there (a cancelled run's
// parked tasks are UpdateItem writes); backpressure reads the target's
// ApproximateNumberOfMessages, so it may GetQueueAttributes on the target,
// and there only beyond sending. Pause, resume, cancel and status are the
// CLI's, with its user's credentials: nothing is granted for them.
func TestPacingAndControl(t *testing.T) {
	const target = "arn:aws:sqs:eu-west-1:444455556666:orders"
	for _, tc := range []struct {
		name    string
		fanout  s3sqscdk.FanoutProps
		wantEnv map[string]any // MAX_RATE, TARGET_MAX_BACKLOG and the filters; absent when not listed
	}{
		{name: "unset, new target"},
		{name: "unset, existing target", fanout: s3sqscdk.FanoutProps{TargetQueueARN: target}},
		{name: "both, new target", fanout: s3sqscdk.FanoutProps{MaxRate: 500, TargetMaxBacklog: 100000},
			wantEnv: map[string]any{"MAX_RATE": "500", "TARGET_MAX_BACKLOG": "100000"}},
		{name: "both, existing target", fanout: s3sqscdk.FanoutProps{TargetQueueARN: target, MaxRate: 1, TargetMaxBacklog: 1},
			wantEnv: map[string]any{"MAX_RATE": "1", "TARGET_MAX_BACKLOG": "1"}},
		{name: "rate only", fanout: s3sqscdk.FanoutProps{MaxRate: 10_000_000}, wantEnv: map[string]any{"MAX_RATE": "10000000"}},
		{name: "object filters", fanout: s3sqscdk.FanoutProps{Filters: s3sqscdk.FilterProps{ModifiedAfter: "2024-01-01", ModifiedBefore: "2025-01-01T00:00:00Z",
			MinObjectSize: "1KiB", MaxObjectSize: "5GiB", StorageClasses: "STANDARD,GLACIER_IR", KeyRegex: `\.parquet$`}},
			wantEnv: map[string]any{"MODIFIED_AFTER": "2024-01-01", "MODIFIED_BEFORE": "2025-01-01T00:00:00Z", "MIN_OBJECT_SIZE": "1KiB",
				"MAX_OBJECT_SIZE": "5GiB", "STORAGE_CLASSES": "STANDARD,GLACIER_IR", "KEY_REGEX": `\.parquet$`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, s3sqscdk.Props{Fanout: tc.fanout})
			vars := prop(f.res(t, f.id(f.s.FanoutFunction)).Properties, "Environment", "Variables").(map[string]any)
			got := map[string]any{}
			for _, k := range []string{"MAX_RATE", "TARGET_MAX_BACKLOG", "MODIFIED_AFTER", "MODIFIED_BEFORE", "MIN_OBJECT_SIZE", "MAX_OBJECT_SIZE", "STORAGE_CLASSES", "KEY_REGEX"} {
				if v, ok := vars[k]; ok {
					got[k] = v
				}
			}
			want := tc.wantEnv
			if want == nil {
				want = map[string]any{}
			}
			if canon(got) != canon(want) {
				t.Errorf("fanout pacing variables:\n got %s\nwant %s", canon(got), canon(want))
			}

			table := canon(getAtt(f.id(f.s.ClaimsTable)))
			targetARN := canon(tc.fanout.TargetQueueARN)
			if tc.fanout.TargetQueueARN == "" {
				targetARN = canon(getAtt(f.id(f.s.TargetQueue)))
			}
			var onTable, onTargetGot []string
			for _, g := range f.roleGrants(f.role(t, f.s.FanoutFunction)) {
				switch g.Resource {
				case table:
					onTable = append(onTable, g.Action)
				case targetARN:
					onTargetGot = append(onTargetGot, g.Action)
				}
				if strings.HasPrefix(g.Action, "dynamodb:") && g.Resource != table {
					t.Errorf("fanout may %s beyond the claims table", g)
				}
			}
			slices.Sort(onTable)
			if want := []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}; !slices.Equal(onTable, want) {
				t.Errorf("fanout's actions on the claims table: %v, want exactly %v", onTable, want)
			}
			slices.Sort(onTargetGot)
			if want := slices.Sorted(slices.Values(onTarget)); !slices.Equal(onTargetGot, want) {
				t.Errorf("fanout's actions on the target %s: %v, want exactly %v", targetARN, onTargetGot, want)
			}
		})
	}
}

// role returns the logical id of fn's role.
func (f *fixture) role(t *testing.T, fn constructs.IConstruct) string {
	t.Helper()
	p := f.res(t, f.id(fn)).Properties
	return prop(p, "Role", "Fn::GetAtt", 0).(string)
}

// logGroup returns the logical id of fn's log group.
func (f *fixture) logGroup(t *testing.T, fn constructs.IConstruct) string {
	t.Helper()
	p := f.res(t, f.id(fn)).Properties
	return prop(p, "LoggingConfig", "LogGroup", "Ref").(string)
}

// noWildcards fails on any "*" action, or any resource that is "*", in
// the identity policies of the template.
func (f *fixture) noWildcards(t *testing.T) {
	t.Helper()
	for _, id := range f.tmpl.ofType("AWS::IAM::Policy") {
		for _, g := range expand(list(prop(f.tmpl.Resources[id].Properties, "PolicyDocument", "Statement"))) {
			if strings.Contains(g.Action, "*") || g.Resource == `"*"` {
				t.Errorf("%s grants %s", id, g)
			}
		}
	}
	for _, id := range f.tmpl.ofType("AWS::IAM::Role") {
		if mp := f.tmpl.Resources[id].Properties["ManagedPolicyArns"]; mp != nil && !strings.HasPrefix(id, "BucketNotificationsHandler") {
			t.Errorf("role %s has managed policies %s", id, canon(mp))
		}
	}
}

// TestFunctions checks runtime, architecture, handler, logging and the
// variables fanout needs for a new target queue.
func TestFunctions(t *testing.T) {
	f := synth(t, s3sqscdk.Props{LogRetention: "", Fanout: s3sqscdk.FanoutProps{Timeout: 10 * time.Minute, MemoryMiB: 2048}})
	fns := f.tmpl.ofType("AWS::Lambda::Function")
	if len(fns) != 2 {
		t.Fatalf("functions: %v, want 2", fns)
	}
	for _, id := range fns {
		p := f.tmpl.Resources[id].Properties
		if p["Runtime"] != "provided.al2023" || canon(p["Architectures"]) != `["arm64"]` || p["Handler"] != "bootstrap" {
			t.Errorf("%s: Runtime %v, Architectures %v, Handler %v; want provided.al2023, [arm64], bootstrap", id, p["Runtime"], p["Architectures"], p["Handler"])
		}
		if got := prop(p, "LoggingConfig", "LogFormat"); got != "JSON" {
			t.Errorf("%s LogFormat = %v, want JSON", id, got)
		}
		lg := prop(p, "LoggingConfig", "LogGroup", "Ref").(string)
		if got := f.res(t, lg).Properties["RetentionInDays"]; got != float64(30) {
			t.Errorf("%s log group retention = %v, want 30 days", id, got)
		}
	}
	fo := f.res(t, f.id(f.s.FanoutFunction)).Properties
	if fo["Timeout"] != float64(600) || fo["MemorySize"] != float64(2048) {
		t.Errorf("fanout Timeout %v, MemorySize %v; want 600, 2048", fo["Timeout"], fo["MemorySize"])
	}
	envVars := prop(fo, "Environment", "Variables").(map[string]any)
	want := map[string]any{
		"TARGET_QUEUE_URL":        ref(f.id(f.s.TargetQueue)),
		"TARGET_MAX_MESSAGE_SIZE": "1048576",
		"WORK_QUEUE_URL":          ref(f.id(f.s.WorkQueue)),
		"FAILURE_QUEUE_URL":       ref(f.id(f.s.FailureQueue)),
		"CLAIMS_TABLE":            ref(f.id(f.s.ClaimsTable)),
	}
	if canon(envVars) != canon(want) {
		t.Errorf("fanout variables:\n got %s\nwant %s", canon(envVars), canon(want))
	}
	if got := f.res(t, f.id(f.s.TargetQueue)).Properties["MaximumMessageSize"]; got != float64(1<<20) {
		t.Errorf("target MaximumMessageSize = %v, want 1048576 (what TARGET_MAX_MESSAGE_SIZE says)", got)
	}
}

// TestEncryption checks encryption at rest and TLS-only access on every
// queue, the topic and the buckets.
func TestEncryption(t *testing.T) {
	const keyARN = "arn:aws:kms:eu-west-1:111122223333:key/shared"
	var importedKey awskms.IKey
	catch(t, func() {
		importedKey = awskms.Key_FromKeyArn(awscdk.NewStack(nil, jsii.String("Keys"), nil), jsii.String("Key"), jsii.String(keyARN))
	})
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
	}{
		{"SSE-SQS", s3sqscdk.Props{}},
		{"KMS", s3sqscdk.Props{Encryption: s3sqscdk.EncryptionKMS}},
		{"KMS, imported key", s3sqscdk.Props{Encryption: s3sqscdk.EncryptionKMS, EncryptionKey: importedKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synth(t, tc.props)
			var key any
			imported := tc.props.EncryptionKey != nil
			switch {
			case imported:
				key = keyARN
				if got := f.res(t, f.id(f.s.Topic)).Properties["KmsMasterKeyId"]; got != keyARN {
					t.Errorf("topic KmsMasterKeyId = %v, want the imported key", got)
				}
				if ks := f.tmpl.ofType("AWS::KMS::Key"); len(ks) != 0 {
					t.Errorf("keys %v created besides the imported one", ks)
				}
			case f.s.QueueKey != nil:
				key = getAtt(f.id(f.s.QueueKey))
			}
			for _, id := range f.tmpl.ofType("AWS::SQS::Queue") {
				p := f.tmpl.Resources[id].Properties
				if tc.props.Encryption == s3sqscdk.EncryptionKMS {
					if canon(p["KmsMasterKeyId"]) != canon(key) {
						t.Errorf("%s KmsMasterKeyId = %s, want the key", id, canon(p["KmsMasterKeyId"]))
					}
				} else if p["SqsManagedSseEnabled"] != true {
					t.Errorf("%s SqsManagedSseEnabled = %v", id, p["SqsManagedSseEnabled"])
				}
				if !f.queueDeniesPlainHTTP(id) {
					t.Errorf("%s has no policy denying requests without TLS", id)
				}
			}
			for _, id := range f.tmpl.ofType("AWS::S3::Bucket") {
				p := f.tmpl.Resources[id].Properties
				if prop(p, "BucketEncryption", "ServerSideEncryptionConfiguration", 0, "ServerSideEncryptionByDefault", "SSEAlgorithm") == nil {
					t.Errorf("bucket %s has no default encryption", id)
				}
				if canon(p["PublicAccessBlockConfiguration"]) != `{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}` {
					t.Errorf("bucket %s public access block = %s", id, canon(p["PublicAccessBlockConfiguration"]))
				}
			}
			for _, id := range f.tmpl.ofType("AWS::S3::BucketPolicy") {
				found := false
				for _, st := range list(prop(f.tmpl.Resources[id].Properties, "PolicyDocument", "Statement")) {
					found = found || (prop(st, "Effect") == "Deny" && prop(st, "Condition", "Bool", "aws:SecureTransport") == "false")
				}
				if !found {
					t.Errorf("bucket policy %s does not deny requests without TLS", id)
				}
			}
			if tc.props.Encryption == s3sqscdk.EncryptionKMS && !imported {
				// SNS may use the key to deliver to the queues, for this
				// topic only.
				var sns []any
				for _, st := range list(prop(f.res(t, f.id(f.s.QueueKey)).Properties, "KeyPolicy", "Statement")) {
					if prop(st, "Principal", "Service") == "sns.amazonaws.com" {
						sns = append(sns, st)
					}
				}
				want := []any{map[string]any{
					"Effect": "Allow", "Principal": map[string]any{"Service": "sns.amazonaws.com"},
					"Action": []any{"kms:Decrypt", "kms:GenerateDataKey"}, "Resource": "*",
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": ref(f.id(f.s.Topic))}},
				}}
				if canon(sns) != canon(want) {
					t.Errorf("key policy for SNS:\n got %s\nwant %s", canon(sns), canon(want))
				}
			}
		})
	}
}

func (f *fixture) queueDeniesPlainHTTP(queue string) bool {
	for _, id := range f.tmpl.ofType("AWS::SQS::QueuePolicy") {
		p := f.tmpl.Resources[id].Properties
		if !slices.ContainsFunc(list(p["Queues"]), func(q any) bool { return canon(q) == canon(ref(queue)) }) {
			continue
		}
		for _, st := range list(prop(p, "PolicyDocument", "Statement")) {
			if prop(st, "Effect") == "Deny" && prop(st, "Condition", "Bool", "aws:SecureTransport") == "false" {
				return true
			}
		}
	}
	return false
}

// TestAlarms checks one depth alarm per dead-letter queue and for the
// failure queue, the age alarms of the ingest and work queues, and for each
// function alarms on its errors, throttles, failed and bad records (the
// last two on its own EMF metrics: Function and FunctionName).
func TestAlarms(t *testing.T) {
	f := synth(t, s3sqscdk.Props{Ingest: s3sqscdk.IngestProps{OldestMessageAlarm: 45 * time.Minute}, Fanout: s3sqscdk.FanoutProps{OldestTaskAlarm: 20 * time.Minute}})
	type alarm struct {
		namespace, metric, dims string
		threshold               float64
	}
	var got []alarm
	for _, id := range f.tmpl.ofType("AWS::CloudWatch::Alarm") {
		p := f.tmpl.Resources[id].Properties
		got = append(got, alarm{p["Namespace"].(string), p["MetricName"].(string), canon(p["Dimensions"]), p["Threshold"].(float64)})
		if p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["TreatMissingData"] != "notBreaching" {
			t.Errorf("alarm %s: %s", id, canon(p))
		}
	}
	queue := func(q constructs.IConstruct) string {
		return canon([]any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{f.id(q), "QueueName"}}}})
	}
	function := func(fn constructs.IConstruct) string {
		return canon([]any{map[string]any{"Name": "FunctionName", "Value": ref(f.id(fn))}})
	}
	emf := func(kind string, fn constructs.IConstruct) string {
		return canon([]any{map[string]any{"Name": "Function", "Value": kind}, map[string]any{"Name": "FunctionName", "Value": ref(f.id(fn))}})
	}
	want := []alarm{
		{"AWS/SQS", "ApproximateAgeOfOldestMessage", queue(f.s.IngestQueue), 2700},
		{"AWS/SQS", "ApproximateAgeOfOldestMessage", queue(f.s.WorkQueue), 1200},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", queue(f.s.IngestDLQ), 1},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", queue(f.s.OutputDLQ), 1},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", queue(f.s.WorkDLQ), 1},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", queue(f.s.FailureQueue), 1},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", queue(f.s.TargetDLQ), 1},
	}
	for _, fn := range []struct {
		kind string
		fn   constructs.IConstruct
	}{{"s3ingest", f.s.IngestFunction}, {"fanout", f.s.FanoutFunction}} {
		want = append(want,
			alarm{"AWS/Lambda", "Errors", function(fn.fn), 1},
			alarm{"AWS/Lambda", "Throttles", function(fn.fn), 1},
			alarm{"s3sqs", "RecordsFailed", emf(fn.kind, fn.fn), 1},
			alarm{"s3sqs", "BadRecords", emf(fn.kind, fn.fn), 1})
	}
	cmp := func(a, b alarm) int { return strings.Compare(a.metric+a.dims, b.metric+b.dims) }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Errorf("alarms:\n got %v\nwant %v", got, want)
	}

	dash := f.tmpl.ofType("AWS::CloudWatch::Dashboard")
	if len(dash) != 1 {
		t.Fatalf("dashboards %v, want one", dash)
	}
	body := canon(f.tmpl.Resources[dash[0]].Properties["DashboardBody"])
	for _, w := range []string{"Records read, sent, offloaded", "RecordsOffloaded", "Retries", "BadRecords", "Throttles", "p99", "Messages visible", "work DLQ"} {
		if !strings.Contains(body, w) {
			t.Errorf("the dashboard lacks %q", w)
		}
	}
	if off := synth(t, s3sqscdk.Props{DisableDashboard: true}); len(off.tmpl.ofType("AWS::CloudWatch::Dashboard")) != 0 || off.s.Dashboard != nil {
		t.Error("DisableDashboard: a dashboard is still there")
	}
}

// TestSubscribeQueue checks that another consumer gets the same
// notifications, raw.
func TestSubscribeQueue(t *testing.T) {
	f := build(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Disabled: true}}, nil)
	var q awssqs.Queue
	catch(t, func() {
		q = awssqs.NewQueue(f.stack, jsii.String("Other"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
		f.s.SubscribeQueue(q, nil)
	})
	f.synth(t)
	found := false
	for _, id := range f.tmpl.ofType("AWS::SNS::Subscription") {
		p := f.tmpl.Resources[id].Properties
		if canon(p["Endpoint"]) == canon(getAtt(f.id(q))) {
			found = p["RawMessageDelivery"] == true && canon(p["TopicArn"]) == canon(ref(f.id(f.s.Topic)))
		}
	}
	if !found {
		t.Errorf("no raw subscription of the other queue to the topic")
	}
	if f.s.FanoutFunction != nil || len(f.tmpl.ofType("AWS::Lambda::Function")) != 1 {
		t.Errorf("fanout disabled, but the template has functions %v", f.tmpl.ofType("AWS::Lambda::Function"))
	}
}

// TestPropsErrors checks that bad props come back as one error naming
// each field.
func TestPropsErrors(t *testing.T) {
	in, fo := codeDirs(t)
	var ownKey awskms.IKey
	catch(t, func() {
		ownKey = awskms.NewKey(awscdk.NewStack(nil, jsii.String("Keys"), nil), jsii.String("Key"), nil)
	})
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
		want  []string
	}{
		{"maxReceiveCount under 5", s3sqscdk.Props{MaxReceiveCount: 3}, []string{"MaxReceiveCount"}},
		{"no bootstrap", s3sqscdk.Props{Ingest: s3sqscdk.IngestProps{CodeDir: t.TempDir()}, Fanout: s3sqscdk.FanoutProps{CodeDir: "/nonexistent"}}, []string{"Ingest.CodeDir", "Fanout.CodeDir", "make build"}},
		{"several at once", s3sqscdk.Props{
			Encryption: "sse-kms",
			Ingest:     s3sqscdk.IngestProps{Timeout: 20 * time.Minute, BatchSize: 50, MaxConcurrency: 1, KeyPrefix: "a*"},
			Fanout:     s3sqscdk.FanoutProps{TargetQueueARN: "orders", TargetMaxMessageSize: 2 << 20, Mode: "bulk"},
		}, []string{"Encryption", "Ingest.Timeout", "Ingest.BatchSize", "Ingest.MaxConcurrency", "Ingest.KeyPrefix", "Fanout.TargetQueueARN", "Fanout.TargetMaxMessageSize", "Fanout.Mode"}},
		{"report prefix", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Report: s3sqscdk.ReportProps{Enabled: true, Prefix: "runs", ExpirationDays: -1}}},
			[]string{"Fanout.Report.Prefix", "Fanout.Report.ExpirationDays"}},
		{"batch operations without a manifest bucket, bad prefix", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{BatchOperations: s3sqscdk.BatchOperationsProps{Enabled: true, ReportPrefix: "/done"}}},
			[]string{"Fanout.BatchOperations.ManifestBucketName: required", "Fanout.BatchOperations.ReportPrefix"}},
		{"batch operations settings while off", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{BatchOperations: s3sqscdk.BatchOperationsProps{ManifestBucketName: "m"}}},
			[]string{"Fanout.BatchOperations: buckets and prefixes need Enabled"}},
		{"handoff without fanout", s3sqscdk.Props{Ingest: s3sqscdk.IngestProps{HandoffBytes: "1GiB"}, Fanout: s3sqscdk.FanoutProps{Disabled: true}}, []string{"Ingest.HandoffBytes"}},
		{"reserved variable", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Environment: map[string]string{"TARGET_QUEUE_URL": "x"}}}, []string{"Fanout.Environment", "TARGET_QUEUE_URL"}},
		{"pacing variables are the props'", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Environment: map[string]string{"MAX_RATE": "5", "TARGET_MAX_BACKLOG": "9"}}},
			[]string{"Fanout.Environment", "MAX_RATE", "TARGET_MAX_BACKLOG"}},
		{"pacing out of range", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{MaxRate: 10_000_001, TargetMaxBacklog: -1}},
			[]string{"Fanout.MaxRate: 10000001 is not from 1 to 10000000", "Fanout.TargetMaxBacklog: -1 is not from 1 to 1000000000"}},
		{"bad object filters", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Filters: s3sqscdk.FilterProps{
			ModifiedAfter: "yesterday", MinObjectSize: "1 MB", StorageClasses: "standard", KeyRegex: "a("}}},
			[]string{`Fanout.Filters.ModifiedAfter: "yesterday" is not an RFC 3339 time`, `Fanout.Filters.MinObjectSize: "1 MB" is not a size`,
				`Fanout.Filters.StorageClasses: "standard"`, "Fanout.Filters.KeyRegex: error parsing regexp"}},
		{"filter variables are the props'", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Environment: map[string]string{"KEY_REGEX": "x"}}},
			[]string{"Fanout.Environment", "KEY_REGEX"}},
		{"own key for topic and queues", s3sqscdk.Props{Encryption: s3sqscdk.EncryptionKMS, EncryptionKey: ownKey}, []string{"EncryptionKey"}},
		{"target in another region", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{TargetQueueARN: "arn:aws:sqs:us-east-1:444455556666:q"}}, []string{"us-east-1", "eu-west-1"}},
		{"pollers out of range", s3sqscdk.Props{
			Ingest: s3sqscdk.IngestProps{MinPollers: 1, MaxPollers: 2001},
			Fanout: s3sqscdk.FanoutProps{MinPollers: 201, MaxPollers: -1},
		}, []string{"Ingest.MinPollers: 1 is not from 2 to 200", "Ingest.MaxPollers: 2001 is not from 2 to 2000",
			"Fanout.MinPollers: 201 is not from 2 to 200", "Fanout.MaxPollers: -1 is not from 2 to 2000"}},
		{"notification format without notification mode", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Mode: "chunk", NotificationFormat: "sns"}},
			[]string{`Fanout.NotificationFormat: "sns" needs Mode "notification"`}},
		{"notification format unset mode", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{NotificationFormat: "s3"}},
			[]string{`Fanout.NotificationFormat: "s3" needs Mode "notification"`}},
		{"notification format unknown", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Mode: "notification", NotificationFormat: "cloudevents"}},
			[]string{`Fanout.NotificationFormat: "cloudevents" is not s3, eventbridge or sns`}},
		{"claims TTL not a time", s3sqscdk.Props{ClaimsTTL: "0"}, []string{`ClaimsTTL: "0" is not a time to keep`}},
		{"claims TTL off", s3sqscdk.Props{ClaimsTTL: "off"}, []string{`ClaimsTTL: "off" is not a time to keep`}},
		{"claims TTL in weeks", s3sqscdk.Props{ClaimsTTL: "2w"}, []string{`ClaimsTTL: "2w" is not a time to keep`}},
		{"claims TTL of zero days", s3sqscdk.Props{ClaimsTTL: "0d"}, []string{`ClaimsTTL: "0d" is not a time to keep`}},
		{"claims TTL without claims", s3sqscdk.Props{DisableClaims: true, ClaimsTTL: "7d"}, []string{"ClaimsTTL: needs the claims table"}},
		{"CSV characters", s3sqscdk.Props{Read: s3sqscdk.ReadProps{CSVDelimiter: ";;", CSVQuote: "é", CSVEscape: "none"}},
			[]string{`Read.CSVDelimiter: ";;" is not one character`, `Read.CSVQuote: "é" is not one ASCII character`, `Read.CSVEscape: "none" is not one ASCII character`}},
		{"claims TTL and notification format are the props'", s3sqscdk.Props{
			Ingest: s3sqscdk.IngestProps{Environment: map[string]string{"CLAIMS_TTL": "1d"}},
			Fanout: s3sqscdk.FanoutProps{Environment: map[string]string{"CLAIMS_TTL": "1d", "NOTIFICATION_FORMAT": "sns"}},
		}, []string{"Ingest.Environment: CLAIMS_TTL", "Fanout.Environment: CLAIMS_TTL", "Fanout.Environment: NOTIFICATION_FORMAT"}},
		{"reconcile interval", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{ReconcileEveryMinutes: 7}}, []string{"Fanout.ReconcileEveryMinutes: 7 is not one of"}},
		{"reconcile without fanout", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Disabled: true, ReconcileEveryMinutes: 60}}, []string{"Fanout.ReconcileEveryMinutes needs the fanout path"}},
		{"reconcile without claims", s3sqscdk.Props{DisableClaims: true, Fanout: s3sqscdk.FanoutProps{ReconcileEveryMinutes: 60}}, []string{"Fanout.ReconcileEveryMinutes needs the ingest path and the claims table"}},
		{"more minimum than maximum pollers", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{MinPollers: 50, MaxPollers: 20}},
			[]string{"Fanout.MinPollers: 50 is above MaxPollers 20"}},
		{"pollers and maximum concurrency", s3sqscdk.Props{
			Ingest: s3sqscdk.IngestProps{MaxConcurrency: 10, MaxPollers: 10},
			Fanout: s3sqscdk.FanoutProps{MaxConcurrency: 10, MinPollers: 2},
		}, []string{"Ingest.MaxConcurrency: not with MinPollers or MaxPollers", "Fanout.MaxConcurrency: not with MinPollers or MaxPollers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.props.Ingest.CodeDir == "" {
				tc.props.Ingest.CodeDir = in
			}
			if tc.props.Fanout.CodeDir == "" {
				tc.props.Fanout.CodeDir = fo
			}
			catch(t, func() {
				app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
				stack := awscdk.NewStack(app, jsii.String("Test"), &awscdk.StackProps{
					Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
				})
				_, err := s3sqscdk.New(stack, "S3SQS", &tc.props)
				if err == nil {
					t.Fatalf("New succeeded, want an error naming %v", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
			})
		})
	}
}

// TestClaimsTable checks the table pkg/claims needs (its key and TTL
// attributes), and that DisableClaims leaves it, its variable and its
// grants out.
func TestClaimsTable(t *testing.T) {
	f := synth(t, s3sqscdk.Props{})
	props := f.res(t, f.id(f.s.ClaimsTable)).Properties
	want := map[string]any{
		"KeySchema":               []any{map[string]any{"AttributeName": "claim", "KeyType": "HASH"}},
		"AttributeDefinitions":    []any{map[string]any{"AttributeName": "claim", "AttributeType": "S"}},
		"BillingMode":             "PAY_PER_REQUEST",
		"TimeToLiveSpecification": map[string]any{"AttributeName": "expiresAt", "Enabled": true},
	}
	for k, v := range want {
		if canon(props[k]) != canon(v) {
			t.Errorf("claims table %s = %s, want %s", k, canon(props[k]), canon(v))
		}
	}
	for _, fn := range []awslambda.Function{f.s.IngestFunction, f.s.FanoutFunction} {
		if got := prop(f.res(t, f.id(fn)).Properties, "Environment", "Variables", "CLAIMS_TABLE"); canon(got) != canon(ref(f.id(f.s.ClaimsTable))) {
			t.Errorf("%s CLAIMS_TABLE = %s", *fn.Node().Id(), canon(got))
		}
	}

	off := synth(t, s3sqscdk.Props{DisableClaims: true})
	if off.s.ClaimsTable != nil {
		t.Fatal("DisableClaims: the construct still has a claims table")
	}
	if ids := off.tmpl.ofType("AWS::DynamoDB::Table"); len(ids) != 0 {
		t.Errorf("DisableClaims: tables %v in the template", ids)
	}
	for _, fn := range []awslambda.Function{off.s.IngestFunction, off.s.FanoutFunction} {
		if got := prop(off.res(t, off.id(fn)).Properties, "Environment", "Variables", "CLAIMS_TABLE"); got != nil {
			t.Errorf("DisableClaims: %s CLAIMS_TABLE = %v", *fn.Node().Id(), got)
		}
		for _, g := range off.roleGrants(off.role(t, fn)) {
			if strings.HasPrefix(g.Action, "dynamodb:") {
				t.Errorf("DisableClaims: %s may %s", *fn.Node().Id(), g)
			}
		}
	}
}

// TestOffloadBucket checks the offload bucket (encrypted, TLS only, payloads
// expiring), the variables both functions get, their s3:PutObject on the
// prefix only, and the consumers' read grant.
func TestOffloadBucket(t *testing.T) {
	f := build(t, s3sqscdk.Props{Offload: s3sqscdk.OffloadProps{Enabled: true, Prefix: "big/", ExpirationDays: 3, Always: true}}, nil)
	consumer := awsiam.NewRole(f.stack, jsii.String("Consumer"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
	if f.s.GrantReadPayloads(consumer, true) == nil {
		t.Fatal("GrantReadPayloads returned nil with offload on")
	}
	f.synth(t)
	bucket := f.id(f.s.OffloadBucket)
	props := f.res(t, bucket).Properties
	if got := canon(prop(props, "LifecycleConfiguration", "Rules")); !strings.Contains(got, `"ExpirationInDays":3`) || !strings.Contains(got, `"Prefix":"big/"`) {
		t.Errorf("lifecycle rules %s; want payloads under big/ expiring after 3 days", got)
	}
	if got := canon(prop(props, "BucketEncryption")); !strings.Contains(got, "AES256") {
		t.Errorf("encryption %s; want SSE-S3", got)
	}
	if !strings.Contains(canon(f.tmpl.Resources), `"aws:SecureTransport":"false"`) {
		t.Error("no TLS-only bucket policy")
	}
	uri := map[string]any{"Fn::Join": []any{"", []any{"s3://", ref(bucket), "/big/"}}}
	for _, fn := range []awslambda.Function{f.s.IngestFunction, f.s.FanoutFunction} {
		vars := prop(f.res(t, f.id(fn)).Properties, "Environment", "Variables").(map[string]any)
		if canon(vars["OFFLOAD_S3_URI"]) != canon(uri) || vars["OFFLOAD"] != "always" {
			t.Errorf("%s: OFFLOAD_S3_URI %s, OFFLOAD %v", *fn.Node().Id(), canon(vars["OFFLOAD_S3_URI"]), vars["OFFLOAD"])
		}
		var puts []string
		for _, g := range f.roleGrants(f.role(t, fn)) {
			if strings.HasPrefix(g.Action, "s3:PutObject") {
				puts = append(puts, g.Resource)
			}
		}
		want := canon(s3ARN(ref(bucket), "/big/*"))
		if len(puts) != 1 || puts[0] != want {
			t.Errorf("%s may s3:PutObject on %v; want only %s", *fn.Node().Id(), puts, want)
		}
	}
	var consumerGrants []string
	for _, g := range f.roleGrants(f.id(consumer)) {
		consumerGrants = append(consumerGrants, g.Action)
	}
	slices.Sort(consumerGrants)
	if !slices.Equal(consumerGrants, []string{"s3:DeleteObject", "s3:GetObject"}) {
		t.Errorf("consumer grants %v; want s3:GetObject and s3:DeleteObject", consumerGrants)
	}

	off := synth(t, s3sqscdk.Props{})
	if off.s.OffloadBucket != nil || off.s.GrantReadPayloads(awsiam.NewAnyPrincipal(), false) != nil {
		t.Error("offload off: a bucket or a grant")
	}
}

// TestTracing checks that tracing turns on X-Ray active tracing with its
// two actions on the roles, and with the collector layer TRACING=otlp; off,
// neither is there.
func TestTracing(t *testing.T) {
	const layer = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"
	f := synth(t, s3sqscdk.Props{Tracing: s3sqscdk.TracingProps{Enabled: true, CollectorLayerARN: layer}})
	for _, fn := range []awslambda.Function{f.s.IngestFunction, f.s.FanoutFunction} {
		p := f.res(t, f.id(fn)).Properties
		if canon(p["TracingConfig"]) != `{"Mode":"Active"}` || canon(p["Layers"]) != canon([]any{layer}) || prop(p, "Environment", "Variables", "TRACING") != "otlp" {
			t.Errorf("%s: tracing %s, layers %s, TRACING %v", *fn.Node().Id(), canon(p["TracingConfig"]), canon(p["Layers"]), prop(p, "Environment", "Variables", "TRACING"))
		}
		var xray []string
		for _, g := range f.roleGrants(f.role(t, fn)) {
			if strings.HasPrefix(g.Action, "xray:") {
				xray = append(xray, g.String())
			}
		}
		if len(xray) != 2 {
			t.Errorf("%s: X-Ray grants %v, want PutTraceSegments and PutTelemetryRecords", *fn.Node().Id(), xray)
		}
	}
	off := synth(t, s3sqscdk.Props{})
	for _, fn := range []awslambda.Function{off.s.IngestFunction, off.s.FanoutFunction} {
		p := off.res(t, off.id(fn)).Properties
		if p["TracingConfig"] != nil && canon(p["TracingConfig"]) != `{"Mode":"PassThrough"}` || prop(p, "Environment", "Variables", "TRACING") != nil {
			t.Errorf("tracing off: %s has %s, TRACING %v", *fn.Node().Id(), canon(p["TracingConfig"]), prop(p, "Environment", "Variables", "TRACING"))
		}
	}
}

// TestReportBucket checks the run report: a new bucket whose reports
// expire, REPORT_S3_URI, and s3:PutObject under the prefix only; or an
// existing bucket, left as it is.
func TestReportBucket(t *testing.T) {
	f := synth(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Report: s3sqscdk.ReportProps{Enabled: true, Prefix: "runs/", ExpirationDays: 7}}})
	bucket := f.id(f.s.ReportBucket)
	props := f.res(t, bucket).Properties
	if got := canon(prop(props, "LifecycleConfiguration", "Rules")); !strings.Contains(got, `"ExpirationInDays":7`) || !strings.Contains(got, `"Prefix":"runs/"`) {
		t.Errorf("lifecycle rules %s; want reports under runs/ expiring after 7 days", got)
	}
	if got := canon(prop(props, "BucketEncryption")); !strings.Contains(got, "AES256") {
		t.Errorf("encryption %s; want SSE-S3", got)
	}
	uri := map[string]any{"Fn::Join": []any{"", []any{"s3://", ref(bucket), "/runs/"}}}
	vars := prop(f.res(t, f.id(f.s.FanoutFunction)).Properties, "Environment", "Variables").(map[string]any)
	if canon(vars["REPORT_S3_URI"]) != canon(uri) {
		t.Errorf("REPORT_S3_URI %s, want %s", canon(vars["REPORT_S3_URI"]), canon(uri))
	}
	ingestVars := prop(f.res(t, f.id(f.s.IngestFunction)).Properties, "Environment", "Variables").(map[string]any)
	if _, ok := ingestVars["REPORT_S3_URI"]; ok {
		t.Error("s3ingest has REPORT_S3_URI")
	}
	var puts []string
	for _, g := range f.roleGrants(f.role(t, f.s.FanoutFunction)) {
		if strings.HasPrefix(g.Action, "s3:") {
			puts = append(puts, g.Action+" "+g.Resource)
		}
	}
	if want := "s3:PutObject " + canon(s3ARN(ref(bucket), "/runs/*")); len(puts) != 1 || puts[0] != want {
		t.Errorf("fanout's S3 grants %v; want only %s", puts, want)
	}
	f.noWildcards(t)

	ex := synth(t, s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Report: s3sqscdk.ReportProps{Enabled: true, ExistingBucketName: "runs"}}})
	if n := len(ex.tmpl.ofType("AWS::S3::Bucket")); n != 2 { // the source and access logs buckets
		t.Errorf("existing report bucket: %d buckets, want the 2 of the source", n)
	}
	if got := ex.s.ReportS3URI(); got != "s3://runs/reports/" {
		t.Errorf("ReportS3URI %q, want s3://runs/reports/", got)
	}

	off := synth(t, s3sqscdk.Props{})
	if off.s.ReportBucket != nil || off.s.ReportS3URI() != "" {
		t.Error("report off: a bucket or a URI")
	}
}

// TestHandoffWithoutIngest: HandoffBytes is s3ingest's; without the ingest
// path it grants fanout nothing on a source bucket that does not exist.
func TestHandoffWithoutIngest(t *testing.T) {
	f := synth(t, s3sqscdk.Props{
		Ingest: s3sqscdk.IngestProps{Disabled: true, HandoffBytes: "64MiB"},
		Fanout: s3sqscdk.FanoutProps{Datasets: []s3sqscdk.Dataset{{Bucket: "lake"}}},
	})
	var s3 []string
	for _, g := range f.roleGrants(f.role(t, f.s.FanoutFunction)) {
		if strings.HasPrefix(g.Action, "s3:") {
			s3 = append(s3, g.Action+" "+g.Resource)
		}
	}
	slices.Sort(s3)
	want := []string{
		"s3:GetObject " + canon(s3ARN("lake", "/*")), "s3:GetObjectVersion " + canon(s3ARN("lake", "/*")), "s3:ListBucket " + canon(s3ARN("lake", "")),
		"s3:ListBucketVersions " + canon(s3ARN("lake", "")),
	}
	slices.Sort(want)
	if !slices.Equal(s3, want) {
		t.Errorf("fanout's S3 grants %v; want %v", s3, want)
	}
}
