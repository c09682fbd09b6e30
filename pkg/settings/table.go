package settings

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The queues and outputs. TargetMaxMessageSize's range is SQS's for a
// queue's MaximumMessageSize.
var (
	TargetQueueURL       = Text{Row{"TARGET_QUEUE_URL", Fanout, "target-queue-url", "targetQueueUrl", "target queue `URL`", ""}, CheckQueueURL}
	TargetQueueName      = Text{Row{"TARGET_QUEUE_NAME", Fanout, "target-queue-name", "", "target queue `name`, resolved with GetQueueUrl", ""}, nil}
	TargetQueueOwner     = Text{Row{"TARGET_QUEUE_OWNER_ACCOUNT_ID", Fanout, "target-queue-owner", "", "`account` that owns the queue named by -target-queue-name", ""}, nil}
	TargetMaxMessageSize = Size{Row{"TARGET_MAX_MESSAGE_SIZE", Fanout, "target-max-message-size", "", "the target's MaximumMessageSize (`size`), to skip GetQueueAttributes", ""},
		1 << 10, 1 << 20, "256KiB", "is outside SQS's range of 1,024 to 1,048,576 bytes (1KiB to 1MiB)"}
	WorkQueueURL       = Text{Row{"WORK_QUEUE_URL", Fanout, "work-queue-url", "", "plan the dataset here and queue its chunk tasks on this `URL` for the deployed function, instead of sending it in-process", ""}, CheckQueueURL}
	OutputQueueURL     = Text{Row{"OUTPUT_QUEUE_URL", S3Ingest, "output-queue-url", "", "the `URL` of the queue the records are sent to (required)", ""}, CheckQueueURL}
	FanoutWorkQueueURL = Text{Row{"FANOUT_WORK_QUEUE_URL", S3Ingest, "", "", "fanout's work queue, where objects over HANDOFF_BYTES go", ""}, CheckQueueURL}
	FailureQueueURL    = Text{Row{"FAILURE_QUEUE_URL", Both, "failure-queue-url", "", "send refused records to this queue `URL`", ""}, CheckQueueURL}
	FailureS3URI       = Text{Row{"FAILURE_S3_URI", Both, "failure-s3-uri", "", "write refused records under `s3://bucket/prefix`", ""}, CheckS3URI}
	ReportS3URI        = Text{Row{"REPORT_S3_URI", Fanout, "report-s3-uri", "", "write the run report (manifest and failed ranges) under `s3://bucket/prefix`", ""}, CheckS3URI}
	OffloadS3URI       = Text{Row{"OFFLOAD_S3_URI", Both, "offload-s3-uri", "", "write records too large for the target under `s3://bucket/prefix` and send SQS Extended Client pointers", ""}, CheckS3URI}
	Offload            = Choice{Row{"OFFLOAD", Both, "offload", "", "`which` records to offload: large (over the queue's limit) or always", "large"},
		map[string]string{"": "", "large": "large", "always": "always"}, "large or always"}
	OffloadKMSKeyID   = Text{Row{"OFFLOAD_KMS_KEY_ID", Both, "offload-kms-key-id", "", "encrypt offloaded records with this KMS `key` (default: the bucket's default encryption)", ""}, nil}
	ClaimsTable       = Text{Row{"CLAIMS_TABLE", Both, "claims-table", "", "the DynamoDB `table` of run-once claims and run state", ""}, checkTableName}
	ReconcileQueueURL = Text{Row{"RECONCILE_QUEUE_URL", Fanout, "", "", "the ingest queue `URL` a reconcile request sends the notifications of missing objects to (the only one it may)", ""}, nil}
	ClaimsTTL         = TTL{Row{"CLAIMS_TTL", Both, "", "", "how long the claims table keeps a claim, and s3ingest's marker of each object version it ingested (7d, 36h); s3sqs reconcile looks no further back", "7d"}}
)

