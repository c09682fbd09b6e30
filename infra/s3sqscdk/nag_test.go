package s3sqscdk_test

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// withNag adds the cdk-nag packs the stack must pass.
func withNag(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewServerlessChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// suppression is one finding cdk-nag reported and a suppression covered.
type suppression struct {
	Rule, Resource string
}

// TestNag applies cdk-nag's AwsSolutionsChecks and ServerlessChecks: no
// error and no warning may remain, and the suppressed findings must be
// exactly the expected ones, each with its reason.
func TestNag(t *testing.T) {
	// The suppressions every deployment has, by rule and construct id.
	common := []suppression{
		{"AwsSolutions-SQS3", "FailureQueue"},
		{"Serverless-SQSRedrivePolicy", "FailureQueue"},
		{"Serverless-SQSRedrivePolicy", "IngestDLQ"},
		{"Serverless-SQSRedrivePolicy", "OutputDLQ"},
		{"Serverless-SQSRedrivePolicy", "WorkDLQ"},
		{"Serverless-LambdaDLQ", "S3Ingest"},
		{"Serverless-LambdaEventSourceMappingDestination", "S3Ingest/SqsEventSource:TestS3SQSIngestQueue61080465"},
		{"Serverless-LambdaEventSourceMappingDestination", "Fanout/SqsEventSource:TestS3SQSWorkQueueCD89A3A1"},
		{"AwsSolutions-IAM5", "S3IngestReadObjects"},
		{"AwsSolutions-DDB3", "ClaimsTable"},
	}
	// Without tracing, its finding is suppressed with a reason; with it,
	// the roles' X-Ray statements on "*" are.
	untraced := []suppression{{"Serverless-LambdaTracing", "S3Ingest"}, {"Serverless-LambdaTracing", "Fanout"}}
	for _, tc := range []struct {
		name  string
		props s3sqscdk.Props
		extra []suppression
	}{
		{"default", s3sqscdk.Props{}, append(untraced,
			suppression{"Serverless-SQSRedrivePolicy", "TargetDLQ"},
		)},
		{"tracing", s3sqscdk.Props{Tracing: s3sqscdk.TracingProps{Enabled: true, CollectorLayerARN: "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"}}, []suppression{
			{"Serverless-SQSRedrivePolicy", "TargetDLQ"},
			{"AwsSolutions-IAM5", "S3IngestRole"},
			{"AwsSolutions-IAM5", "FanoutRole"},
		}},
		{"offload", s3sqscdk.Props{Offload: s3sqscdk.OffloadProps{Enabled: true}}, []suppression{
			untraced[0], untraced[1],
			{"Serverless-SQSRedrivePolicy", "TargetDLQ"},
			{"AwsSolutions-S1", "OffloadBucket"},
			{"AwsSolutions-IAM5", "S3IngestRoleOffload"},
			{"AwsSolutions-IAM5", "FanoutRoleOffload"},
		}},
		{"report", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{Report: s3sqscdk.ReportProps{Enabled: true}}}, []suppression{
			untraced[0], untraced[1],
			{"Serverless-SQSRedrivePolicy", "TargetDLQ"},
			{"AwsSolutions-S1", "ReportBucket"},
			{"AwsSolutions-IAM5", "FanoutRoleReport"},
		}},
		{"batch operations", s3sqscdk.Props{Fanout: s3sqscdk.FanoutProps{BatchOperations: s3sqscdk.BatchOperationsProps{Enabled: true, ManifestBucketName: "inventory"}}}, []suppression{
			untraced[0], untraced[1],
			{"Serverless-SQSRedrivePolicy", "TargetDLQ"},
			{"AwsSolutions-IAM5", "BatchOperationsInvoke"},
			{"AwsSolutions-IAM5", "BatchOperationsManifest"},
			{"AwsSolutions-IAM5", "BatchOperationsReport"},
		}},
		{"existing bucket and target, KMS, datasets", existing(), []suppression{
			untraced[0], untraced[1],
			{"AwsSolutions-IAM4", "Test/BucketNotificationsHandler050a0587b7544547bf325f094a3db834/Role"},
			{"AwsSolutions-IAM5", "FanoutReadObjects"},
			{"AwsSolutions-IAM5", "OperatorPolicy"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := build(t, tc.props, withNag)
			catch(t, func() {
				ann := assertions.Annotations_FromStack(f.stack)
				any := assertions.Match_StringLikeRegexp(jsii.String(".*"))
				for _, m := range *ann.FindError(jsii.String("*"), any) {
					t.Errorf("cdk-nag error on %s: %v", *m.Id, m.Entry.Data)
				}
				for _, m := range *ann.FindWarning(jsii.String("*"), any) {
					t.Errorf("cdk-nag warning on %s: %v", *m.Id, m.Entry.Data)
				}
			})

			got := map[suppression]string{}
			for _, pack := range []string{"AwsSolutions", "Serverless"} {
				for _, row := range nagReport(t, f, pack) {
					if row.compliance != "Suppressed" {
						continue
					}
					res := strings.TrimPrefix(row.resource, "Test/S3SQS/")
					res = strings.TrimSuffix(strings.TrimSuffix(res, "/Resource"), "/DefaultPolicy")
					s := suppression{row.rule, res}
					got[s] = row.reason
					if len(row.reason) < 40 {
						t.Errorf("%s on %s is suppressed with a reason too short to explain it: %q", row.rule, row.resource, row.reason)
					}
				}
			}
			want := append(slices.Clone(common), tc.extra...)
			for _, s := range want {
				if _, ok := got[s]; !ok {
					t.Errorf("expected suppression of %s on %s was not used", s.Rule, s.Resource)
				}
			}
			for s, reason := range got {
				if !slices.Contains(want, s) {
					t.Errorf("unexpected suppression of %s on %s: %s", s.Rule, s.Resource, reason)
				}
				t.Logf("suppressed %s on %s: %s", s.Rule, s.Resource, reason)
			}
		})
	}
}

// nagRow is one line of a cdk-nag report.
type nagRow struct {
	rule, resource, compliance, reason string
}

// nagReport synthesizes the app and reads the report of pack for the stack.
func nagReport(t *testing.T, f *fixture, pack string) []nagRow {
	t.Helper()
	var dir string
	catch(t, func() { dir = *f.app.Synth(nil).Directory() })
	files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s-*%s-NagReport.csv", pack, *f.stack.StackName())))
	if len(files) != 1 {
		t.Fatalf("cdk-nag reports of %s in %s: %v, want one", pack, dir, files)
	}
	file := files[0]
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("cdk-nag report: %v", err)
	}
	records, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(records) < 1 {
		t.Fatalf("cdk-nag report %s: %v", file, err)
	}
	var rows []nagRow
	for _, r := range records[1:] { // Rule ID, Resource ID, Compliance, Exception Reason, ...
		rows = append(rows, nagRow{r[0], r[1], r[2], r[3]})
	}
	return rows
}

// TestNagFindsErrors makes sure the check above can fail: a queue without
// TLS enforcement or a DLQ, added next to the construct, is reported.
func TestNagFindsErrors(t *testing.T) {
	f := build(t, s3sqscdk.Props{}, withNag)
	catch(t, func() {
		awssqs.NewQueue(f.stack, jsii.String("Careless"), nil)
		errs := *assertions.Annotations_FromStack(f.stack).FindError(jsii.String("/Test/Careless/Resource"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-SQS4|Serverless-SQSRedrivePolicy")))
		if len(errs) < 2 {
			t.Errorf("cdk-nag reported %d errors on a queue without TLS enforcement and DLQ, want 2", len(errs))
		}
	})
}
