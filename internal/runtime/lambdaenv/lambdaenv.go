// Package lambdaenv is what the two Lambda functions share at init: it
// reads their configuration from the environment (each variable through the
// same check that a request field or CLI flag of the same setting uses,
// every problem gathered and named by its variable), builds the AWS clients
// and the engine, and words the errors of queues that cannot be used.
package lambdaenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/runtime/tracing"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// Reader reads variables with getenv and gathers the problems it finds.
// It is used by one goroutine.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New returns a Reader that reads with getenv (os.Getenv in Lambda, a map
// in tests).
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err returns every problem found so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Bad records a problem with the variable name.
func (r *Reader) Bad(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// String returns the variable with surrounding spaces removed.
func (r *Reader) String(name string) string { return strings.TrimSpace(r.getenv(name)) }

// Raw returns the variable as written, for values such as key prefixes
// that may begin or end with spaces.
func (r *Reader) Raw(name string) string { return r.getenv(name) }

// Parse calls parse with the variable when it is set, and records parse's
// error under the variable's name.
func Parse[T any](r *Reader, name string, parse func(string) (T, error)) T {
	var zero T
	v := r.String(name)
	if v == "" {
		return zero
	}
	out, err := parse(v)
	if err != nil {
		r.Bad(name, "%v", err)
		return zero
	}
	return out
}

// Bool reads true or false; unset means def.
func (r *Reader) Bool(name string, def bool) bool {
	v := r.String(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.Bad(name, "%q is not true or false", v)
		return def
	}
	return b
}

// Int reads a whole number with parse (such as fanout.ParseMaxInFlight);
// unset means zero.
func (r *Reader) Int(name string, parse func(string) (int64, error)) int {
	return int(Parse(r, name, parse))
}

// Size reads a positive size such as 64MiB; unset means zero.
func (r *Reader) Size(name string) int64 {
	return Parse(r, name, func(v string) (int64, error) {
		n, err := fanout.ParseSize(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a positive size (bytes, or a number with KiB, MiB or GiB)", v)
		}
		return n, nil
	})
}

// Duration reads a positive duration such as 10s; unset means zero.
func (r *Reader) Duration(name string) time.Duration {
	return Parse(r, name, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive duration such as 10s", v)
		}
		return d, nil
	})
}

// QueueURL reads an SQS queue URL; unset means "".
func (r *Reader) QueueURL(name string) string {
	return Parse(r, name, func(v string) (string, error) { return v, fanout.CheckQueueURL(v) })
}

// S3URI reads an s3://bucket/prefix URI; unset means "".
func (r *Reader) S3URI(name string) string {
	return Parse(r, name, func(v string) (string, error) {
		if _, _, err := dataset.ParseS3URI(v); err != nil {
			return "", fmt.Errorf("%q is not an s3://bucket/prefix URI", v)
		}
		return v, nil
	})
}

// OneOf records a problem when more than one of the named variables is
// set.
func (r *Reader) OneOf(names ...string) {
	var set []string
	for _, n := range names {
		if r.String(n) != "" {
			set = append(set, n)
		}
	}
	if len(set) > 1 {
		r.Bad(set[len(set)-1], "set only one of %s", strings.Join(names, " and "))
	}
}

// QueueError says, in words a user acts on, why the queue a variable names
// cannot be used at init: the variable, the queue, and AWS's error code and
// message, with a hint for the common codes.
func QueueError(variable, queue string, err error) error {
	return queueError(variable, queue, err, "the function's role", "")
}

// FlagQueueError is QueueError for a command: flag names the queue, the
// caller's credentials need the permissions, and skip, when not empty, is
// the flag that spares the GetQueueAttributes call a denial may be about.
func FlagQueueError(flag, queue string, err error, skip string) error {
	return queueError(flag, queue, err, "the credentials in use", skip)
}

// queueError is QueueError with who needs the permissions and the setting
// that skips GetQueueAttributes, if any.
func queueError(setting, queue string, err error, who, skip string) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		// No answer from SQS: the endpoint, network or credentials.
		var op *smithy.OperationError
		if errors.As(err, &op) {
			err = op.Err
		}
		return fmt.Errorf("%s: queue %s cannot be reached: %w", setting, queue, err)
	}
	hint := ""
	switch api.ErrorCode() {
	case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		hint = " (no such queue in this account and region; check the URL or name)"
	case "AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException":
		hint = " (" + who + " needs sqs:GetQueueAttributes and sqs:SendMessage on it, and kms:GenerateDataKey for a KMS-encrypted queue"
		if skip != "" {
			hint += "; " + skip + " spares GetQueueAttributes"
		}
		hint += ")"
	}
	return fmt.Errorf("%s: queue %s cannot be used: %s: %s%s", setting, queue, api.ErrorCode(), api.ErrorMessage(), hint)
}

