package s3sqscdk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
)

// Defaults of [Props]. A zero field means its default.
const (
	DefaultMaxReceiveCount       = 5
	DefaultLogRetention          = awslogs.RetentionDays_ONE_MONTH
	DefaultIngestCodeDir         = "dist/s3ingest"
	DefaultFanoutCodeDir         = "dist/fanout"
	DefaultIngestTimeout         = 2 * time.Minute
	DefaultFanoutTimeout         = 5 * time.Minute
	DefaultIngestMemoryMiB       = 512
	DefaultFanoutMemoryMiB       = 1024
	DefaultIngestBatchSize       = 10
	DefaultFanoutBatchSize       = 2
	DefaultOldestMessageAlarm    = 30 * time.Minute
	DefaultOldestTaskAlarm       = 30 * time.Minute
	DefaultAccessLogsExpiration  = 90
	DefaultNoncurrentVersionDays = 30
	// DefaultNewTargetMaxMessageSize is the MaximumMessageSize of a target
	// queue the construct creates: 1 MiB, the SQS maximum since 2025.
	DefaultNewTargetMaxMessageSize = 1 << 20
	// DefaultExistingTargetMaxMessageSize is what fanout assumes of an
	// existing target queue: 256 KiB, the limit of queues created before
	// 2025. Set FanoutProps.TargetMaxMessageSize to the queue's value.
	DefaultExistingTargetMaxMessageSize = 256 << 10
)

// Encryption says how the queues are encrypted at rest.
type Encryption string

const (
	// EncryptionSQSManaged (the default) encrypts the queues with SSE-SQS.
	// The topic still uses a KMS key: SNS has no other encryption at rest.
	EncryptionSQSManaged Encryption = ""
	// EncryptionKMS encrypts the queues with a customer managed KMS key
	// (Props.EncryptionKey, or a new one with rotation).
	EncryptionKMS Encryption = "kms"
)

// Props configures [New]. Every field is optional; zero means the default
// named in its comment.
type Props struct {
	// Encryption of the queues: SSE-SQS by default, or EncryptionKMS.
	Encryption Encryption
	// EncryptionKey, when set, encrypts the topic and, with EncryptionKMS,
	// the queues. Default: new keys with yearly rotation, one for the topic
	// (its policy lets S3 publish for the source bucket) and, with
	// EncryptionKMS, one for the queues (its policy lets SNS deliver for this
	// topic only; one key for both would be a dependency cycle). An imported
	// key's policy is not changed here: it must already let
	// s3.amazonaws.com and sns.amazonaws.com use kms:GenerateDataKey and
	// kms:Decrypt.
	EncryptionKey awskms.IKey
	// MaxReceiveCount is how many times a message is received before it
	// moves to its dead-letter queue. Default 5; at least 5.
	MaxReceiveCount int
	// LogRetention of the functions' log groups. Default one month.
	LogRetention awslogs.RetentionDays
	// DisableDashboard leaves out the CloudWatch dashboard (each dashboard
	// beyond an account's first three costs a few dollars a month).
	DisableDashboard bool
	// DisableClaims leaves out the claims table (see ClaimsTable on
	// [S3SQS]): both functions then run each task and notification at
	// least once, and a message delivered twice sends its records twice;
	// fanout's runs share no state (no run status or control, and
	// FanoutProps.MaxRate holds per invocation). Default: the table is
	// created.
	DisableClaims bool
	// ClaimsTTL sets CLAIMS_TTL on both functions: how long the claims
	// table keeps a claim, and s3ingest's marker of each object version it
	// ingested, as a number of days ("7d") or a Go duration ("36h"). It
	// is also how far back a reconcile looks by default (fanout's
	// CLAIMS_TTL), so both functions get the same value. Needs the claims
	// table. Default unset (7d).
	ClaimsTTL string
	// AlarmActions run when an alarm fires or clears (for example an
	// awscloudwatchactions.SnsAction). Default none: the alarms exist and
	// show in the console.
	AlarmActions []awscloudwatch.IAlarmAction
	// Read says how both functions read objects.
	Read ReadProps

	Ingest IngestProps
	Fanout FanoutProps
	// Offload configures the bucket of records too large for their queue.
	Offload OffloadProps
	// Tracing configures AWS X-Ray tracing of both functions. Default off.
	Tracing TracingProps
}

// ReconcileIntervals are the intervals, in minutes, that
// FanoutProps.ReconcileEveryMinutes may be (the template's AllowedValues).
var ReconcileIntervals = []int{15, 30, 60, 180, 360, 720, 1440}

// ReadProps says how both functions read objects: the CSV dialect and
// header, and how Parquet bytes are written (docs/formats.md). The zero
// value leaves the variables unset, to the functions' defaults.
type ReadProps struct {
	// CSVDelimiter, CSVQuote and CSVEscape set CSV_DELIMITER (one
	// character, or "tab"), CSV_QUOTE (one ASCII character, or "none")
	// and CSV_ESCAPE (one ASCII character).
	CSVDelimiter, CSVQuote, CSVEscape string
	// CSVNoHeader sets CSV_HEADER=false: the columns are c0, c1, ...
	CSVNoHeader bool
	// CSVNoQuotedNewlines sets CSV_NO_QUOTED_NEWLINES=true.
	CSVNoQuotedNewlines bool
	// ParquetBinaryAsString sets PARQUET_BINARY_AS_STRING=true.
	ParquetBinaryAsString bool
}