// How records are read and sent.
var (
	Format = Choice{Row{"FORMAT", Both, "format", "format", "`format`: auto, jsonl, csv, text or parquet", "auto"}, map[string]string{
		"": "", "auto": "", "jsonl": "jsonl", "ndjson": "jsonl", "json": "jsonl", "csv": "csv", "tsv": "csv",
		"text": "text", "txt": "text", "lines": "text", "parquet": "parquet",
	}, "auto, jsonl, csv, text or parquet"}
	Mode = Choice{Row{"MODE", Fanout, "mode", "mode", "`mode`: record (a record per message), chunk (many per message) or notification (an S3 notification per object, the object not read)", "record"},
		map[string]string{"": "", "record": "record", "chunk": "chunk", "notification": "notification"}, "record, chunk or notification"}
	NotificationFormat = Choice{Row{"NOTIFICATION_FORMAT", Fanout, "notification-format", "notificationFormat", "the `shape` of notification mode's messages: s3, eventbridge or sns", "s3"},
		map[string]string{"": "", "s3": "s3", "eventbridge": "eventbridge", "sns": "sns"}, "s3, eventbridge or sns"}
	ChunkSize = Size{Row{"CHUNK_SIZE", Both, "chunk-size", "chunkSize", "chunk `size`", "8MiB"},
		1 << 10, 1 << 30, "8MiB", "is not a chunk size from 1KiB to 1GiB"}
	CSVNoQuotedNewlines      = Bool{Row{"CSV_NO_QUOTED_NEWLINES", Both, "csv-no-quoted-newlines", "", "promise that CSV objects can be split at line boundaries", "false"}}
	CSVDelimiter             = Char{Row{"CSV_DELIMITER", Both, "csv-delimiter", "", "the `character` between CSV fields, or tab (default , and tab for .tsv keys)", ""}, false, false}
	CSVQuote                 = Char{Row{"CSV_QUOTE", Both, "csv-quote", "", "the `character` that quotes a CSV field, or none (default \" and none for .tsv keys)", ""}, true, true}
	CSVEscape                = Char{Row{"CSV_ESCAPE", Both, "csv-escape", "", "the `character` that escapes the quote inside a quoted CSV field, such as \\ (default: the quote doubled)", ""}, true, false}
	CSVHeader                = Bool{Row{"CSV_HEADER", Both, "csv-header", "", "the first CSV record names the columns (false: they are c0, c1, ...)", "true"}}
	ParquetBinaryAsString    = Bool{Row{"PARQUET_BINARY_AS_STRING", Both, "parquet-binary-as-string", "", "write Parquet byte arrays without a logical type as text instead of base64, for writers that left text unannotated", "false"}}
	MaxInFlight              = Count{Row{"MAX_IN_FLIGHT", Both, "max-in-flight", "maxInFlight", "the ceiling of SendMessageBatch `requests` in flight to a queue (they size themselves below it)", "256"}, 1, 1000}
	FixedInFlight            = Bool{Row{"FIXED_IN_FLIGHT", Both, "fixed-in-flight", "", "always keep the most requests in flight, instead of sizing them to the queue's latency and throttling", "false"}}
	MaxAttempts              = Count{Row{"MAX_ATTEMPTS", Both, "max-attempts", "maxAttempts", "`attempts` per entry", "5"}, 1, 100}
	MaxRate                  = Count{Row{"MAX_RATE", Fanout, "max-rate", "maxRate", "the run-wide ceiling of `messages` per second sent to the target, across all the run's invocations (needs CLAIMS_TABLE when the run is queued)", ""}, 1, 10_000_000}
	TargetMaxBacklog         = Count{Row{"TARGET_MAX_BACKLOG", Fanout, "target-max-backlog", "targetMaxBacklog", "hold the run's sends while the target's ApproximateNumberOfMessages is above this many `messages`", ""}, 1, 1_000_000_000}
	MaxFailures              = Limit{Row{"MAX_FAILURES", Fanout, "max-failures", "maxFailures", "stop a requested run, its tasks parked for a resume, once more than this many of its records failed: a `count`, a share of the records read such as 10%, or off (default 10%; notifications: off)", ""}}
	MaxFailedObjects         = Limit{Row{"MAX_FAILED_OBJECTS", Fanout, "max-failed-objects", "maxFailedObjects", "stop a requested run, as -max-failures does, once more than this many chunks of its objects could not be read: a `count`, a share of the chunks planned such as 10%, or off (default 10%)", ""}}
	ChunkConcurrency         = Count{Row{"CHUNK_CONCURRENCY", Fanout, "concurrency", "", "`chunks` read at once", "4"}, 1, 64}
	ReadConcurrency          = Count{Row{"READ_CONCURRENCY", S3Ingest, "read-concurrency", "", "`objects` read at once from a standard queue's batch", "8"}, 1, 64}
	InlineMaxBytes           = Size{Row{"INLINE_MAX_BYTES", Fanout, "", "", "the largest dataset sent in the invocation that planned it", "64MiB"}, 1, 1 << 62, "64MiB", "is not a positive size"}
	HandoffBytes             = Size{Row{"HANDOFF_BYTES", S3Ingest, "", "", "objects larger than this go to FANOUT_WORK_QUEUE_URL as chunk tasks", ""}, 1, 1 << 62, "64MiB", "is not a positive size"}
	BodyField                = Text{Row{"BODY_FIELD", Fanout, "body-field", "bodyField", "record `field` sent as the body, the rest of the record left out (default: none, the whole record is the body; the Spark SQS sink's is value)", ""}, nil}
	AttributesField          = Text{Row{"ATTRIBUTES_FIELD", Fanout, "attributes-field", "attributesField", "record `field` of message attributes, an object of strings (default: none; the Spark SQS sink's is msg_attributes)", ""}, nil}
	GroupIDField             = Text{Row{"GROUP_ID_FIELD", Fanout, "group-id-field", "groupIdField", "record `field` of the FIFO group (default: none, the object's group; the Spark SQS sink's is group_id)", ""}, nil}
	DedupIDField             = Text{Row{"DEDUP_ID_FIELD", Fanout, "dedup-id-field", "dedupIdField", "record `field` of the FIFO deduplication id", ""}, nil}
	GroupIDPartition         = Text{Row{"GROUP_ID_PARTITION", Both, "group-id-partition", "groupIdPartition", "Hive partition `column` of the key (tenant in tenant=acme/) whose value is the message group of the object's records: a tenant on a standard queue, an order per value on a FIFO one", ""}, nil}
	ReplaceInvalidCharacters = Bool{Row{"REPLACE_INVALID_CHARACTERS", S3Ingest, "replace-invalid-characters", "", "replace the characters SQS rejects with U+FFFD, for records refused with InvalidCharacters", "false"}}
	PartitionColumns         = Choice{Row{"PARTITION_COLUMNS", S3Ingest, "partitions", "", "add the key's partition values: true, typed or false", "true"},
		map[string]string{"true": "string", "false": "", "typed": "typed"}, "true, false or typed"}
	FileMetadata = Bool{Row{"FILE_METADATA", S3Ingest, "file-metadata", "", "add the _file object", "true"}}
	OnBadRecord  = Choice{Row{"ON_BAD_RECORD", S3Ingest, "", "", "what a record that cannot be read does: output or fail", "output"},
		map[string]string{"fail": "fail", "output": "output", "skip": "output"}, "output or fail"}
	RunID = Text{Row{"", "", "run-id", "runId", "name the run (default: a new id)", ""}, CheckRunID}
)