// Variables of the S3 notification filter that both functions read.
const (
	EventTypes         = "EVENT_TYPES"
	IgnoreDeletions    = "IGNORE_DELETIONS"
	KeyPrefix          = "KEY_PREFIX"
	KeySuffix          = "KEY_SUFFIX"
	MaxFileAge         = "MAX_FILE_AGE"
	DedupByFileName    = "DEDUP_BY_FILE_NAME"
	SortByTime         = "SORT_BY_TIME"
	EventBridgeKeysRaw = "EVENTBRIDGE_KEYS_RAW"
)

// Filter reads the S3 notification filter: which event types, keys and
// ages a function takes, and how it reads keys. IGNORE_DELETIONS is read
// when deletions is true; a function that cannot use deletions passes
// false and never keeps them.
func (r *Reader) Filter(deletions bool) s3event.Filter {
	var f s3event.Filter
	var errs []error
	f.EventTypes, errs = ParseEventTypes(r.String(EventTypes))
	for _, err := range errs {
		r.Bad(EventTypes, "%v", err)
	}
	if deletions {
		f.KeepDeletions = !r.Bool(IgnoreDeletions, true)
	}
	// Prefix and suffix are taken as written: a key may begin or end with
	// spaces.
	f.Prefix = r.Raw(KeyPrefix)
	f.Suffix = r.Raw(KeySuffix)
	f.MaxFileAge = Parse(r, MaxFileAge, parseAge)
	f.FileNameOnly = r.Bool(DedupByFileName, false)
	f.SortByTime = r.Bool(SortByTime, false)
	f.Options.EventBridgeKeysRaw = r.Bool(EventBridgeKeysRaw, false)
	return f
}

// ParseEventTypes reads a comma-separated list of S3 event types, as
// EVENT_TYPES and the CLI's -event-types write it, and returns the names
// s3event.CheckEventType accepts and an error for each other one.
func ParseEventTypes(list string) ([]string, []error) {
	var (
		types []string
		errs  []error
	)
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if err := s3event.CheckEventType(t); err != nil {
			errs = append(errs, errors.New(strings.TrimPrefix(err.Error(), "s3event: ")))
			continue
		}
		types = append(types, t)
	}
	return types, errs
}

// parseAge reads MAX_FILE_AGE: a number of days ("7d"), a Go duration
// ("36h", "90m"), or "0", "off" or "none" to turn the check off, as it is
// when the variable is unset: no notification is skipped for its age unless
// asked, since a DLQ redriven late holds old ones.
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

// S3PathStyle is the variable that turns on path-style S3 requests, which
// stand-ins such as moto need; the SDK reads no such setting itself.
const S3PathStyle = "S3_FORCE_PATH_STYLE"

// Clients returns the S3 and SQS clients of a function from the SDK's
// standard configuration (credentials, region, AWS_ENDPOINT_URL_...).
func Clients(ctx context.Context, s3PathStyle bool) (*s3.Client, *sqs.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("AWS config: %w", err)
	}
	s3c, sqsc := clients(cfg, s3PathStyle)
	return s3c, sqsc, nil
}

func clients(cfg aws.Config, s3PathStyle bool) (*s3.Client, *sqs.Client) {
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = s3PathStyle
		// Ranged GETs come back without a whole-object checksum, and
		// objects uploaded without one are normal: the SDK would log
		// that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return s3c, sqs.NewFromConfig(cfg)
}

// The variables of offload (see fanout.Options.OffloadS3URI), which both
// functions read.
const (
	OffloadS3URI    = "OFFLOAD_S3_URI"
	Offload         = "OFFLOAD"
	OffloadKMSKeyID = "OFFLOAD_KMS_KEY_ID"
)

// Offload reads the offload variables into o.
func (r *Reader) Offload(o *fanout.Options) {
	o.OffloadS3URI = r.S3URI(OffloadS3URI)
	if o.OffloadS3URI != "" {
		if _, prefix, err := dataset.ParseS3URI(o.OffloadS3URI); err == nil {
			if err := sqsextended.CheckPrefix(prefix); err != nil {
				r.Bad(OffloadS3URI, "%v", err)
			}
		}
	}
	o.OffloadMode = Parse(r, Offload, sqsextended.ParseMode)
	o.OffloadKMSKeyID = r.String(OffloadKMSKeyID)
	for _, name := range []string{Offload, OffloadKMSKeyID} {
		if r.String(name) != "" && o.OffloadS3URI == "" {
			r.Bad(name, "needs %s, the bucket and prefix the records go to", OffloadS3URI)
		}
	}
}

