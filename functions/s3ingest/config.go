package main

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/internal/lambdaenv"
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
	env := lambdaenv.New(getenv)
	c := config{
		outputQueueURL:     env.QueueURL(envOutputQueueURL),
		fileMetadata:       env.Bool(envFileMetadata, true),
		skipGroupOnError:   env.Bool(envSkipGroupOnError, false),
		fanoutWorkQueueURL: env.QueueURL(envFanoutWorkQueueURL),
		s3PathStyle:        env.Bool(envS3PathStyle, false),
	}
	if env.String(envOutputQueueURL) == "" {
		env.Bad(envOutputQueueURL, "is required: the URL of the queue the records are sent to")
	}

	f := &c.filter
	for t := range strings.SplitSeq(env.String(envEventTypes), ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if err := s3event.CheckEventType(t); err != nil {
			env.Bad(envEventTypes, "%v", strings.TrimPrefix(err.Error(), "s3event: "))
			continue
		}
		f.EventTypes = append(f.EventTypes, t)
	}
	f.KeepDeletions = !env.Bool(envIgnoreDeletions, true)
	// Prefix and suffix are taken as written: a key may begin or end with
	// spaces.
	f.Prefix = env.Raw(envKeyPrefix)
	f.Suffix = env.Raw(envKeySuffix)
	f.MaxFileAge = lambdaenv.Parse(env, envMaxFileAge, parseAge)
	f.FileNameOnly = env.Bool(envDedupByFileName, false)
	f.SortByTime = env.Bool(envSortByTime, false)
	f.Options.EventBridgeKeysRaw = env.Bool(envEventBridgeKeysRaw, false)

	c.plan.Format = lambdaenv.Parse(env, envFormat, dataset.ParseFormat)
	c.plan.ChunkSize = lambdaenv.Parse(env, envChunkSize, fanout.ParseChunkSize)
	c.plan.CSV.NoQuotedNewlines = env.Bool(envCSVNoQuotedNewlines, false)

	c.partitions = partitionsString
	if env.String(envPartitionColumns) != "" {
		c.partitions = lambdaenv.Parse(env, envPartitionColumns, func(v string) (partitionMode, error) {
			switch strings.ToLower(v) {
			case "true":
				return partitionsString, nil
			case "false":
				return partitionsOff, nil
			case "typed":
				return partitionsTyped, nil
			}
			return partitionsString, fmt.Errorf("%q is not true, false or typed", v)
		})
	}
	c.skipBadRecords = lambdaenv.Parse(env, envOnBadRecord, func(v string) (bool, error) {
		switch strings.ToLower(v) {
		case "fail":
			return false, nil
		case "skip":
			return true, nil
		}
		return false, fmt.Errorf("%q is not fail or skip", v)
	})

	c.send.MaxInFlight = env.Int(envMaxInFlight, fanout.ParseMaxInFlight)
	c.send.MaxAttempts = env.Int(envMaxAttempts, fanout.ParseMaxAttempts)
	c.send.ReplaceInvalidCharacters = env.Bool(envReplaceInvalidChars, false)
	c.readConcurrency = cmp.Or(env.Int(envReadConcurrency, fanout.ParseChunkConcurrency), DefaultReadConcurrency)

	c.handoffBytes = env.Size(envHandoffBytes)
	if c.handoffBytes > 0 && env.String(envFanoutWorkQueueURL) == "" {
		env.Bad(envHandoffBytes, "needs %s, the queue the chunk tasks go to", envFanoutWorkQueueURL)
	}
	c.deadlineMargin = env.Duration(envDeadlineMargin)
	return c, env.Err()
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