// The object filters of a listing: the function's are those of a request that
// gives none of its own.
var (
	ModifiedAfter  = Time{Row{"MODIFIED_AFTER", Fanout, "modified-after", "modifiedAfter", "keep objects last modified at or after this `time` (RFC 3339, or a date: 2024-01-31)", ""}}
	ModifiedBefore = Time{Row{"MODIFIED_BEFORE", Fanout, "modified-before", "modifiedBefore", "keep objects last modified before this `time` (RFC 3339, or a date: 2024-01-31)", ""}}
	MinObjectSize  = Size{Row{"MIN_OBJECT_SIZE", Fanout, "min-size", "minSize", "keep objects of at least this `size`", ""}, 0, 1 << 62, "1MiB", "is not a size of 0 or more"}
	MaxObjectSize  = Size{Row{"MAX_OBJECT_SIZE", Fanout, "max-size", "maxSize", "keep objects of at most this `size` (0: no bound)", ""}, 0, 1 << 62, "1GiB", "is not a size of 0 or more"}
	StorageClasses = List{Row{"STORAGE_CLASSES", Fanout, "storage-classes", "storageClasses", "keep objects in these comma-separated storage `classes`, as S3 names them (STANDARD,INTELLIGENT_TIERING)", ""}}
	KeyRegex       = Text{Row{"KEY_REGEX", Fanout, "key-regex", "keyRegex", "keep keys in which this regular `expression` (RE2 syntax) finds a match; anchor it with ^ and $", ""}, checkRegex}
)

// How the functions consume their queues and start.
var (
	FailOnError      = Bool{Row{"FAIL_ON_ERROR", Both, "", "", "fail the invocation when any record failed", "false"}}
	SkipGroupOnError = Bool{Row{"SKIP_GROUP_ON_ERROR", Both, "", "", "after a failure, report only the later messages of its FIFO group", "false"}}
	DeadlineMargin   = Duration{Row{"DEADLINE_MARGIN", Both, "", "", "how long before the invocation's deadline work stops", ""}}
	Tracing          = Choice{Row{"TRACING", Both, "", "", "where spans go: off, otlp or stdout", "off"},
		map[string]string{"": "off", "off": "off", "otlp": "otlp", "stdout": "stdout"}, "off, otlp or stdout"}
	S3PathStyle = Bool{Row{"S3_FORCE_PATH_STYLE", Both, "s3-path-style", "", "path-style S3 addressing, for S3 stand-ins", "false"}}
)

