package main

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// Context keys the app reads (`cdk deploy -c key=value`, or "context" in
// cdk.json). README.md has the table with the defaults.
const (
	ctxStackName             = "stackName"
	ctxEncryption            = "encryption"
	ctxMaxReceiveCount       = "maxReceiveCount"
	ctxLogRetentionDays      = "logRetentionDays"
	ctxAlarmTopicARN         = "alarmTopicArn"
	ctxNag                   = "nag"
	ctxClaims                = "claims"
	ctxClaimsTTL             = "claimsTtl"
	ctxOffload               = "offload"
	ctxOffloadBucketName     = "offloadBucketName"
	ctxOffloadPrefix         = "offloadPrefix"
	ctxOffloadDays           = "offloadExpirationDays"
	ctxOffloadAlways         = "offloadAlways"
	ctxIngest                = "ingest"
	ctxBucketName            = "bucketName"
	ctxBucketKeyARN          = "bucketKeyArn"
	ctxKeyPrefix             = "keyPrefix"
	ctxKeySuffix             = "keySuffix"
	ctxIngestCodeDir         = "s3ingestCodeDir"
	ctxIngestTimeout         = "ingestTimeout"
	ctxIngestMemory          = "ingestMemoryMiB"
	ctxIngestBatchSize       = "ingestBatchSize"
	ctxIngestBatchingWindow  = "ingestBatchingWindow"
	ctxIngestMaxConcurrency  = "ingestMaxConcurrency"
	ctxIngestMinPollers      = "ingestMinPollers"
	ctxIngestMaxPollers      = "ingestMaxPollers"
	ctxIngestFormat          = "ingestFormat"
	ctxIngestEnv             = "ingestEnv"
	ctxIngestAgeAlarm        = "ingestAgeAlarm"
	ctxFanoutTaskAgeAlarm    = "fanoutTaskAgeAlarm"
	ctxDashboard             = "dashboard"
	ctxTracing               = "tracing"
	ctxTracingLayer          = "tracingCollectorLayerArn"
	ctxOutputFIFO            = "outputFifo"
	ctxHandoffBytes          = "handoffBytes"
	ctxFanout                = "fanout"
	ctxFanoutCodeDir         = "fanoutCodeDir"
	ctxFanoutTimeout         = "fanoutTimeout"
	ctxFanoutMemory          = "fanoutMemoryMiB"
	ctxFanoutBatchSize       = "fanoutBatchSize"
	ctxFanoutBatchingWindow  = "fanoutBatchingWindow"
	ctxFanoutMaxConcurrency  = "fanoutMaxConcurrency"
	ctxFanoutMinPollers      = "fanoutMinPollers"
	ctxFanoutMaxPollers      = "fanoutMaxPollers"
	ctxTargetQueueARN        = "targetQueueArn"
	ctxTargetKeyARN          = "targetKeyArn"
	ctxTargetMaxSize         = "targetMaxMessageSize"
	ctxTargetFIFO            = "targetFifo"
	ctxDatasets              = "datasets"
	ctxDatasetKeys           = "datasetKeys"
	ctxReport                = "report"
	ctxReportBucketName      = "reportBucketName"
	ctxReportPrefix          = "reportPrefix"
	ctxReportDays            = "reportExpirationDays"
	ctxFanoutFormat          = "fanoutFormat"
	ctxFanoutMode            = "fanoutMode"
	ctxNotificationFormat    = "notificationFormat"
	ctxChunkSize             = "chunkSize"
	ctxMaxInFlight           = "maxInFlight"
	ctxFailOnError           = "failOnError"
	ctxMaxRate               = "maxRate"
	ctxTargetMaxBacklog      = "targetMaxBacklog"
	ctxMaxFailures           = "maxFailures"
	ctxMaxFailedObjects      = "maxFailedObjects"
	ctxModifiedAfter         = "modifiedAfter"
	ctxModifiedBefore        = "modifiedBefore"
	ctxMinObjectSize         = "minObjectSize"
	ctxMaxObjectSize         = "maxObjectSize"
	ctxStorageClasses        = "storageClasses"
	ctxKeyRegex              = "keyRegex"
	ctxReconcileEveryMinutes = "reconcileEveryMinutes"
	ctxFanoutEnv             = "fanoutEnv"
	ctxBatchOperations       = "batchOperations"
	ctxBatchManifestBucket   = "batchManifestBucketName"
	ctxBatchManifestPrefix   = "batchManifestPrefix"
	ctxBatchReportBucket     = "batchReportBucketName"
	ctxBatchReportPrefix     = "batchReportPrefix"
	ctxCSVDelimiter          = "csvDelimiter"
	ctxCSVQuote              = "csvQuote"
	ctxCSVEscape             = "csvEscape"
	ctxCSVHeader             = "csvHeader"
	ctxCSVNoQuotedNewlines   = "csvNoQuotedNewlines"
	ctxParquetBinaryAsString = "parquetBinaryAsString"
)