// Tracing is the variable that turns on tracing (see internal/tracing):
// off, otlp or stdout.
const Tracing = "TRACING"

// Tracing reads TRACING.
func (r *Reader) Tracing() tracing.Mode {
	return Parse(r, Tracing, tracing.ParseMode)
}

// ClaimsTable is the variable that names the DynamoDB table of run-once
// claims (see pkg/claims), which both functions read.
const ClaimsTable = "CLAIMS_TABLE"

// tableName is what DynamoDB accepts as a table name.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// ClaimsTable returns the table the variable name names, or "".
func (r *Reader) ClaimsTable(name string) string {
	v := r.String(name)
	if v != "" && !tableName.MatchString(v) {
		r.Bad(name, "%q is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)", v)
	}
	return v
}

// claimsStore returns the claims store in table, after one read that
// shows the table is there and readable, so that a wrong name or a missing
// permission fails at init.
func claimsStore(ctx context.Context, cfg aws.Config, table string) (*claims.Table, error) {
	client := dynamodb.NewFromConfig(cfg)
	_, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]ddbtypes.AttributeValue{claims.KeyAttribute: &ddbtypes.AttributeValueMemberS{Value: "s3sqs-init-check"}},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read DynamoDB table %s: %w", ClaimsTable, table, err)
	}
	return claims.NewTable(client, table, claims.TableOptions{}), nil
}

// Function is what a function's start-up needs from its configuration.
type Function struct {
	// Name is the function's kind, fanout or s3ingest, for its spans.
	Name string
	// Tracing says where spans go (TRACING).
	Tracing tracing.Mode
	// Runner configures the engine; its Logger is set here.
	Runner fanout.Options
	// S3PathStyle turns on path-style S3 requests.
	S3PathStyle bool
	// ClaimsTable, when set, is the claims store's DynamoDB table.
	ClaimsTable string
	// QueueVariable names the variable of the runner's queue of a role
	// (fanout.RoleTarget, RoleWork, RoleFailure), for init errors.
	QueueVariable func(role string) string
}

// Start is a function's whole init: it logs with the Lambda logger, builds
// the AWS clients and the runner (resolving its queues once, so that a
// wrong URL or a missing permission fails here, named by its variable),
// and hands the runner, the S3 client and the logger to handler, whose
// result goes to lambda.Start. A configuration error (cfgErr, or one found
// here) is logged and ends the process before the runtime starts. Start
// does not return.
func Start(fn Function, cfgErr error, handler func(r *fanout.Runner, s3c *s3.Client, log *slog.Logger) func(context.Context, json.RawMessage) (any, error)) {
	log := lambdacontext.NewLogger()
	slog.SetDefault(log)
	fail := func(err error) {
		log.Error("bad config", "err", err)
		os.Exit(1)
	}
	if cfgErr != nil {
		fail(cfgErr)
	}
	if limit, ok := MemoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
		log.Debug("Go soft memory limit set from the function's memory", "limitMiB", limit>>20)
	}
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		fail(fmt.Errorf("AWS config: %w", err))
	}
	tr, err := tracing.Setup(ctx, fn.Tracing, fn.Name, os.Stdout)
	if err != nil {
		fail(fmt.Errorf("%s: %w", Tracing, err))
	}
	tr.AWS(&cfg)
	s3c, sqsc := clients(cfg, fn.S3PathStyle)
	if fn.ClaimsTable == "" {
		log.Info("no " + ClaimsTable + ": tasks and notifications run at least once, and one delivered twice sends its records twice")
	} else {
		store, err := claimsStore(ctx, cfg, fn.ClaimsTable)
		if err != nil {
			fail(err)
		}
		fn.Runner.Claims = store
		log.Info("each task and notified object version runs once", "claimsTable", fn.ClaimsTable)
	}
	fn.Runner.Logger = log
	runner, err := fanout.New(ctx, s3c, sqsc, fn.Runner)
	if err != nil {
		var qe *fanout.QueueError
		if errors.As(err, &qe) && fn.QueueVariable != nil {
			err = QueueError(fn.QueueVariable(qe.Role), qe.Queue, qe.Err)
		}
		fail(err)
	}
	lambda.Start(tr.Handler(fn.Name, handler(runner, s3c, log)))
}