// env adds the variables of r to own.
func (r ReadProps) env(own map[string]string) {
	own["CSV_DELIMITER"] = r.CSVDelimiter
	own["CSV_QUOTE"] = r.CSVQuote
	own["CSV_ESCAPE"] = r.CSVEscape
	for name, on := range map[string]bool{"CSV_NO_QUOTED_NEWLINES": r.CSVNoQuotedNewlines, "PARQUET_BINARY_AS_STRING": r.ParquetBinaryAsString} {
		if on {
			own[name] = "true"
		}
	}
	if r.CSVNoHeader {
		own["CSV_HEADER"] = "false"
	}
}

// check reports the characters the functions would refuse at init.
func (r ReadProps) check(bad func(string, ...any)) {
	one := func(field, v string, ascii, none bool) {
		n := utf8.RuneCountInString(v)
		switch {
		case v == "" || v == "tab" && field == "CSVDelimiter" || v == "none" && none:
		case n != 1 || v == "\r" || v == "\n" || ascii && v[0] >= utf8.RuneSelf:
			bad("Read.%s: %q is not one %scharacter", field, v, map[bool]string{true: "ASCII ", false: ""}[ascii])
		}
	}
	one("CSVDelimiter", r.CSVDelimiter, false, false)
	one("CSVQuote", r.CSVQuote, true, true)
	one("CSVEscape", r.CSVEscape, true, false)
}

// IngestProps configures the ingest path: source bucket → SNS topic →
// ingest queue → s3ingest → output queue.
type IngestProps struct {
	// Disabled leaves the ingest path out.
	Disabled bool
	// ExistingBucketName is an existing bucket in the stack's account and
	// region to take notifications from. Default: a new bucket (versioned,
	// SSE-S3, TLS only, public access blocked, server access logs).
	ExistingBucketName string
	// ExistingBucketKeyARN is the KMS key of an existing SSE-KMS bucket;
	// s3ingest gets kms:Decrypt on it. Default none.
	ExistingBucketKeyARN string
	// KeyPrefix and KeySuffix filter the notifications; KeyPrefix also
	// scopes s3ingest's read access. Default: every object.
	KeyPrefix, KeySuffix string
	// CodeDir is the directory holding s3ingest's built `bootstrap`
	// (`make build`). Default "dist/s3ingest", relative to the working
	// directory.
	CodeDir string
	// Timeout of s3ingest. Default 2 minutes. The ingest queue's visibility
	// timeout is 6x this plus MaxBatchingWindow.
	Timeout time.Duration
	// MemoryMiB of s3ingest. Default 512.
	MemoryMiB int
	// BatchSize of the SQS event source, 1 to 10000. Default 10.
	BatchSize int
	// MaxBatchingWindow of the SQS event source, up to 5 minutes; needed
	// for BatchSize above 10. Default none.
	MaxBatchingWindow time.Duration
	// MaxConcurrency of the SQS event source, 2 to 1000. Default no limit
	// beyond the account's. Not with MinPollers or MaxPollers.
	MaxConcurrency int
	// MinPollers and MaxPollers put the SQS event source in provisioned
	// mode; see [FanoutProps.MinPollers]. Default zero: standard mode.
	MinPollers, MaxPollers int
	// OutputFIFO makes the output queue (and its DLQ) FIFO. Default false.
	OutputFIFO bool
	// Format sets s3ingest's FORMAT. Default unset (by extension).
	Format string
	// HandoffBytes sets HANDOFF_BYTES: objects larger than this go to
	// fanout's work queue as chunk tasks, and fanout gets read access to the
	// source bucket. Needs the fanout path. Default unset (off).
	HandoffBytes string
	// Environment holds more s3ingest variables (see its README table),
	// for example PARTITION_COLUMNS or MAX_IN_FLIGHT. The variables the
	// construct sets cannot be overridden here.
	Environment map[string]string
	// OldestMessageAlarm is the age of the oldest ingest message that
	// raises the alarm. Default 30 minutes.
	OldestMessageAlarm time.Duration
	// AccessLogsBucket receives a new source bucket's server access logs.
	// Default: a new bucket, whose logs expire after
	// AccessLogsExpirationDays.
	AccessLogsBucket awss3.IBucket
	// AccessLogsExpirationDays of a new access logs bucket. Default 90.
	AccessLogsExpirationDays int
	// NoncurrentVersionDays after which a new source bucket deletes
	// noncurrent object versions. Default 30.
	NoncurrentVersionDays int
}

// TracingProps configures tracing. Off by default, at no cost.
type TracingProps struct {
	// Enabled turns on X-Ray active tracing of both functions: Lambda's
	// own segments (invocation, init), and xray:PutTraceSegments and
	// xray:PutTelemetryRecords on the roles (X-Ray has no resource-level
	// permissions).
	Enabled bool
	// CollectorLayerARN, with Enabled, is the AWS Distro for OpenTelemetry
	// collector layer (arm64) of the stack's region: the functions then
	// also send their own spans to it (TRACING=otlp), a span per
	// invocation, per chunk task and per AWS call (SendMessageBatch,
	// GetObject, ...), which it forwards to X-Ray.
	CollectorLayerARN string
}