// datasetsNone, as the value of the datasets context, deploys fanout
// with read access to no dataset, on purpose.
const datasetsNone = "none"

// Defaults of the app that differ from the construct's: the code
// directories are relative to infra/, where cdk runs.
const (
	defaultStackName     = "S3Sqs"
	defaultIngestCodeDir = "../dist/s3ingest"
	defaultFanoutCodeDir = "../dist/fanout"
)

// appConfig is what the app reads from the context.
type appConfig struct {
	stackName     string
	alarmTopicARN string
	nag           bool
	props         s3sqscdk.Props
}

// configFromContext reads the context of node into the stack's settings,
// reporting every bad value at once.
func configFromContext(node constructs.Node) (appConfig, error) {
	r := ctxReader{node: node}
	c := appConfig{
		stackName:     r.str(ctxStackName, defaultStackName),
		alarmTopicARN: r.str(ctxAlarmTopicARN, ""),
		nag:           r.boolean(ctxNag, true),
	}
	p := &c.props
	switch e := r.str(ctxEncryption, "sqs"); e {
	case "sqs", "sse-sqs":
		p.Encryption = s3sqscdk.EncryptionSQSManaged
	case "kms":
		p.Encryption = s3sqscdk.EncryptionKMS
	default:
		r.bad(ctxEncryption, "%q is not sqs or kms", e)
	}
	p.MaxReceiveCount = r.integer(ctxMaxReceiveCount)
	p.DisableClaims = !r.boolean(ctxClaims, true)
	p.ClaimsTTL = r.str(ctxClaimsTTL, "")
	p.Read = s3sqscdk.ReadProps{
		CSVDelimiter:          r.str(ctxCSVDelimiter, ""),
		CSVQuote:              r.str(ctxCSVQuote, ""),
		CSVEscape:             r.str(ctxCSVEscape, ""),
		CSVNoHeader:           !r.boolean(ctxCSVHeader, true),
		CSVNoQuotedNewlines:   r.boolean(ctxCSVNoQuotedNewlines, false),
		ParquetBinaryAsString: r.boolean(ctxParquetBinaryAsString, false),
	}
	p.DisableDashboard = !r.boolean(ctxDashboard, true)
	p.Tracing = s3sqscdk.TracingProps{Enabled: r.boolean(ctxTracing, false), CollectorLayerARN: r.str(ctxTracingLayer, "")}
	p.Offload = s3sqscdk.OffloadProps{
		Enabled:            r.boolean(ctxOffload, false),
		ExistingBucketName: r.str(ctxOffloadBucketName, ""),
		Prefix:             r.str(ctxOffloadPrefix, ""),
		ExpirationDays:     r.integer(ctxOffloadDays),
		Always:             r.boolean(ctxOffloadAlways, false),
	}
	if days := r.integer(ctxLogRetentionDays); days != 0 {
		ret, ok := retentionDays[days]
		if !ok {
			r.bad(ctxLogRetentionDays, "%d is not a retention CloudWatch Logs offers (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, ..., 3653)", days)
		}
		p.LogRetention = ret
	}

	in := &p.Ingest
	in.Disabled = !r.boolean(ctxIngest, true)
	in.ExistingBucketName = r.str(ctxBucketName, "")
	in.ExistingBucketKeyARN = r.str(ctxBucketKeyARN, "")
	in.KeyPrefix = r.str(ctxKeyPrefix, "")
	in.KeySuffix = r.str(ctxKeySuffix, "")
	in.CodeDir = r.str(ctxIngestCodeDir, defaultIngestCodeDir)
	in.Timeout = r.duration(ctxIngestTimeout)
	in.MemoryMiB = r.integer(ctxIngestMemory)
	in.BatchSize = r.integer(ctxIngestBatchSize)
	in.MaxBatchingWindow = r.duration(ctxIngestBatchingWindow)
	in.MaxConcurrency = r.integer(ctxIngestMaxConcurrency)
	in.MinPollers = r.integer(ctxIngestMinPollers)
	in.MaxPollers = r.integer(ctxIngestMaxPollers)
	in.Format = r.str(ctxIngestFormat, "")
	in.Environment = r.env(ctxIngestEnv)
	in.OldestMessageAlarm = r.duration(ctxIngestAgeAlarm)
	in.OutputFIFO = r.boolean(ctxOutputFIFO, false)
	in.HandoffBytes = r.str(ctxHandoffBytes, "")

	fo := &p.Fanout
	fo.Disabled = !r.boolean(ctxFanout, true)
	fo.CodeDir = r.str(ctxFanoutCodeDir, defaultFanoutCodeDir)
	fo.Timeout = r.duration(ctxFanoutTimeout)
	fo.OldestTaskAlarm = r.duration(ctxFanoutTaskAgeAlarm)
	fo.MemoryMiB = r.integer(ctxFanoutMemory)
	fo.BatchSize = r.integer(ctxFanoutBatchSize)
	fo.MaxBatchingWindow = r.duration(ctxFanoutBatchingWindow)
	fo.MaxConcurrency = r.integer(ctxFanoutMaxConcurrency)
	fo.MinPollers = r.integer(ctxFanoutMinPollers)
	fo.MaxPollers = r.integer(ctxFanoutMaxPollers)
	fo.TargetQueueARN = r.str(ctxTargetQueueARN, "")
	fo.TargetKeyARN = r.str(ctxTargetKeyARN, "")
	fo.TargetMaxMessageSize = r.integer(ctxTargetMaxSize)
	fo.TargetFIFO = r.boolean(ctxTargetFIFO, false)
	datasets := r.str(ctxDatasets, "")
	if datasets != datasetsNone {
		fo.Datasets = parseDatasets(datasets)
	}
	// Without a dataset, fanout's role can read no object and every request
	// of the deployed function fails with AccessDenied: refuse it here, where
	// the user can still fix it, unless it is asked for.
	if !fo.Disabled && datasets != datasetsNone && len(fo.Datasets) == 0 {
		r.bad(ctxDatasets, "fanout is enabled but can read no dataset: name the buckets it reads with "+
			"-c datasets=BUCKET[/PREFIX],... (for example -c datasets=my-lake/exports/), "+
			"or pass -c datasets=%s to deploy it reading none, or -c fanout=false to leave it out", datasetsNone)
	}
	r.datasetKeys(fo.Datasets, ctxDatasetKeys)
	fo.Report = s3sqscdk.ReportProps{
		Enabled:            r.boolean(ctxReport, false),
		ExistingBucketName: r.str(ctxReportBucketName, ""),
		Prefix:             r.str(ctxReportPrefix, ""),
		ExpirationDays:     r.integer(ctxReportDays),
	}
	fo.Format = r.str(ctxFanoutFormat, "")
	fo.Mode = r.str(ctxFanoutMode, "")
	fo.NotificationFormat = r.str(ctxNotificationFormat, "")
	fo.ChunkSize = r.str(ctxChunkSize, "")
	fo.MaxInFlight = r.integer(ctxMaxInFlight)
	fo.FailOnError = r.boolean(ctxFailOnError, false)
	fo.MaxRate = r.integer(ctxMaxRate)
	fo.TargetMaxBacklog = r.integer(ctxTargetMaxBacklog)
	fo.MaxFailures = r.str(ctxMaxFailures, "")
	fo.MaxFailedObjects = r.str(ctxMaxFailedObjects, "")
	fo.Filters = s3sqscdk.FilterProps{
		ModifiedAfter: r.str(ctxModifiedAfter, ""), ModifiedBefore: r.str(ctxModifiedBefore, ""),
		MinObjectSize: r.str(ctxMinObjectSize, ""), MaxObjectSize: r.str(ctxMaxObjectSize, ""),
		StorageClasses: r.str(ctxStorageClasses, ""), KeyRegex: r.str(ctxKeyRegex, ""),
	}
	fo.ReconcileEveryMinutes = r.integer(ctxReconcileEveryMinutes)
	fo.Environment = r.env(ctxFanoutEnv)
	fo.BatchOperations = s3sqscdk.BatchOperationsProps{
		Enabled:            r.boolean(ctxBatchOperations, false),
		ManifestBucketName: r.str(ctxBatchManifestBucket, ""),
		ManifestPrefix:     r.str(ctxBatchManifestPrefix, ""),
		ReportBucketName:   r.str(ctxBatchReportBucket, ""),
		ReportPrefix:       r.str(ctxBatchReportPrefix, ""),
	}
	r.unknown()
	return c, errors.Join(r.errs...)
}

