package simulate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"

	"github.com/s3sqs/s3sqs/internal/handler/fanouthandler"
)

// Drivers of a Request besides a direct request.
const (
	driverBatchOps = "batch-operations"
	driverDistMap  = "distributed-map"
)

// driverPayload makes the payload of a Batch Operations job (schema 2.0,
// one task per key, keys URL-encoded as S3 writes them) or of a
// Distributed Map item batch (items as an S3 ItemReader lists them), and
// the run id the engine will give it.
func driverPayload(rng *rand.Rand, driver string, seed uint64, i int, keys []string, objs []Object, versioned bool, versionOf func(string) (string, string)) ([]byte, string) {
	switch driver {
	case driverBatchOps:
		job := fmt.Sprintf("job-%d-%d", seed, i)
		var tasks []map[string]string
		for j, k := range keys {
			t := map[string]string{"taskId": fmt.Sprintf("t%d", j), "s3Key": url.PathEscape(k), "s3Bucket": dataBucket}
			if v, _ := versionOf(k); versioned && v != "" && rng.IntN(2) == 0 {
				// A manifest with version ids.
				t["s3VersionId"] = v
			}
			tasks = append(tasks, t)
		}
		runID := fmt.Sprintf("sim-%d-%d", seed, i)
		b, _ := json.Marshal(map[string]any{"invocationSchemaVersion": "2.0", "invocationId": "inv-" + job,
			"job": map[string]any{"id": job, "userArguments": map[string]string{"runId": runID}}, "tasks": tasks})
		return b, runID
	default:
		var items []map[string]any
		for _, k := range keys {
			_, etag := versionOf(k)
			var size int
			for _, o := range objs {
				if o.Key == k {
					size = len(o.Data)
				}
			}
			items = append(items, map[string]any{"Key": k, "Size": size, "Etag": `"` + etag + `"`, "StorageClass": "STANDARD", "LastModified": 1767225600})
		}
		runID := fmt.Sprintf("sim-%d-%d", seed, i)
		b, _ := json.Marshal(map[string]any{"Items": items, "BatchInput": map[string]string{"bucket": dataBucket, "runId": runID}})
		return b, runID
	}
}

// batchRetry reads a Batch Operations answer: the payload that retries
// its temporarily failed tasks (nil when none), and the tasks that failed
// for good.
func batchRetry(payload []byte, answer any) ([]byte, []string) {
	b, _ := json.Marshal(answer)
	var resp struct {
		Results []struct {
			TaskID       string `json:"taskId"`
			ResultCode   string `json:"resultCode"`
			ResultString string `json:"resultString"`
		} `json:"results"`
	}
	json.Unmarshal(b, &resp)
	retry := map[string]bool{}
	var failed []string
	for _, r := range resp.Results {
		switch fanouthandler.ResultCode(r.ResultCode) {
		case fanouthandler.TemporaryFailure:
			retry[r.TaskID] = true
		case fanouthandler.PermanentFailure:
			failed = append(failed, r.TaskID+": "+r.ResultString)
		}
	}
	if len(retry) == 0 {
		return nil, failed
	}
	var job map[string]any
	json.Unmarshal(payload, &job)
	var keep []any
	for _, t := range job["tasks"].([]any) {
		if retry[t.(map[string]any)["taskId"].(string)] {
			keep = append(keep, t)
		}
	}
	job["tasks"] = keep
	out, _ := json.Marshal(job)
	return out, failed
}
