package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Environment variables s3ingest reads. README.md has the table with the
// defaults.
const (
	envOutputQueueURL      = "OUTPUT_QUEUE_URL"
	envFormat              = "FORMAT"
	envEventTypes          = "EVENT_TYPES"
	envIgnoreDeletions     = "IGNORE_DELETIONS"
	envKeyPrefix           = "KEY_PREFIX"
	envKeySuffix           = "KEY_SUFFIX"
	envMaxFileAge          = "MAX_FILE_AGE"
	envDedupByFileName     = "DEDUP_BY_FILE_NAME"
	envSortByTime          = "SORT_BY_TIME"
	envEventBridgeKeysRaw  = "EVENTBRIDGE_KEYS_RAW"
	envPartitionColumns    = "PARTITION_COLUMNS"
	envFileMetadata        = "FILE_METADATA"
	envSkipGroupOnError    = "SKIP_GROUP_ON_ERROR"
	envOnBadRecord         = "ON_BAD_RECORD"
	envMaxInFlight         = "MAX_IN_FLIGHT"
	envMaxAttempts         = "MAX_ATTEMPTS"
	envReplaceInvalidChars = "REPLACE_INVALID_CHARACTERS"
	envReadConcurrency     = "READ_CONCURRENCY"
	envHandoffBytes        = "HANDOFF_BYTES"
	envFanoutWorkQueueURL  = "FANOUT_WORK_QUEUE_URL"
	envChunkSize           = "CHUNK_SIZE"
	envCSVNoQuotedNewlines = "CSV_NO_QUOTED_NEWLINES"
	envDeadlineMargin      = "DEADLINE_MARGIN"
	envS3PathStyle         = "S3_FORCE_PATH_STYLE"
)

// DefaultReadConcurrency is how many objects one invocation reads at once
// from a standard queue's batch when READ_CONCURRENCY is not set.
const DefaultReadConcurrency = 4

// partitionMode says whether and how the Hive partition values of a key
// are added to its records (see recordjson.PartitionMode).
type partitionMode = recordjson.PartitionMode

const (
	// partitionsOff adds no partition fields.
	partitionsOff = recordjson.PartitionsOff
	// partitionsString adds each value as a JSON string (null for
	// __HIVE_DEFAULT_PARTITION__).
	partitionsString = recordjson.PartitionsString
	// partitionsTyped adds numbers and booleans as JSON numbers and
	// booleans (s3event.Partition.Typed), everything else as a string.
	partitionsTyped = recordjson.PartitionsTyped
)

// config is s3ingest's configuration, read once at init.
type config struct {
	outputQueueURL string
	// filter selects the objects of a batch (event types, deletions,
	// prefix, suffix, age, duplicates).
	filter s3event.Filter
	// plan sets the format and, for handed-off objects, the chunk size.
	plan             dataset.PlanOptions
	partitions       partitionMode
	fileMetadata     bool
	skipGroupOnError bool
	// skipBadRecords logs a record that cannot be read and goes on,
	// instead of failing its message.
	skipBadRecords  bool
	send            sqsbatch.Options
	readConcurrency int
	// handoffBytes, when above zero, is the object size above which an
	// object goes to fanoutWorkQueueURL as chunk tasks.
	handoffBytes       int64
	fanoutWorkQueueURL string
	// deadlineMargin is how long before the deadline work stops; zero
	// means the automatic margin (see deadlineMargin in handler.go).
	deadlineMargin time.Duration
	s3PathStyle    bool
}

// loadConfig reads the configuration with getenv and reports every problem
// at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	flag := func(name string, def bool) bool {
		v := get(name)
		if v == "" {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(name, "%q is not true or false", v)
			return def
		}
		return b
	}
	count := func(name string, lo, hi int) int {
		v := get(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			bad(name, "%q is not a whole number from %d to %d", v, lo, hi)
			return 0
		}
		return n
	}
	size := func(name string) int64 {
		v := get(name)
		if v == "" {
			return 0
		}
		n, err := fanout.ParseSize(v)
		if err != nil || n <= 0 {
			bad(name, "%q is not a positive size (bytes, or a number with KiB, MiB or GiB)", v)
			return 0
		}
		return n
	}

	c := config{
		outputQueueURL:     get(envOutputQueueURL),
		fileMetadata:       flag(envFileMetadata, true),
		skipGroupOnError:   flag(envSkipGroupOnError, false),
		fanoutWorkQueueURL: get(envFanoutWorkQueueURL),
		s3PathStyle:        flag(envS3PathStyle, false),
	}
	if c.outputQueueURL == "" {
		bad(envOutputQueueURL, "is required: the URL of the queue the records are sent to")
	}

	f := &c.filter
	if v := get(envEventTypes); v != "" {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				f.EventTypes = append(f.EventTypes, t)
			}
		}
	}
	f.KeepDeletions = !flag(envIgnoreDeletions, true)
	// Prefix and suffix are taken as written: a key may begin or end with
	// spaces.
	f.Prefix = getenv(envKeyPrefix)
	f.Suffix = getenv(envKeySuffix)
	if v := get(envMaxFileAge); v != "" {
		age, err := parseAge(v)
		if err != nil {
			bad(envMaxFileAge, "%v", err)
		}
		f.MaxFileAge = age
	}
	f.FileNameOnly = flag(envDedupByFileName, false)
	f.SortByTime = flag(envSortByTime, false)
	f.Options.EventBridgeKeysRaw = flag(envEventBridgeKeysRaw, false)

	var err error
	if c.plan.Format, err = dataset.ParseFormat(get(envFormat)); err != nil {
		bad(envFormat, "%v", err)
	}
	c.plan.ChunkSize = size(envChunkSize)
	c.plan.CSV.NoQuotedNewlines = flag(envCSVNoQuotedNewlines, false)

	switch v := strings.ToLower(get(envPartitionColumns)); v {
	case "", "true":
		c.partitions = partitionsString
	case "false":
		c.partitions = partitionsOff
	case "typed":
		c.partitions = partitionsTyped
	default:
		bad(envPartitionColumns, "%q is not true, false or typed", v)
	}
	switch v := strings.ToLower(get(envOnBadRecord)); v {
	case "", "fail":
	case "skip":
		c.skipBadRecords = true
	default:
		bad(envOnBadRecord, "%q is not fail or skip", v)
	}

	c.send.MaxInFlight = count(envMaxInFlight, 1, 1000)
	c.send.MaxAttempts = count(envMaxAttempts, 1, 100)
	c.send.ReplaceInvalidCharacters = flag(envReplaceInvalidChars, false)
	c.readConcurrency = count(envReadConcurrency, 1, 64)
	if c.readConcurrency == 0 {
		c.readConcurrency = DefaultReadConcurrency
	}

	c.handoffBytes = size(envHandoffBytes)
	if c.handoffBytes > 0 && c.fanoutWorkQueueURL == "" {
		bad(envHandoffBytes, "needs %s, the queue the chunk tasks go to", envFanoutWorkQueueURL)
	}

	if v := get(envDeadlineMargin); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(envDeadlineMargin, "%q is not a positive duration such as 5s", v)
		}
		c.deadlineMargin = d
	}
	return c, errors.Join(errs...)
}

// parseAge reads MAX_FILE_AGE: a number of days ("7d"), a Go duration
// ("36h", "90m"), or "0" or "off" to turn the check off. Zero means off here,
// unlike s3event.Filter where zero means the default, so that the value
// written is the value meant.
func parseAge(s string) (time.Duration, error) {
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