// unknown refuses the context keys in the app's style (camelCase, as
// `-c maxrate=500` for maxRate) that it does not read, naming the nearest
// one it does: ignored, a misspelled key would deploy without the setting.
// The CDK's own keys (feature flags such as @aws-cdk/..., aws:cdk:...,
// lookups in cdk.context.json, acknowledged-issue-numbers) are not in
// that style.
func (r *ctxReader) unknown() {
	all, _ := r.node.GetAllContext(nil).(map[string]any)
	keys := slices.Sorted(maps.Keys(all))
	for _, k := range keys {
		if !appStyle.MatchString(k) || slices.Contains(r.read, k) {
			continue
		}
		best, bestD := "", len(k)/3+1
		for _, known := range r.read {
			if d := levenshtein.ComputeDistance(strings.ToLower(k), strings.ToLower(known)); d < bestD {
				best, bestD = known, d
			}
		}
		if best != "" {
			r.bad(k, "not a key this app reads; did you mean %s?", best)
		} else {
			r.bad(k, "not a key this app reads (README.md lists them)")
		}
	}
}

// appStyle is the shape of the app's context keys.
var appStyle = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

// parseDatasets reads "bucket[/prefix],..." into datasets, one per bucket,
// in the order first seen.
func parseDatasets(s string) []s3sqscdk.Dataset {
	var out []s3sqscdk.Dataset
	index := map[string]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(item, "s3://"), "/")
		i, ok := index[bucket]
		if !ok {
			i = len(out)
			index[bucket] = i
			out = append(out, s3sqscdk.Dataset{Bucket: bucket})
		}
		if prefix != "" {
			out[i].Prefixes = append(out[i].Prefixes, prefix)
		}
	}
	return out
}