// Defaults of [OffloadProps].
const (
	DefaultOffloadPrefix         = "offload/"
	DefaultOffloadExpirationDays = 14
)

// OffloadProps configures offload: both functions send a record too large
// for its queue as an SQS Extended Client pointer to an object in this
// bucket (OFFLOAD_S3_URI). It is off by default: consumers must read
// pointers (with an Extended Client, or pkg/sqsextended).
type OffloadProps struct {
	// Enabled turns offload on.
	Enabled bool
	// ExistingBucketName is a bucket to write to instead of a new one; its
	// lifecycle and encryption are the owner's.
	ExistingBucketName string
	// Prefix of the objects. Default DefaultOffloadPrefix. Only
	// A-Z a-z 0-9 . / _ - (the Extended Client's rule).
	Prefix string
	// ExpirationDays after which a new bucket's lifecycle rule deletes a
	// payload, which its message must have been read by then. Default
	// DefaultOffloadExpirationDays (SQS keeps a message 14 days at most).
	ExpirationDays int
	// Always offloads every record (OFFLOAD=always), not only those over
	// the limit.
	Always bool
}

// Defaults of [ReportProps].
const (
	DefaultReportPrefix         = "reports/"
	DefaultReportExpirationDays = 90
)

// ReportProps configures fanout's run report: with REPORT_S3_URI, each run
// writes <prefix><runId>/manifest.json, and each task with failed records
// <prefix><runId>/failed/<taskId>.json, the tasks to send again.
// fanout gets s3:PutObject under the prefix only.
type ReportProps struct {
	// Enabled turns the run report on.
	Enabled bool
	// ExistingBucketName is a bucket to write to instead of a new one; its
	// lifecycle and encryption are the owner's.
	ExistingBucketName string
	// Prefix of the reports. Default DefaultReportPrefix. It ends with "/"
	// (fanout writes <prefix><runId>/...), does not start with one, and
	// holds no wildcard.
	Prefix string
	// ExpirationDays after which a new bucket's lifecycle rule deletes a
	// report. Default DefaultReportExpirationDays.
	ExpirationDays int
}

// Defaults of [BatchOperationsProps].
const (
	DefaultBatchManifestPrefix = "batch-manifests/"
	DefaultBatchReportPrefix   = "batch-reports/"
)

// BatchOperationsProps configures the role of S3 Batch Operations jobs
// that invoke fanout ("Invoke AWS Lambda function"): trusted by
// batchoperations.s3.amazonaws.com, it may invoke fanout (and its versions
// and aliases), read manifests under ManifestPrefix and write completion
// reports under ReportPrefix. fanout reads the objects a job names with
// its own role: they must be among FanoutProps.Datasets.
type BatchOperationsProps struct {
	// Enabled creates the role ([S3SQS].BatchOperationsRole).
	Enabled bool
	// ManifestBucketName holds the jobs' manifests. Required.
	ManifestBucketName string
	// ManifestPrefix of the manifests. Default DefaultBatchManifestPrefix.
	ManifestPrefix string
	// ReportBucketName receives the completion reports. Default
	// ManifestBucketName.
	ReportBucketName string
	// ReportPrefix of the completion reports. Default
	// DefaultBatchReportPrefix.
	ReportPrefix string
}