// The S3 notification filter.
var (
	EventTypes         = Text{Row{"EVENT_TYPES", Both, "event-types", "", "comma-separated S3 event `types` to take", "ObjectCreated:*"}, nil}
	IgnoreDeletions    = Bool{Row{"IGNORE_DELETIONS", S3Ingest, "", "", "drop deletion events", "true"}}
	KeyPrefix          = Text{Row{"KEY_PREFIX", Both, "key-prefix", "", "take only keys with this `prefix`", ""}, nil}
	KeySuffix          = Text{Row{"KEY_SUFFIX", Both, "key-suffix", "", "take only keys with this `suffix`", ""}, nil}
	MaxFileAge         = Age{Row{"MAX_FILE_AGE", Both, "", "", "skip events older than this: 7d, 36h, or off", "off"}}
	DedupByFileName    = Bool{Row{"DEDUP_BY_FILE_NAME", Both, "", "", "two events of a batch with one file name are duplicates", "false"}}
	SortByTime         = Bool{Row{"SORT_BY_TIME", Both, "", "", "process a batch's objects oldest event first", "false"}}
	EventBridgeKeysRaw = Bool{Row{"EVENTBRIDGE_KEYS_RAW", Both, "eventbridge-keys-raw", "", "take EventBridge object keys as written, without URL-decoding (moto writes them so)", "false"}}
)

// Rows returns every row of the table, in the order above.
func Rows() []Row {
	return []Row{
		TargetQueueURL.Row, TargetQueueName.Row, TargetQueueOwner.Row, TargetMaxMessageSize.Row, WorkQueueURL.Row,
		OutputQueueURL.Row, FanoutWorkQueueURL.Row, FailureQueueURL.Row, FailureS3URI.Row, ReportS3URI.Row,
		OffloadS3URI.Row, Offload.Row, OffloadKMSKeyID.Row, ClaimsTable.Row, ClaimsTTL.Row, ReconcileQueueURL.Row,
		Format.Row, Mode.Row, NotificationFormat.Row, ChunkSize.Row, CSVNoQuotedNewlines.Row,
		CSVDelimiter.Row, CSVQuote.Row, CSVEscape.Row, CSVHeader.Row, ParquetBinaryAsString.Row, MaxInFlight.Row, FixedInFlight.Row, MaxAttempts.Row, MaxRate.Row, TargetMaxBacklog.Row, MaxFailures.Row, MaxFailedObjects.Row,
		ChunkConcurrency.Row, ReadConcurrency.Row, InlineMaxBytes.Row, HandoffBytes.Row,
		BodyField.Row, AttributesField.Row, GroupIDField.Row, DedupIDField.Row, GroupIDPartition.Row,
		ReplaceInvalidCharacters.Row, PartitionColumns.Row, FileMetadata.Row, OnBadRecord.Row, RunID.Row,
		ModifiedAfter.Row, ModifiedBefore.Row, MinObjectSize.Row, MaxObjectSize.Row, StorageClasses.Row, KeyRegex.Row,
		FailOnError.Row, SkipGroupOnError.Row, DeadlineMargin.Row, Tracing.Row, S3PathStyle.Row,
		EventTypes.Row, IgnoreDeletions.Row, KeyPrefix.Row, KeySuffix.Row, MaxFileAge.Row,
		DedupByFileName.Row, SortByTime.Row, EventBridgeKeysRaw.Row,
	}
}

// CheckS3URI reports a value that is not an s3://bucket/prefix URI.
func CheckS3URI(s string) error {
	rest, ok := strings.CutPrefix(s, "s3://")
	if bucket, _, _ := strings.Cut(rest, "/"); !ok || bucket == "" {
		return fmt.Errorf("%q is not an s3://bucket/prefix URI", s)
	}
	return nil
}

func checkRegex(s string) error {
	_, err := regexp.Compile(s)
	return err
}

// tableName is what DynamoDB accepts as a table name.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

func checkTableName(s string) error {
	if !tableName.MatchString(s) {
		return fmt.Errorf("%q is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)", s)
	}
	return nil
}

// TTL is how long something is kept: a number of days ("7d") or a Go
// duration ("36h").
type TTL struct{ Row }

// Parse reads a positive time as Age does, without Age's "off".
func (t TTL) Parse(s string) (time.Duration, error) {
	d, err := Age{t.Row}.Parse(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a time to keep such as 7d or 36h", s)
	}
	return d, nil
}

// Age is how old an event may be: a number of days ("7d"), a Go duration
// ("36h", "90m"), or "0", "off" or "none" to turn the check off, which
// Parse returns as -1.
type Age struct{ Row }

// Parse reads an age. Unset, the check is off as well: no notification is
// skipped for its age unless asked, since a DLQ redriven late holds old ones.
func (a Age) Parse(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "0", "off", "none":
		return -1, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 100000 {
			return 0, fmt.Errorf("%q is not a whole number of days such as 7d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not an age such as 7d or 36h, or off", s)
	}
	if d == 0 {
		return -1, nil
	}
	return d, nil
}
