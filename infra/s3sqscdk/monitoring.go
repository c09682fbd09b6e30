package s3sqscdk

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// metricNamespace is where both functions write their EMF metrics, with
// the dimensions Function (fanout or s3ingest) and FunctionName.
const metricNamespace = "s3sqs"

// fiveMinutes is the period of every alarm and graph.
var fiveMinutes = awscdk.Duration_Minutes(jsii.Number(5))

// monitored is one function and what it is called in the EMF metrics.
type monitored struct {
	fn   awslambda.Function
	kind string // "s3ingest" or "fanout", the Function dimension
}

func (s *S3SQS) functions() []monitored {
	var out []monitored
	if s.IngestFunction != nil {
		out = append(out, monitored{s.IngestFunction, "s3ingest"})
	}
	if s.FanoutFunction != nil {
		out = append(out, monitored{s.FanoutFunction, "fanout"})
	}
	return out
}

// emfMetric is one of a function's EMF metrics, summed over five minutes.
func emfMetric(m monitored, name string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(metricNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{"Function": jsii.String(m.kind), "FunctionName": m.fn.FunctionName()},
		Statistic:     jsii.String("Sum"),
		Period:        fiveMinutes,
	})
}

// labelled is an EMF metric named for a graph (an alarm on a labelled
// metric would become metric math).
func labelled(m monitored, name string) awscloudwatch.IMetric {
	return emfMetric(m, name).With(&awscloudwatch.MetricOptions{Label: jsii.String(m.kind + " " + name)})
}

// buildMonitoring adds, for each function, alarms on its errors and
// throttles and on the records it failed or could not read (its EMF
// metrics), an alarm on the age of the oldest chunk task, and the
// dashboard.
func (s *S3SQS) buildMonitoring() {
	for _, m := range s.functions() {
		id := *m.fn.Node().Id()
		s.alarm(id+"ErrorsAlarm", m.fn.MetricErrors(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("Sum")}), 1,
			fmt.Sprintf("s3sqs: %s failed invocations (a handler error, a crash or a timeout: its whole batch comes back)", m.kind))
		s.alarm(id+"ThrottlesAlarm", m.fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("Sum")}), 1,
			fmt.Sprintf("s3sqs: %s was throttled (account or reserved concurrency)", m.kind))
		s.alarm(id+"RecordsFailedAlarm", emfMetric(m, "RecordsFailed"), 1,
			fmt.Sprintf("s3sqs: %s put records on the failure output (refused by SQS, unreadable, or not offloaded)", m.kind))
		s.alarm(id+"BadRecordsAlarm", emfMetric(m, "BadRecords"), 1,
			fmt.Sprintf("s3sqs: %s met records it could not read or map", m.kind))
	}
	if s.WorkQueue != nil {
		limit := s.p.Fanout.OldestTaskAlarm
		s.alarm("WorkQueueAgeAlarm", s.WorkQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
			Period: fiveMinutes, Statistic: jsii.String("Maximum"),
		}), limit.Seconds(), "s3sqs: the oldest chunk task in "+*s.WorkQueue.Node().Path()+" waits longer than "+limit.String())
	}
	if !s.p.DisableDashboard {
		s.buildDashboard()
	}
}

// buildDashboard shows records in and out, requests and retries, failures,
// duration and queue depths of both functions.
func (s *S3SQS) buildDashboard() {
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	var records, requests, failures, duration []awscloudwatch.IMetric
	for _, m := range s.functions() {
		records = append(records, labelled(m, "RecordsRead"), labelled(m, "RecordsSent"), labelled(m, "RecordsOffloaded"))
		requests = append(requests, labelled(m, "Requests"), labelled(m, "Retries"))
		failures = append(failures, labelled(m, "RecordsFailed"), labelled(m, "BadRecords"), labelled(m, "FailedMessages"),
			m.fn.MetricErrors(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("Sum"), Label: jsii.String(m.kind + " Errors")}),
			m.fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("Sum"), Label: jsii.String(m.kind + " Throttles")}))
		duration = append(duration,
			m.fn.MetricDuration(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("p50"), Label: jsii.String(m.kind + " p50")}),
			m.fn.MetricDuration(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("p99"), Label: jsii.String(m.kind + " p99")}))
	}
	var depths, ages []awscloudwatch.IMetric
	for _, q := range []struct {
		name  string
		queue awssqs.IQueue
	}{
		{"ingest", s.IngestQueue}, {"output", s.OutputQueue}, {"work", s.WorkQueue}, {"target", s.TargetQueue},
		{"failure", s.FailureQueue}, {"ingest DLQ", s.IngestDLQ}, {"output DLQ", s.OutputDLQ}, {"work DLQ", s.WorkDLQ}, {"target DLQ", s.TargetDLQ},
	} {
		if isNil(q.queue) {
			continue
		}
		depths = append(depths, q.queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: fiveMinutes, Statistic: jsii.String("Maximum"), Label: jsii.String(q.name)}))
		if q.name == "ingest" || q.name == "work" {
			ages = append(ages, q.queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
				Period: fiveMinutes, Statistic: jsii.String("Maximum"), Label: jsii.String(q.name + " oldest (s)")}))
		}
	}
	s.Dashboard = awscloudwatch.NewDashboard(s.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets: &[]*[]awscloudwatch.IWidget{
			{graph("Records read, sent, offloaded", records...), graph("SendMessageBatch requests and retries", requests...)},
			{graph("Failures", failures...), graph("Duration (ms)", duration...)},
			{graph("Messages visible", depths...), graph("Oldest message (s)", ages...)},
		},
	})
}

// isNil reports whether q is unset: a nil interface, or one holding a nil
// *Queue, as the fields of a disabled path are.
func isNil(q awssqs.IQueue) bool {
	if q == nil {
		return true
	}
	if c, ok := q.(awssqs.Queue); ok {
		return c == nil
	}
	return false
}
