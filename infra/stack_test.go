package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// catch turns a panic out of jsii into a test error.
func catch(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v", r)
		}
	}()
	fn()
}

// codeDirs makes placeholder bootstrap directories, as `make build` would.
func codeDirs(t *testing.T) map[string]any {
	t.Helper()
	root := t.TempDir()
	ctx := map[string]any{}
	for key, d := range map[string]string{ctxIngestCodeDir: "s3ingest", ctxFanoutCodeDir: "fanout"} {
		dir := filepath.Join(root, d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(d), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx[key] = dir
	}
	return ctx
}

func newApp(t *testing.T, ctx map[string]any) awscdk.App {
	t.Helper()
	return awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
}

// newTestStack builds the app's stack from ctx, in account 111122223333
// and eu-west-1.
func newTestStack(t *testing.T, ctx map[string]any) (awscdk.App, awscdk.Stack) {
	t.Helper()
	app := newApp(t, ctx)
	cfg, err := configFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	stack, _, err := newStack(app, cfg, &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("eu-west-1")})
	if err != nil {
		t.Fatal(err)
	}
	return app, stack
}

// TestContext checks how context values (strings from -c, JSON from
// cdk.json) become props, and that bad ones are all reported.
func TestContext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ctx     map[string]any
		want    appConfig
		wantErr []string
	}{
		{
			name: "defaults, no dataset on purpose",
			ctx:  map[string]any{"datasets": "none"},
			want: appConfig{stackName: "S3Sqs", nag: true, props: s3sqscdk.Props{
				Ingest: s3sqscdk.IngestProps{CodeDir: "../dist/s3ingest"},
				Fanout: s3sqscdk.FanoutProps{CodeDir: "../dist/fanout"},
			}},
		},
		{
			name: "strings from the command line",
			ctx: map[string]any{
				"stackName": "Lake", "encryption": "kms", "maxReceiveCount": "8", "logRetentionDays": "90",
				"bucketName": "landing", "keyPrefix": "in/", "ingestTimeout": "90", "ingestBatchingWindow": "20s",
				"ingestBatchSize": "100", "ingestMaxConcurrency": "5", "fanoutMinPollers": "10", "fanoutMaxPollers": "100", "ingestEnv": "PARTITION_COLUMNS=typed, MAX_IN_FLIGHT=8",
				"handoffBytes": "64MiB", "fanout": "true", "targetQueueArn": "arn:aws:sqs:eu-west-1:444455556666:orders",
				"targetMaxMessageSize": "262144", "datasets": "lake/exports/,s3://lake/backfill/,other",
				"fanoutTimeout": "10m", "failOnError": "true", "maxRate": "500", "targetMaxBacklog": "100000", "nag": "false", "alarmTopicArn": "arn:aws:sns:eu-west-1:111122223333:ops",
				"fanoutBatchingWindow": "30s", "datasetKeys": "lake=arn:aws:kms:eu-west-1:111122223333:key/lake",
				"report": "true", "reportBucketName": "runs", "reportPrefix": "fanout/", "reportExpirationDays": "30",
				"batchOperations": "true", "batchManifestBucketName": "inventory", "batchManifestPrefix": "jobs/",
				"batchReportBucketName": "job-reports", "batchReportPrefix": "done/",
				"fanoutMode": "notification", "notificationFormat": "sns", "claimsTtl": " 36h ",
			},
			want: appConfig{stackName: "Lake", alarmTopicARN: "arn:aws:sns:eu-west-1:111122223333:ops", props: s3sqscdk.Props{
				Encryption: s3sqscdk.EncryptionKMS, MaxReceiveCount: 8, LogRetention: awslogs.RetentionDays_THREE_MONTHS, ClaimsTTL: "36h",
				Ingest: s3sqscdk.IngestProps{
					CodeDir: "../dist/s3ingest", ExistingBucketName: "landing", KeyPrefix: "in/", Timeout: 90 * time.Second,
					MaxBatchingWindow: 20 * time.Second, BatchSize: 100, MaxConcurrency: 5, HandoffBytes: "64MiB",
					Environment: map[string]string{"PARTITION_COLUMNS": "typed", "MAX_IN_FLIGHT": "8"},
				},
				Fanout: s3sqscdk.FanoutProps{
					CodeDir: "../dist/fanout", TargetQueueARN: "arn:aws:sqs:eu-west-1:444455556666:orders", TargetMaxMessageSize: 262144,
					Datasets: []s3sqscdk.Dataset{
						{Bucket: "lake", Prefixes: []string{"exports/", "backfill/"}, KeyARN: "arn:aws:kms:eu-west-1:111122223333:key/lake"},
						{Bucket: "other"},
					},
					Timeout:            10 * time.Minute,
					MaxBatchingWindow:  30 * time.Second,
					MinPollers:         10,
					MaxPollers:         100,
					FailOnError:        true,
					Mode:               "notification",
					NotificationFormat: "sns",
					MaxRate:            500,
					TargetMaxBacklog:   100000,
					Report:             s3sqscdk.ReportProps{Enabled: true, ExistingBucketName: "runs", Prefix: "fanout/", ExpirationDays: 30},
					BatchOperations: s3sqscdk.BatchOperationsProps{Enabled: true, ManifestBucketName: "inventory", ManifestPrefix: "jobs/",
						ReportBucketName: "job-reports", ReportPrefix: "done/"},
				},
			}},
		},
		{
			name: "JSON from cdk.json",
			ctx: map[string]any{
				"ingest": false, "datasets": "none", "fanoutMemoryMiB": float64(2048), "maxRate": float64(250), "targetMaxBacklog": float64(5000), "ingestMaxPollers": float64(20), "fanoutEnv": map[string]any{"BODY_FIELD": "payload"}, "targetFifo": true,
			},
			want: appConfig{stackName: "S3Sqs", nag: true, props: s3sqscdk.Props{
				Ingest: s3sqscdk.IngestProps{Disabled: true, CodeDir: "../dist/s3ingest", MaxPollers: 20},
				Fanout: s3sqscdk.FanoutProps{CodeDir: "../dist/fanout", MemoryMiB: 2048, TargetFIFO: true, MaxRate: 250, TargetMaxBacklog: 5000,
					Environment: map[string]string{"BODY_FIELD": "payload"}},
			}},
		},
		{
			name: "bad values",
			ctx: map[string]any{"encryption": "aes", "maxReceiveCount": "many", "logRetentionDays": "42", "ingestTimeout": "soon", "fanout": "maybe", "fanoutEnv": "NOEQUALS",
				"datasets": "lake", "datasetKeys": "other=arn:aws:kms:eu-west-1:111122223333:key/other", "report": "sometimes", "batchOperations": "yes",
				"fanoutMinPollers": "few", "ingestMaxPollers": float64(2.5), "maxRate": "fast", "targetMaxBacklog": float64(1.5)},
			wantErr: []string{"encryption", "maxReceiveCount", "logRetentionDays", "ingestTimeout", "fanout:", "fanoutEnv", "datasetKeys", "report:", "batchOperations:",
				"context fanoutMinPollers: few is not a whole number", "context ingestMaxPollers: 2.5 is not a whole number",
				"context maxRate: fast is not a whole number", "context targetMaxBacklog: 1.5 is not a whole number"},
		},
		{
			name:    "fanout without a dataset",
			ctx:     map[string]any{},
			wantErr: []string{"context datasets: fanout is enabled but can read no dataset", "-c datasets=BUCKET[/PREFIX],...", "-c datasets=none", "-c fanout=false"},
		},
		{
			name:    "fanout with an empty datasets list",
			ctx:     map[string]any{"datasets": " , "},
			wantErr: []string{"context datasets: fanout is enabled but can read no dataset"},
		},
		{
			name: "misspelled keys",
			ctx: map[string]any{"datasets": "none", "maxrate": "500", "fanoutMemoryMib": "512", "madeUpSetting": "1",
				// The CDK's own keys pass: feature flags, lookups, acknowledgements.
				"@aws-cdk/aws-lambda:recognizeLayerVersion": true, "availability-zones:account=1:region=us-east-1": []any{"a"},
				"acknowledged-issue-numbers": []any{1}},
			wantErr: []string{"context maxrate: not a key this app reads; did you mean maxRate?", "context fanoutMemoryMib: not a key this app reads; did you mean fanoutMemoryMiB?",
				"context madeUpSetting: not a key this app reads (README.md lists them)"},
		},
		{
			name: "fanout off needs no dataset",
			ctx:  map[string]any{"fanout": "false"},
			want: appConfig{stackName: "S3Sqs", nag: true, props: s3sqscdk.Props{
				Ingest: s3sqscdk.IngestProps{CodeDir: "../dist/s3ingest"},
				Fanout: s3sqscdk.FanoutProps{Disabled: true, CodeDir: "../dist/fanout"},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			catch(t, func() {
				got, err := configFromContext(newApp(t, tc.ctx).Node())
				if tc.wantErr != nil {
					checkNames(t, err, tc.wantErr)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(appConfig{}), cmpopts.EquateEmpty()); d != "" {
					t.Errorf("config (-want +got):\n%s", d)
				}
			})
		})
	}
}

