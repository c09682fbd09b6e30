package fanouthandler

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/strictjson"
)

// MapBatch is a Step Functions Distributed Map item batch, as its
// ItemBatcher hands it to the ItemProcessor: the items, and the
// BatchInput, the same for every batch of a Map run.
type MapBatch struct {
	Items []MapItem
	// Input is the decoded BatchInput.
	Input MapBatchInput
}

// MapItem is one item of a batch. An S3 ItemReader's listObjectsV2 gives
// Key, Size, Etag (quoted), LastModified and StorageClass, but not the
// bucket, which BatchInput gives; an item may carry its own Bucket (from
// an ItemSelector or a JSON ItemReader) and VersionId. Keys are taken as
// written, not URL-decoded. Fields not named here are ignored: items are
// written by Step Functions, which may add some.
type MapItem struct {
	Bucket    string `json:"Bucket,omitempty"`
	Key       string `json:"Key"`
	Size      *int64 `json:"Size,omitempty"`
	Etag      string `json:"Etag,omitempty"`
	VersionID string `json:"VersionId,omitempty"`
	// Err is an item that names no object; it fails for good.
	Err error `json:"-"`
}

// MapBatchInput is a batch's BatchInput: the bucket of the items, and a
// request's overrides and run id. It is read as strictly as a request.
// With "runId.$": "$$.Execution.Name" every batch of an execution runs in
// one run, named after it.
type MapBatchInput struct {
	Bucket string `json:"bucket,omitempty"`
	runArguments
}

func (in *MapBatchInput) validate() error {
	if in.Bucket != "" {
		if err := dataset.CheckBucket(in.Bucket); err != nil {
			return fmt.Errorf("bucket: %w", err)
		}
	}
	return in.runArguments.validate()
}

// decodeMapBatch reads a Distributed Map item batch: an object with Items
// (an array) and an optional BatchInput, and nothing else. A bad
// BatchInput is an *ArgumentError naming the field; an item that names no
// object has Err set.
func decodeMapBatch(payload []byte) (MapBatch, error) {
	var probe map[string]json.RawMessage
	if err := strictjson.Decode(payload, &probe); err != nil {
		return MapBatch{}, fmt.Errorf("fanout: Distributed Map batch: %w", err)
	}
	var b MapBatch
	var items []json.RawMessage
	for name, raw := range probe {
		switch name {
		case "Items":
			if err := json.Unmarshal(raw, &items); err != nil {
				return MapBatch{}, fmt.Errorf("fanout: Distributed Map batch: Items: %s is not allowed here; want an array", kindOfJSON(raw))
			}
		case "BatchInput":
			if string(raw) == "null" {
				continue
			}
			if len(raw) == 0 || raw[0] != '{' {
				return MapBatch{}, &ArgumentError{Field: "BatchInput", Err: fmt.Errorf("%s is not allowed here; want an object", kindOfJSON(raw))}
			}
			if err := decodeArguments("BatchInput", raw, &b.Input); err != nil {
				return MapBatch{}, err
			}
		default:
			return MapBatch{}, fmt.Errorf("fanout: Distributed Map batch: unknown field %q (want Items and BatchInput)", name)
		}
	}
	for i, r := range items {
		var it MapItem
		if err := json.Unmarshal(r, &it); err != nil {
			it.Err = &ArgumentError{Field: fmt.Sprintf("Items[%d]", i), Err: err}
		} else if it.Key == "" {
			it.Err = &ArgumentError{Field: fmt.Sprintf("Items[%d]", i), Err: errors.New("it has no Key")}
		}
		b.Items = append(b.Items, it)
	}
	return b, nil
}

// kindOfJSON names the kind of a JSON value, with its article.
func kindOfJSON(raw []byte) string {
	switch k := strictjson.Kind(raw); {
	case k == "array" || k == "object":
		return "an " + k
	case len(raw) > 0 && raw[0] == '"':
		return "a string"
	case k == "value":
		return "a number"
	default:
		return "a " + k
	}
}