// FanoutProps configures the fanout path: the fanout function, its work
// queue (with DLQ), its failure queue and the target queue.
type FanoutProps struct {
	// Disabled leaves the fanout path out.
	Disabled bool
	// CodeDir is the directory holding fanout's built `bootstrap`. Default
	// "dist/fanout", relative to the working directory.
	CodeDir string
	// Timeout of fanout. Default 5 minutes. The work queue's visibility
	// timeout is 6x this plus MaxBatchingWindow.
	Timeout time.Duration
	// MemoryMiB of fanout. Default 1024.
	MemoryMiB int
	// BatchSize of the work queue's event source. Default 2 (fanout runs
	// two tasks of a batch at once).
	BatchSize int
	// MaxBatchingWindow of the work queue's event source, up to 5
	// minutes; needed for BatchSize above 10. Default none.
	MaxBatchingWindow time.Duration
	// MaxConcurrency of the work queue's event source, 2 to 1000. Default
	// no limit beyond the account's. Not with MinPollers or MaxPollers.
	MaxConcurrency int
	// MinPollers and MaxPollers put the work queue's event source in
	// provisioned mode (ProvisionedPollerConfig): Lambda keeps at least
	// MinPollers event pollers (2 to 200) ready and scales up to MaxPollers
	// (2 to 2000), each poller carrying up to 10 concurrent invocations.
	// Setting one alone leaves the other at AWS's default (2 and 200).
	// AWS allows either this or MaxConcurrency: in provisioned mode
	// MaxPollers bounds the concurrency. Pollers are billed (event poller
	// units, the minimum all the time). Default zero: standard mode.
	MinPollers, MaxPollers int
	// OldestTaskAlarm is the age of the oldest chunk task on the work queue
	// that raises an alarm. Default DefaultOldestTaskAlarm.
	OldestTaskAlarm time.Duration
	// TargetQueueARN is an existing target queue, in any account of the
	// stack's region (its queue policy must let fanout's role send).
	// Default: a new queue with its own DLQ.
	TargetQueueARN string
	// TargetKeyARN is the KMS key of an existing target queue; fanout gets
	// kms:GenerateDataKey and kms:Decrypt on it. Default none.
	TargetKeyARN string
	// TargetMaxMessageSize is the target queue's MaximumMessageSize, passed
	// to fanout as TARGET_MAX_MESSAGE_SIZE, so that fanout need not read
	// it (an existing target's policy may allow only sending). Default 1
	// MiB for a new queue (which is created with it), 256 KiB for an
	// existing one.
	TargetMaxMessageSize int
	// TargetFIFO makes a new target queue FIFO. Default false.
	TargetFIFO bool
	// Report configures the run report fanout writes to S3
	// (REPORT_S3_URI). Default off.
	Report ReportProps
	// BatchOperations creates the role of S3 Batch Operations jobs that
	// invoke fanout. Default off.
	BatchOperations BatchOperationsProps
	// Datasets fanout may read. With HandoffBytes, the source bucket is
	// added. Default none.
	Datasets []Dataset
	// Format, Mode and ChunkSize set FORMAT, MODE and CHUNK_SIZE; zero
	// values leave them unset (fanout's defaults: by extension, record,
	// 8MiB). Mode is record, chunk or notification (an S3 event
	// notification per object, the object not read).
	Format, Mode, ChunkSize string
	// NotificationFormat sets NOTIFICATION_FORMAT, the shape of
	// notification mode's messages: s3, eventbridge or sns. Only with Mode
	// "notification". Default unset (s3).
	NotificationFormat string
	// MaxInFlight sets MAX_IN_FLIGHT, the ceiling of the requests in flight. Default unset (256).
	MaxInFlight int
	// FailOnError sets FAIL_ON_ERROR=true. Default false.
	FailOnError bool
	// MaxRate sets MAX_RATE, the run-wide ceiling of messages per second
	// sent to the target, 1 to 10,000,000: a budget the run's invocations
	// share in the claims table. With DisableClaims each invocation keeps
	// to it on its own, so that N invocations at once may send N times it.
	// Default unset: no ceiling.
	MaxRate int
	// TargetMaxBacklog sets TARGET_MAX_BACKLOG, 1 to 1,000,000,000: while
	// the target's ApproximateNumberOfMessages is above it, the run's
	// tasks hold their sends and go back on the work queue with a delay,
	// without counting toward the work DLQ. Default unset: no backlog
	// limit.
	TargetMaxBacklog int
	// MaxFailures sets MAX_FAILURES, the failure budget of the runs that
	// requests start: a count of failed records ("1000"), a share of the
	// records read ("10%") or "off". Default unset (10%).
	MaxFailures string
	// MaxFailedObjects sets MAX_FAILED_OBJECTS, the same for chunks of
	// objects that cannot be read. Default unset (10%).
	MaxFailedObjects string
	// Filters sets the object filters of the requests that give none of
	// their own. Default unset: every object is kept.
	Filters FilterProps
	// ReconcileEveryMinutes, one of ReconcileIntervals, runs a reconcile
	// of the source bucket (under Ingest.KeyPrefix) that often, from an
	// EventBridge Scheduler schedule: fanout compares the object versions
	// with s3ingest's markers in the claims table and sends the
	// notifications of the missing ones to the ingest queue. Needs the
	// ingest path and the claims table. Default 0: no schedule.
	ReconcileEveryMinutes int
	// Environment holds more fanout variables (see its README table). The
	// variables the construct sets cannot be overridden here.
	Environment map[string]string
}

// Dataset is an S3 location fanout may read: s3:GetObject and
// s3:GetObjectVersion on the prefixes' objects, s3:ListBucket and
// s3:ListBucketVersions limited to the prefixes.
type Dataset struct {
	// Bucket name.
	Bucket string
	// Prefixes readable; none means the whole bucket.
	Prefixes []string
	// KeyARN is the bucket's KMS key, if it uses SSE-KMS (kms:Decrypt).
	KeyARN string
}

// resolved is Props with every default applied.
type resolved struct {
	Props
}