// TestStack synthesizes the app's stack as `cdk synth` does (cdk-nag
// included) and checks its outputs and that cdk-nag reports nothing.
func TestStack(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ctx         map[string]any
		wantOutputs []string
	}{
		{"defaults", map[string]any{"datasets": "none"}, []string{
			"SourceBucketName", "TopicArn", "IngestQueueUrl", "IngestDLQUrl", "OutputQueueUrl", "OutputQueueArn", "OutputDLQUrl",
			"S3IngestFunctionName", "FanoutFunctionName", "FanoutRoleArn", "WorkQueueUrl", "WorkDLQUrl", "FailureQueueUrl",
			"TargetQueueUrl", "TargetQueueArn", "TargetDLQUrl", "ClaimsTableName", "OperatorPolicyArn",
		}},
		{"fanout only, KMS, existing target, alarm topic, report", map[string]any{
			"ingest": "false", "encryption": "kms", "targetQueueArn": "arn:aws:sqs:eu-west-1:444455556666:orders",
			"alarmTopicArn": "arn:aws:sns:eu-west-1:111122223333:ops", "datasets": "lake/exports/", "report": "true",
			"batchOperations": "true", "batchManifestBucketName": "lake", "batchReportPrefix": "jobs/done/",
		}, []string{
			"FanoutFunctionName", "FanoutRoleArn", "WorkQueueUrl", "WorkDLQUrl", "FailureQueueUrl", "TargetQueueUrl", "TargetQueueArn", "QueueKeyArn",
			"ReportS3Uri", "BatchOperationsRoleArn", "ClaimsTableName", "OperatorPolicyArn",
		}},
		{"fanout only, no claims table, paced", map[string]any{
			"ingest": "false", "claims": "false", "datasets": "lake/exports/", "maxRate": "500", "targetMaxBacklog": "100000",
		}, []string{
			"FanoutFunctionName", "FanoutRoleArn", "WorkQueueUrl", "WorkDLQUrl", "FailureQueueUrl", "TargetQueueUrl", "TargetQueueArn", "TargetDLQUrl",
			"OperatorPolicyArn",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := codeDirs(t)
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			ctx[s3sqscdk.FeatureFlagRestrictSqsDecryption] = true
			catch(t, func() {
				app, stack := newTestStack(t, ctx)
				addNag(app)
				ann := assertions.Annotations_FromStack(stack)
				anyMsg := assertions.Match_StringLikeRegexp(jsii.String(".*"))
				for _, m := range *ann.FindError(jsii.String("*"), anyMsg) {
					t.Errorf("error on %s: %v", *m.Id, m.Entry.Data)
				}
				for _, m := range *ann.FindWarning(jsii.String("*"), anyMsg) {
					t.Errorf("warning on %s: %v", *m.Id, m.Entry.Data)
				}
				raw, _ := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
				var tmpl struct {
					Outputs   map[string]any
					Resources map[string]struct{ Type string }
				}
				if err := json.Unmarshal(raw, &tmpl); err != nil {
					t.Fatal(err)
				}
				var got []string
				for k := range tmpl.Outputs {
					got = append(got, k)
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tc.wantOutputs))
				if !slices.Equal(got, want) {
					t.Errorf("outputs:\n got %v\nwant %v", got, want)
				}
				// What the run commands are given: the claims table's name
				// (s3sqs status -claims-table) and the work queue's URL.
				for name, typ := range map[string]string{"ClaimsTableName": "AWS::DynamoDB::Table", "WorkQueueUrl": "AWS::SQS::Queue"} {
					o, ok := tmpl.Outputs[name].(map[string]any)
					if !ok {
						continue
					}
					v, _ := o["Value"].(map[string]any)
					id, _ := v["Ref"].(string)
					if tmpl.Resources[id].Type != typ {
						t.Errorf("output %s = %v, want a Ref to the stack's %s", name, o["Value"], typ)
					}
				}
				if tc.ctx["alarmTopicArn"] != nil {
					for id, r := range tmpl.Resources {
						if r.Type == "AWS::CloudWatch::Alarm" && !strings.Contains(string(raw), `"AlarmActions":["arn:aws:sns:eu-west-1:111122223333:ops"]`) {
							t.Errorf("alarm %s does not notify the alarm topic", id)
						}
					}
				}
			})
		})
	}
}