// object returns the object an item names, in bucket unless it names its
// own, and whether it must be pinned with HeadObject: when the item does
// not give both its Size and Etag.
func (it MapItem) object(bucket string) (obj dataset.Object, head bool, err error) {
	if it.Err != nil {
		return dataset.Object{Bucket: it.Bucket, Key: it.Key}, false, it.Err
	}
	obj = dataset.Object{Bucket: cmp.Or(it.Bucket, bucket), Key: it.Key, ETag: strings.Trim(it.Etag, `"`), VersionID: it.VersionID}
	if obj.Bucket == "" {
		return obj, false, errNoBucket
	}
	if it.Size != nil {
		obj.Size = *it.Size
	}
	return obj, it.Size == nil || obj.ETag == "", nil
}

// id returns a digest of the batch's objects, which names a batch the same
// in every retry.
func (b MapBatch) id() string {
	h := sha256.New()
	// The overrides too: the same objects sent elsewhere or otherwise are
	// another run.
	in, _ := json.Marshal(b.Input)
	fmt.Fprintf(h, "%s\n", in)
	for _, it := range b.Items {
		obj, _, _ := it.object(b.Input.Bucket)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\n", obj.Bucket, obj.Key, obj.ETag, obj.VersionID)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// MapResult is the answer to a Distributed Map batch, which a ResultWriter
// stores: the run, counts, and what became of each item.
type MapResult struct {
	RunID             string `json:"runId"`
	Items             int    `json:"items"`
	Succeeded         int    `json:"succeeded"`
	TemporaryFailures int    `json:"temporaryFailures"`
	PermanentFailures int    `json:"permanentFailures"`
	engine.Stats
	Results []MapItemResult `json:"results"`
	// Omitted counts the items left out of Results (those that succeeded
	// first) to keep the answer under Step Functions' payload limit.
	Omitted int `json:"omitted,omitempty"`
}

// MapItemResult is what became of one item.
type MapItemResult struct {
	Bucket        string     `json:"bucket"`
	Key           string     `json:"key"`
	VersionID     string     `json:"versionId,omitempty"`
	Status        ResultCode `json:"status"`
	Reason        string     `json:"reason,omitempty"`
	RecordsSent   int64      `json:"recordsSent"`
	RecordsFailed int64      `json:"recordsFailed"`
	TasksQueued   int        `json:"tasksQueued"`
}

// maxMapResult keeps a batch's answer under Step Functions' 256 KiB
// payload limit, with room for what the Task state adds around it.
const maxMapResult = 200 << 10

// RetryableItemsError is the answer to a batch in which some item failed
// in a way a retry can fix. Lambda names the error by its type, so that a
// Task state's Retry can name it: "ErrorEquals": ["RetryableItemsError"].
// Its message holds the batch's MapResult as JSON. With a claims table,
// the retry skips the chunks already done.
type RetryableItemsError struct{ Result MapResult }

// Error says how many items a retry can fix, and holds the MapResult.
func (e *RetryableItemsError) Error() string {
	return itemsMessage(fmt.Sprintf("fanout: %d of %d items failed and a retry can fix them", e.Result.TemporaryFailures, e.Result.Items), e.Result)
}

// FailedItemsError is the answer to a batch in which some item failed for
// good, and none can be retried: the Map counts the batch's items as
// failed, against its ToleratedFailurePercentage or Count. The batch's
// other items were sent. Its message holds the batch's MapResult as JSON.
type FailedItemsError struct{ Result MapResult }

// Error says how many items failed for good, and holds the MapResult.
func (e *FailedItemsError) Error() string {
	return itemsMessage(fmt.Sprintf("fanout: %d of %d items failed for good", e.Result.PermanentFailures, e.Result.Items), e.Result)
}

// maxErrorResult keeps an error's message within a Step Functions cause
// (32,768 characters).
const maxErrorResult = 30 << 10

func itemsMessage(head string, r MapResult) string {
	b, _ := r.trimmed(maxErrorResult - len(head) - 2)
	return head + ": " + string(b)
}

// MarshalJSON writes the result in at most maxMapResult bytes, leaving
// out the items that succeeded first.
func (r MapResult) MarshalJSON() ([]byte, error) { return r.trimmed(maxMapResult) }

// trimmed returns r as JSON of at most limit bytes where it can: the
// Succeeded items are left out first (counted in Omitted), then failed
// ones from the end.
func (r MapResult) trimmed(limit int) ([]byte, error) {
	type plain MapResult // without MarshalJSON
	b, err := json.Marshal(plain(r))
	if err != nil || len(b) <= limit {
		return b, err
	}
	var failed []MapItemResult
	for _, it := range r.Results {
		if it.Status != Succeeded {
			failed = append(failed, it)
		}
	}
	r.Omitted += len(r.Results) - len(failed)
	r.Results = failed
	for {
		b, err := json.Marshal(plain(r))
		if err != nil || len(b) <= limit || len(r.Results) == 0 {
			return b, err
		}
		n := max(len(r.Results)/4, 1)
		r.Results = r.Results[:len(r.Results)-n]
		r.Omitted += n
	}
}

// mapRunID returns a batch's run id: BatchInput's runId, or one derived
// from its items, which a retry of the batch shares.
func mapRunID(b MapBatch) string {
	if b.Input.RunID != "" {
		return b.Input.RunID
	}
	return "map-" + b.id()
}

// HandleDistributedMap answers a Distributed Map item batch: each item's
// object, pinned by its Etag (or with HeadObject when the item lacks its
// Size or Etag), is run as Runner.RunObjects runs any object. The answer is
// a MapResult; when an item failed it is an error instead (see
// RetryableItemsError and FailedItemsError), so that the Map retries the
// batch or counts it failed. FAIL_ON_ERROR acts per item (see runObject).
func (h *Handler) HandleDistributedMap(ctx context.Context, b MapBatch) (MapResult, error) {
	start := h.opts.Now()
	inv := &Invocation{Kind: kindDistributedMap}
	runID := mapRunID(b)
	inv.RunID = runID
	ctx, cancel := partialbatch.Deadlines(ctx, h.opts.DeadlineMargin, h.opts.Now)
	defer cancel()
	at := time.Now().UTC()
	jobs := make([]objectJob, len(b.Items))
	for i, it := range b.Items {
		obj, head, err := it.object(b.Input.Bucket)
		jobs[i] = objectJob{obj: obj, ov: b.Input.Overrides, head: head, err: err}
	}
	runs := h.runObjects(ctx, runID, jobs)
	res := MapResult{RunID: runID, Items: len(b.Items), Results: make([]MapItemResult, len(runs))}
	total := engine.Report{RunID: runID}
	for i, r := range runs {
		h.count(ctx, inv, &total, r, "item", fmt.Sprint(i))
		res.add(i, r)
	}
	res.Stats = total.Stats
	h.invocationReport(ctx, "map-"+b.id(), total, at)
	var err error
	switch {
	case res.TemporaryFailures > 0:
		err = &RetryableItemsError{Result: res}
	case res.PermanentFailures > 0:
		err = &FailedItemsError{Result: res}
	}
	h.summarize(ctx, inv, start, err)
	if err != nil {
		return MapResult{}, err
	}
	return res, nil
}

// add puts what became of item i, run r, in the result and its counts.
func (res *MapResult) add(i int, r objectRun) {
	ir := MapItemResult{Bucket: r.Object.Bucket, Key: r.Object.Key, VersionID: r.Object.VersionID, Status: r.Code,
		RecordsSent: r.Report.RecordsSent, RecordsFailed: r.Report.RecordsFailed, TasksQueued: r.Report.TasksQueued}
	if r.Err != nil {
		ir.Reason = r.reason()
	}
	switch r.Code {
	case Succeeded:
		res.Succeeded++
	case TemporaryFailure:
		res.TemporaryFailures++
	case PermanentFailure:
		res.PermanentFailures++
	}
	res.Results[i] = ir
}
