package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// Environment variables fanout reads. README.md has the table.
const (
	envTargetQueueURL     = "TARGET_QUEUE_URL"
	envTargetQueueName    = "TARGET_QUEUE_NAME"
	envTargetQueueOwner   = "TARGET_QUEUE_OWNER_ACCOUNT_ID"
	envTargetMaxMsgSize   = "TARGET_MAX_MESSAGE_SIZE"
	envWorkQueueURL       = "WORK_QUEUE_URL"
	envFailureQueueURL    = "FAILURE_QUEUE_URL"
	envFailureS3URI       = "FAILURE_S3_URI"
	envReportS3URI        = "REPORT_S3_URI"
	envFormat             = "FORMAT"
	envMode               = "MODE"
	envChunkSize          = "CHUNK_SIZE"
	envMaxInFlight        = "MAX_IN_FLIGHT"
	envMaxAttempts        = "MAX_ATTEMPTS"
	envBodyField          = "BODY_FIELD"
	envAttributesField    = "ATTRIBUTES_FIELD"
	envGroupIDField       = "GROUP_ID_FIELD"
	envDedupIDField       = "DEDUP_ID_FIELD"
	envFailOnError        = "FAIL_ON_ERROR"
	envInlineMaxBytes     = "INLINE_MAX_BYTES"
	envDeadlineMargin     = "DEADLINE_MARGIN"
	envChunkConcurrency   = "CHUNK_CONCURRENCY"
	envCSVNoQuotedNewline = "CSV_NO_QUOTED_NEWLINES"
	envS3PathStyle        = "S3_FORCE_PATH_STYLE"
)

// config is fanout's configuration, read once at init.
type config struct {
	runner      fanout.Options
	failOnError bool
	s3PathStyle bool
}

// loadConfig reads the configuration with getenv and reports every
// problem at once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	var (
		c    config
		errs []error
	)
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	size := func(name string) int64 {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0
		}
		n, err := fanout.ParseSize(v)
		if err != nil || n <= 0 {
			bad(name, "%q is not a positive size (bytes, or with KiB, MiB, GiB)", v)
		}
		return n
	}
	count := func(name string, lo, hi int) int {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			bad(name, "%q is not a whole number from %d to %d", v, lo, hi)
		}
		return n
	}
	flag := func(name string) bool {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(name, "%q is not true or false", v)
		}
		return b
	}

	o := &c.runner
	o.Target = sqsbatch.Queue{
		URL:            getenv(envTargetQueueURL),
		Name:           getenv(envTargetQueueName),
		OwnerAccountID: getenv(envTargetQueueOwner),
		MaxMessageSize: int(size(envTargetMaxMsgSize)),
	}
	if o.Target.URL != "" && o.Target.Name != "" {
		bad(envTargetQueueName, "set %s or %s, not both", envTargetQueueURL, envTargetQueueName)
	}
	if o.Target.OwnerAccountID != "" && o.Target.Name == "" {
		bad(envTargetQueueOwner, "needs %s", envTargetQueueName)
	}
	o.WorkQueueURL = getenv(envWorkQueueURL)
	o.FailureQueueURL = getenv(envFailureQueueURL)
	o.FailureS3URI = getenv(envFailureS3URI)
	if o.FailureQueueURL != "" && o.FailureS3URI != "" {
		bad(envFailureS3URI, "set %s or %s, not both", envFailureQueueURL, envFailureS3URI)
	}
	if o.FailureS3URI != "" {
		if _, _, err := dataset.ParseS3URI(o.FailureS3URI); err != nil {
			bad(envFailureS3URI, "%v", err)
		}
	}
	o.ReportS3URI = getenv(envReportS3URI)
	if o.ReportS3URI != "" {
		if _, _, err := dataset.ParseS3URI(o.ReportS3URI); err != nil {
			bad(envReportS3URI, "%v", err)
		}
	}
	var err error
	if o.Plan.Format, err = dataset.ParseFormat(getenv(envFormat)); err != nil {
		bad(envFormat, "%v", err)
	}
	switch m := fanout.Mode(strings.ToLower(strings.TrimSpace(getenv(envMode)))); m {
	case "", fanout.ModeRecord, fanout.ModeChunk:
		o.Mode = m
	default:
		bad(envMode, "%q is not record or chunk", m)
	}
	o.Plan.ChunkSize = size(envChunkSize)
	o.Plan.CSV.NoQuotedNewlines = flag(envCSVNoQuotedNewline)
	o.Send.MaxInFlight = count(envMaxInFlight, 1, 1000)
	o.Send.MaxAttempts = count(envMaxAttempts, 1, 100)
	o.Mapping = fanout.Mapping{
		BodyField:       getenv(envBodyField),
		AttributesField: getenv(envAttributesField),
		GroupIDField:    getenv(envGroupIDField),
		DedupIDField:    getenv(envDedupIDField),
	}
	o.InlineMaxBytes = size(envInlineMaxBytes)
	o.ChunkConcurrency = count(envChunkConcurrency, 1, 64)
	if v := strings.TrimSpace(getenv(envDeadlineMargin)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(envDeadlineMargin, "%q is not a positive duration such as 10s", v)
		}
		o.DeadlineMargin = d
	}
	c.failOnError = flag(envFailOnError)
	c.s3PathStyle = flag(envS3PathStyle)
	return c, errors.Join(errs...)
}