// TestStackDatasetRead checks that the datasets context gives fanout's role
// s3:GetObject on the dataset's objects, s3:ListBucket and
// s3:ListBucketVersions on its bucket.
func TestStackDatasetRead(t *testing.T) {
	ctx := codeDirs(t)
	ctx["datasets"] = "lake/exports/"
	ctx[s3sqscdk.FeatureFlagRestrictSqsDecryption] = true
	catch(t, func() {
		_, stack := newTestStack(t, ctx)
		raw, _ := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
		var tmpl struct {
			Resources map[string]struct {
				Type       string
				Properties struct {
					PolicyDocument struct{ Statement []map[string]any }
					Roles          []map[string]any
				}
			}
		}
		if err := json.Unmarshal(raw, &tmpl); err != nil {
			t.Fatal(err)
		}
		granted := map[string]bool{}
		for _, r := range tmpl.Resources {
			if r.Type != "AWS::IAM::Policy" || !strings.Contains(fmt.Sprint(r.Properties.Roles), "FanoutRole") {
				continue
			}
			for _, st := range r.Properties.PolicyDocument.Statement {
				if !strings.Contains(fmt.Sprint(st["Resource"]), "s3:::lake") {
					continue
				}
				for _, a := range strings.Fields(strings.Trim(fmt.Sprint(st["Action"]), "[]")) {
					granted[a] = true
				}
			}
		}
		for _, a := range []string{"s3:GetObject", "s3:ListBucket", "s3:ListBucketVersions"} {
			if !granted[a] {
				t.Errorf("fanout's role has no %s on the dataset bucket lake", a)
			}
		}
	})
}