// resolve applies the defaults and checks the props, returning every
// problem at once.
func resolve(p *Props) (resolved, error) {
	r := resolved{}
	if p != nil {
		r.Props = *p
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	r.Read.check(bad)

	switch r.Encryption {
	case EncryptionSQSManaged, EncryptionKMS:
	default:
		bad("Encryption: %q is not \"\" (SSE-SQS) or %q", r.Encryption, EncryptionKMS)
	}
	if r.MaxReceiveCount == 0 {
		r.MaxReceiveCount = DefaultMaxReceiveCount
	}
	if r.MaxReceiveCount < 5 || r.MaxReceiveCount > 1000 {
		bad("MaxReceiveCount: %d is not from 5 to 1000", r.MaxReceiveCount)
	}
	if r.LogRetention == "" {
		r.LogRetention = DefaultLogRetention
	}
	if r.Ingest.Disabled && r.Fanout.Disabled {
		bad("Ingest.Disabled and Fanout.Disabled: nothing left to build")
	}
	if r.ClaimsTTL != "" {
		if r.DisableClaims {
			bad("ClaimsTTL: needs the claims table (DisableClaims is set)")
		}
		if !validTTL(r.ClaimsTTL) {
			bad("ClaimsTTL: %q is not a time to keep such as 7d or 36h (whole days from 1d, or a positive Go duration)", r.ClaimsTTL)
		}
	}

	in := &r.Ingest
	if !in.Disabled {
		if in.CodeDir == "" {
			in.CodeDir = DefaultIngestCodeDir
		}
		checkCodeDir("Ingest.CodeDir", in.CodeDir, bad)
		if in.Timeout == 0 {
			in.Timeout = DefaultIngestTimeout
		}
		checkTimeout("Ingest", in.Timeout, in.MaxBatchingWindow, bad)
		if in.MemoryMiB == 0 {
			in.MemoryMiB = DefaultIngestMemoryMiB
		}
		checkMemory("Ingest.MemoryMiB", in.MemoryMiB, bad)
		if in.BatchSize == 0 {
			in.BatchSize = DefaultIngestBatchSize
		}
		checkEventSource("Ingest", in.eventSource(), bad)
		if in.OldestMessageAlarm == 0 {
			in.OldestMessageAlarm = DefaultOldestMessageAlarm
		}
		if in.OldestMessageAlarm < time.Minute {
			bad("Ingest.OldestMessageAlarm: %v is under a minute", in.OldestMessageAlarm)
		}
		if in.AccessLogsExpirationDays == 0 {
			in.AccessLogsExpirationDays = DefaultAccessLogsExpiration
		}
		if in.NoncurrentVersionDays == 0 {
			in.NoncurrentVersionDays = DefaultNoncurrentVersionDays
		}
		if in.AccessLogsExpirationDays < 1 || in.NoncurrentVersionDays < 1 {
			bad("Ingest.AccessLogsExpirationDays and NoncurrentVersionDays must be positive")
		}
		if in.ExistingBucketName == "" && (in.ExistingBucketKeyARN != "") {
			bad("Ingest.ExistingBucketKeyARN: needs ExistingBucketName")
		}
		if in.ExistingBucketName != "" && in.AccessLogsBucket != nil {
			bad("Ingest.AccessLogsBucket: only for a new bucket, not ExistingBucketName")
		}
		if in.ExistingBucketKeyARN != "" {
			checkARN("Ingest.ExistingBucketKeyARN", in.ExistingBucketKeyARN, "kms", bad)
		}
		if strings.ContainsAny(in.KeyPrefix+in.KeySuffix, "*?") {
			bad("Ingest.KeyPrefix, KeySuffix: wildcards are not allowed")
		}
		if in.HandoffBytes != "" && r.Fanout.Disabled {
			bad("Ingest.HandoffBytes: needs the fanout path")
		}
		checkEnv("Ingest.Environment", in.Environment, ingestReservedEnv, bad)
	}

	fo := &r.Fanout
	if fo.Disabled && fo.ReconcileEveryMinutes != 0 {
		bad("Fanout.ReconcileEveryMinutes needs the fanout path, which runs the reconcile")
	}
	if !fo.Disabled {
		if fo.CodeDir == "" {
			fo.CodeDir = DefaultFanoutCodeDir
		}
		checkCodeDir("Fanout.CodeDir", fo.CodeDir, bad)
		if fo.Timeout == 0 {
			fo.Timeout = DefaultFanoutTimeout
		}
		checkTimeout("Fanout", fo.Timeout, fo.MaxBatchingWindow, bad)
		if fo.MemoryMiB == 0 {
			fo.MemoryMiB = DefaultFanoutMemoryMiB
		}
		checkMemory("Fanout.MemoryMiB", fo.MemoryMiB, bad)
		if fo.BatchSize == 0 {
			fo.BatchSize = DefaultFanoutBatchSize
		}
		checkEventSource("Fanout", fo.eventSource(), bad)
		if fo.TargetMaxMessageSize == 0 {
			fo.TargetMaxMessageSize = DefaultNewTargetMaxMessageSize
			if fo.TargetQueueARN != "" {
				fo.TargetMaxMessageSize = DefaultExistingTargetMaxMessageSize
			}
		}
		if fo.TargetMaxMessageSize < 1024 || fo.TargetMaxMessageSize > 1<<20 {
			bad("Fanout.TargetMaxMessageSize: %d is not from 1024 to 1048576", fo.TargetMaxMessageSize)
		}
		if fo.TargetQueueARN != "" {
			checkARN("Fanout.TargetQueueARN", fo.TargetQueueARN, "sqs", bad)
			if fo.TargetFIFO {
				bad("Fanout.TargetFIFO: only for a new target queue (an existing queue's name says whether it is FIFO)")
			}
		} else if fo.TargetKeyARN != "" {
			bad("Fanout.TargetKeyARN: needs TargetQueueARN")
		}
		if fo.TargetKeyARN != "" {
			checkARN("Fanout.TargetKeyARN", fo.TargetKeyARN, "kms", bad)
		}
		for i, d := range fo.Datasets {
			if d.Bucket == "" {
				bad("Fanout.Datasets[%d].Bucket: %q is not a bucket name", i, d.Bucket)
			} else {
				checkBucket(fmt.Sprintf("Fanout.Datasets[%d].Bucket", i), d.Bucket, bad)
			}
			for _, pre := range d.Prefixes {
				if pre == "" || strings.ContainsAny(pre, "*?") {
					bad("Fanout.Datasets[%d].Prefixes: %q is empty or has a wildcard", i, pre)
				}
			}
			if d.KeyARN != "" {
				checkARN(fmt.Sprintf("Fanout.Datasets[%d].KeyARN", i), d.KeyARN, "kms", bad)
			}
		}
		if fo.OldestTaskAlarm == 0 {
			fo.OldestTaskAlarm = DefaultOldestTaskAlarm
		}
		if fo.OldestTaskAlarm < time.Minute {
			bad("Fanout.OldestTaskAlarm: %v is under a minute", fo.OldestTaskAlarm)
		}
		if rp := &fo.Report; rp.Enabled {
			if rp.Prefix == "" {
				rp.Prefix = DefaultReportPrefix
			}
			checkPrefix("Fanout.Report.Prefix", rp.Prefix, bad)
			rp.ExpirationDays = checkDays("Fanout.Report.ExpirationDays", rp.ExpirationDays, DefaultReportExpirationDays, bad)
			checkBucket("Fanout.Report.ExistingBucketName", rp.ExistingBucketName, bad)
		}
		if bo := &fo.BatchOperations; bo.Enabled {
			if bo.ManifestBucketName == "" {
				bad("Fanout.BatchOperations.ManifestBucketName: required (the bucket of the jobs' manifests)")
			}
			if bo.ReportBucketName == "" {
				bo.ReportBucketName = bo.ManifestBucketName
			}
			if bo.ManifestPrefix == "" {
				bo.ManifestPrefix = DefaultBatchManifestPrefix
			}
			if bo.ReportPrefix == "" {
				bo.ReportPrefix = DefaultBatchReportPrefix
			}
			checkBucket("Fanout.BatchOperations.ManifestBucketName", bo.ManifestBucketName, bad)
			checkBucket("Fanout.BatchOperations.ReportBucketName", bo.ReportBucketName, bad)
			checkPrefix("Fanout.BatchOperations.ManifestPrefix", bo.ManifestPrefix, bad)
			checkPrefix("Fanout.BatchOperations.ReportPrefix", bo.ReportPrefix, bad)
		} else if bo.ManifestBucketName != "" || bo.ReportBucketName != "" || bo.ManifestPrefix != "" || bo.ReportPrefix != "" {
			bad("Fanout.BatchOperations: buckets and prefixes need Enabled")
		}
		if fo.MaxInFlight < 0 || fo.MaxInFlight > 1000 {
			bad("Fanout.MaxInFlight: %d is not from 1 to 1000", fo.MaxInFlight)
		}
		if m := fo.ReconcileEveryMinutes; m != 0 {
			switch {
			case !slices.Contains(ReconcileIntervals, m):
				bad("Fanout.ReconcileEveryMinutes: %d is not one of %v", m, ReconcileIntervals)
			case r.Ingest.Disabled || r.DisableClaims:
				bad("Fanout.ReconcileEveryMinutes needs the ingest path and the claims table")
			}
		}
		if fo.MaxRate < 0 || fo.MaxRate > 10_000_000 {
			bad("Fanout.MaxRate: %d is not from 1 to 10000000", fo.MaxRate)
		}
		if fo.TargetMaxBacklog < 0 || fo.TargetMaxBacklog > 1_000_000_000 {
			bad("Fanout.TargetMaxBacklog: %d is not from 1 to 1000000000", fo.TargetMaxBacklog)
		}
		for name, v := range map[string]string{"MaxFailures": fo.MaxFailures, "MaxFailedObjects": fo.MaxFailedObjects} {
			if v != "" && !failureLimit.MatchString(v) {
				bad("Fanout.%s: %q is not a count, a share such as 10%%, or off", name, v)
			}
		}
		for _, err := range fo.Filters.check() {
			bad("Fanout.Filters.%v", err)
		}
		switch fo.Mode {
		case "", "record", "chunk", "notification":
		default:
			bad("Fanout.Mode: %q is not record, chunk or notification", fo.Mode)
		}
		switch fo.NotificationFormat {
		case "", "s3", "eventbridge", "sns":
		default:
			bad("Fanout.NotificationFormat: %q is not s3, eventbridge or sns", fo.NotificationFormat)
		}
		if fo.NotificationFormat != "" && fo.Mode != "notification" {
			bad("Fanout.NotificationFormat: %q needs Mode \"notification\" (Mode is %q); it shapes notification mode's messages only", fo.NotificationFormat, fo.Mode)
		}
		checkEnv("Fanout.Environment", fo.Environment, fanoutReservedEnv, bad)
	}
	if r.Tracing.CollectorLayerARN != "" && !r.Tracing.Enabled {
		bad("Tracing.CollectorLayerARN: needs Tracing.Enabled")
	}
	if a := r.Tracing.CollectorLayerARN; a != "" && !strings.HasPrefix(a, "arn:") {
		bad("Tracing.CollectorLayerARN: %q is not a layer version ARN", a)
	}
	if off := &r.Offload; off.Enabled {
		if off.Prefix == "" {
			off.Prefix = DefaultOffloadPrefix
		}
		if !offloadPrefix.MatchString(off.Prefix) {
			bad("Offload.Prefix: %q may hold only A-Z a-z 0-9 . / _ - (the SQS Extended Client's rule)", off.Prefix)
		}
		off.ExpirationDays = checkDays("Offload.ExpirationDays", off.ExpirationDays, DefaultOffloadExpirationDays, bad)
	}
	return r, errors.Join(errs...)
}

// The variables the construct sets, which Environment may not override.
var (
	ingestReservedEnv = []string{"OUTPUT_QUEUE_URL", "FORMAT", "KEY_PREFIX", "KEY_SUFFIX", "HANDOFF_BYTES", "FANOUT_WORK_QUEUE_URL", "CLAIMS_TABLE", "CLAIMS_TTL", "OFFLOAD_S3_URI", "OFFLOAD", "TRACING"}
	fanoutReservedEnv = []string{"TARGET_QUEUE_URL", "TARGET_QUEUE_NAME", "TARGET_QUEUE_OWNER_ACCOUNT_ID", "TARGET_MAX_MESSAGE_SIZE",
		"WORK_QUEUE_URL", "FAILURE_QUEUE_URL", "FAILURE_S3_URI", "FORMAT", "MODE", "NOTIFICATION_FORMAT", "CHUNK_SIZE", "MAX_IN_FLIGHT", "FAIL_ON_ERROR", "MAX_RATE", "TARGET_MAX_BACKLOG", "CLAIMS_TABLE", "CLAIMS_TTL",
		"OFFLOAD_S3_URI", "OFFLOAD", "TRACING", "REPORT_S3_URI", "MAX_FAILURES", "MAX_FAILED_OBJECTS",
		"MODIFIED_AFTER", "MODIFIED_BEFORE", "MIN_OBJECT_SIZE", "MAX_OBJECT_SIZE", "STORAGE_CLASSES", "KEY_REGEX"}
	offloadPrefix = regexp.MustCompile(`^[A-Za-z0-9./_-]{1,895}$`)
	reportPrefix  = regexp.MustCompile(`^[^/*?][^*?]*/$`)
	// failureLimit is MAX_FAILURES' form, as template.yaml's pattern:
	// the function checks the share's range.
	failureLimit = regexp.MustCompile(`^(off|[0-9]{1,18}|[0-9]{1,3}(\.[0-9]{1,6})?%)$`)
	// objectSize and storageClasses are the forms of MIN_OBJECT_SIZE and
	// STORAGE_CLASSES, as template.yaml's patterns: the function checks
	// each class's name.
	objectSize     = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB)?$`)
	storageClasses = regexp.MustCompile(`^[A-Z_]+(,[A-Z_]+)*$`)
)

// FilterProps are fanout's object filters (docs/backfills.md, "Object
// filters"), those of the requests that give none of their own. The zero
// value keeps every object.
type FilterProps struct {
	// ModifiedAfter and ModifiedBefore set MODIFIED_AFTER and
	// MODIFIED_BEFORE: RFC 3339 times ("2024-01-31T12:00:00Z") or dates
	// ("2024-01-31").
	ModifiedAfter, ModifiedBefore string
	// MinObjectSize and MaxObjectSize set MIN_OBJECT_SIZE and
	// MAX_OBJECT_SIZE, such as 1MiB.
	MinObjectSize, MaxObjectSize string
	// StorageClasses sets STORAGE_CLASSES: S3's names, comma-separated
	// ("STANDARD,INTELLIGENT_TIERING").
	StorageClasses string
	// KeyRegex sets KEY_REGEX, a regular expression in RE2 syntax.
	KeyRegex string
}

// env returns the variables f sets.
func (f FilterProps) env() map[string]string {
	env := map[string]string{}
	for name, v := range map[string]string{"MODIFIED_AFTER": f.ModifiedAfter, "MODIFIED_BEFORE": f.ModifiedBefore, "MIN_OBJECT_SIZE": f.MinObjectSize,
		"MAX_OBJECT_SIZE": f.MaxObjectSize, "STORAGE_CLASSES": f.StorageClasses, "KEY_REGEX": f.KeyRegex} {
		if v != "" {
			env[name] = v
		}
	}
	return env
}

// check returns what the function would refuse of f at init, each error
// starting with the field's name.
func (f FilterProps) check() []error {
	var errs []error
	for name, v := range map[string]string{"ModifiedAfter": f.ModifiedAfter, "ModifiedBefore": f.ModifiedBefore} {
		if _, err := time.Parse(time.RFC3339, v); v != "" && err != nil {
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not an RFC 3339 time or a date such as 2024-01-31", name, v))
			}
		}
	}
	for name, v := range map[string]string{"MinObjectSize": f.MinObjectSize, "MaxObjectSize": f.MaxObjectSize} {
		if v != "" && !objectSize.MatchString(v) {
			errs = append(errs, fmt.Errorf("%s: %q is not a size such as 1MiB", name, v))
		}
	}
	if v := f.StorageClasses; v != "" && !storageClasses.MatchString(v) {
		errs = append(errs, fmt.Errorf("StorageClasses: %q is not a list of storage classes such as STANDARD,GLACIER_IR", v))
	}
	if _, err := regexp.Compile(f.KeyRegex); err != nil {
		errs = append(errs, fmt.Errorf("KeyRegex: %w", err))
	}
	return errs
}

// validTTL reports whether s is a CLAIMS_TTL the functions accept (their
// settings.TTL): a whole number of days from 1d to 100000d, or a positive
// Go duration.
func validTTL(s string) bool {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		return err == nil && days > 0 && days <= 100000
	}
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// checkDays returns days, or def when it is zero, and reports a value
// outside 1 to 3650 (what an S3 lifecycle rule takes here).
// checkBucket reports a bucket name (empty: none given) that holds a
// character no bucket name has, such as an ARN's or a URI's.
func checkBucket(field, name string, bad func(string, ...any)) {
	if strings.ContainsAny(name, "/*?:") {
		bad("%s: %q is not a bucket name", field, name)
	}
}

// checkPrefix reports a key prefix the construct grants under that does
// not end with /, starts with one, or holds a wildcard.
func checkPrefix(field, prefix string, bad func(string, ...any)) {
	if !reportPrefix.MatchString(prefix) {
		bad("%s: %q must end with /, not start with one, and hold no wildcard", field, prefix)
	}
}

func checkDays(field string, days, def int, bad func(string, ...any)) int {
	if days == 0 {
		days = def
	}
	if days < 1 || days > 3650 {
		bad("%s: %d is not from 1 to 3650", field, days)
	}
	return days
}

func checkCodeDir(field, dir string, bad func(string, ...any)) {
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
		bad("%s: %s has no bootstrap (run `make build` at the repository root): %v", field, dir, err)
	}
}

func checkTimeout(field string, timeout, window time.Duration, bad func(string, ...any)) {
	if timeout < time.Second || timeout > 15*time.Minute || timeout%time.Second != 0 {
		bad("%s.Timeout: %v is not whole seconds from 1s to 15m", field, timeout)
	}
	if window < 0 || window > 5*time.Minute || window%time.Second != 0 {
		bad("%s.MaxBatchingWindow: %v is not whole seconds up to 5m", field, window)
	}
}

func checkMemory(field string, mib int, bad func(string, ...any)) {
	if mib < 128 || mib > 10240 {
		bad("%s: %d is not from 128 to 10240", field, mib)
	}
}

// The ranges of an SQS event source's pollers in provisioned mode. AWS
// has since accepted a MaximumPollers up to 10000 for SQS, but the pinned
// aws-cdk-lib (2.276.0) refuses more than 2000 and the pinned cfn-lint's
// schema allows no more.
const (
	minPollersLow, minPollersHigh = 2, 200
	maxPollersLow, maxPollersHigh = 2, 2000
)

func checkEventSource(field string, es eventSourceOpts, bad func(string, ...any)) {
	if es.batch < 1 || es.batch > 10000 {
		bad("%s.BatchSize: %d is not from 1 to 10000", field, es.batch)
	}
	if es.batch > 10 && es.window == 0 {
		bad("%s.BatchSize: %d needs a MaxBatchingWindow (SQS allows more than 10 only with one)", field, es.batch)
	}
	if es.concurrency != 0 && (es.concurrency < 2 || es.concurrency > 1000) {
		bad("%s.MaxConcurrency: %d is not from 2 to 1000", field, es.concurrency)
	}
	if es.minPollers != 0 && (es.minPollers < minPollersLow || es.minPollers > minPollersHigh) {
		bad("%s.MinPollers: %d is not from %d to %d (MinimumPollers of an SQS event source)", field, es.minPollers, minPollersLow, minPollersHigh)
	}
	if es.maxPollers != 0 && (es.maxPollers < maxPollersLow || es.maxPollers > maxPollersHigh) {
		bad("%s.MaxPollers: %d is not from %d to %d (MaximumPollers of an SQS event source)", field, es.maxPollers, maxPollersLow, maxPollersHigh)
	}
	if es.minPollers > 0 && es.maxPollers > 0 && es.minPollers > es.maxPollers {
		bad("%s.MinPollers: %d is above MaxPollers %d", field, es.minPollers, es.maxPollers)
	}
	if es.concurrency != 0 && es.provisioned() {
		bad("%s.MaxConcurrency: not with MinPollers or MaxPollers (AWS allows one or the other; in provisioned mode MaxPollers bounds the concurrency, 10 invocations a poller)", field)
	}
}

func checkARN(field, arn, service string, bad func(string, ...any)) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != service || parts[3] == "" || parts[4] == "" || parts[5] == "" {
		bad("%s: %q is not an %s ARN (arn:PARTITION:%s:REGION:ACCOUNT:...)", field, arn, service, service)
	}
}

func checkEnv(field string, env map[string]string, reserved []string, bad func(string, ...any)) {
	for _, k := range reserved {
		if _, ok := env[k]; ok {
			bad("%s: %s is set by the construct; use the matching prop", field, k)
		}
	}
}