// datasetKeys reads "bucket=keyArn,..." (or an object in cdk.json) into the
// KeyARN of the datasets of those buckets: the buckets that use SSE-KMS.
func (r *ctxReader) datasetKeys(datasets []s3sqscdk.Dataset, key string) {
	keys := r.env(key)
	for bucket, arn := range keys {
		i := slices.IndexFunc(datasets, func(d s3sqscdk.Dataset) bool { return d.Bucket == bucket })
		if i < 0 {
			r.bad(key, "bucket %q is not one of the datasets", bucket)
			continue
		}
		datasets[i].KeyARN = arn
	}
}

// retentionDays maps days to the retentions CloudWatch Logs offers.
var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// ctxReader reads typed context values, collecting problems. A value may
// come as a string (`-c key=value`) or as JSON (cdk.json).
type ctxReader struct {
	node constructs.Node
	errs []error
	// read is every key the app reads, for unknown.
	read []string
}

func (r *ctxReader) bad(key, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("context %s: %s", key, fmt.Sprintf(format, args...)))
}

func (r *ctxReader) get(key string) (any, bool) {
	r.read = append(r.read, key)
	v := r.node.TryGetContext(jsii.String(key))
	return v, v != nil
}

func (r *ctxReader) str(key, def string) string {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	if s, ok := v.(string); ok {
		return strings.TrimSpace(s)
	}
	return fmt.Sprint(v)
}

func (r *ctxReader) integer(key string) int {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case float64:
		if x == float64(int(x)) {
			return int(x)
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n
		}
	}
	r.bad(key, "%v is not a whole number", v)
	return 0
}

func (r *ctxReader) boolean(key string, def bool) bool {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case bool:
		return x
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b
		}
	}
	r.bad(key, "%v is not true or false", v)
	return def
}

// duration reads a Go duration ("90s", "5m") or a number of seconds.
func (r *ctxReader) duration(key string) time.Duration {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case float64:
		return time.Duration(x * float64(time.Second))
	case string:
		x = strings.TrimSpace(x)
		if n, err := strconv.Atoi(x); err == nil {
			return time.Duration(n) * time.Second
		}
		if d, err := time.ParseDuration(x); err == nil {
			return d
		}
	}
	r.bad(key, "%v is not a duration such as 90s or 5m, or a number of seconds", v)
	return 0
}

// env reads variables as a JSON object (cdk.json) or "K=V,K=V".
func (r *ctxReader) env(key string) map[string]string {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	out := map[string]string{}
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			out[k] = fmt.Sprint(val)
		}
	case string:
		for kv := range strings.SplitSeq(x, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				r.bad(key, "%q is not NAME=value", kv)
				continue
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	default:
		r.bad(key, "%v is not an object or NAME=value,NAME=value", v)
	}
	return out
}