// TestStackPollers follows the poller context keys through the construct
// into the two event source mappings: absent (standard mode), valid
// (provisioned mode, only the counts given), and refused by the construct
// with an error naming the setting.
func TestStackPollers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ctx        map[string]any
		wantIngest any // the ProvisionedPollerConfig; nil: absent
		wantFanout any
		wantErr    []string
	}{
		{name: "absent", ctx: map[string]any{"fanoutMaxConcurrency": "1000"}},
		{
			name:       "both paths, one with both counts",
			ctx:        map[string]any{"fanoutMinPollers": "100", "fanoutMaxPollers": "200", "ingestMaxPollers": "20"},
			wantIngest: map[string]any{"MaximumPollers": 20.0},
			wantFanout: map[string]any{"MinimumPollers": 100.0, "MaximumPollers": 200.0},
		},
		{
			name:    "out of range",
			ctx:     map[string]any{"fanoutMinPollers": "1", "ingestMaxPollers": "2001"},
			wantErr: []string{"Fanout.MinPollers: 1 is not from 2 to 200", "Ingest.MaxPollers: 2001 is not from 2 to 2000"},
		},
		{
			name:    "minimum above maximum",
			ctx:     map[string]any{"fanoutMinPollers": "50", "fanoutMaxPollers": "10"},
			wantErr: []string{"Fanout.MinPollers: 50 is above MaxPollers 10"},
		},
		{
			name:    "with maximum concurrency",
			ctx:     map[string]any{"ingestMaxConcurrency": "10", "ingestMinPollers": "2"},
			wantErr: []string{"Ingest.MaxConcurrency: not with MinPollers or MaxPollers"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := codeDirs(t)
			ctx["datasets"] = "none"
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			catch(t, func() {
				app := newApp(t, ctx)
				cfg, err := configFromContext(app.Node())
				if err != nil {
					t.Fatal(err)
				}
				stack, _, err := newStack(app, cfg, &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("eu-west-1")})
				if tc.wantErr != nil {
					checkNames(t, err, tc.wantErr)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
				var tmpl struct {
					Resources map[string]struct {
						Type       string
						Properties map[string]any
					}
				}
				if err := json.Unmarshal(raw, &tmpl); err != nil {
					t.Fatal(err)
				}
				got := map[string]any{}
				for id, r := range tmpl.Resources {
					if r.Type != "AWS::Lambda::EventSourceMapping" {
						continue
					}
					path := "fanout"
					if strings.Contains(id, "S3Ingest") {
						path = "ingest"
					}
					got[path] = r.Properties["ProvisionedPollerConfig"]
				}
				want := map[string]any{"ingest": tc.wantIngest, "fanout": tc.wantFanout}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("ProvisionedPollerConfig by path (-want +got):\n%s", d)
				}
			})
		})
	}
}

// checkNames fails t unless err is an error that names each of want.
func checkNames(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %v", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}
