package redrive

import (
	"testing"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestPendingRecordID reads the record id of a failure output record: the
// one the engine wrote in it, which in a versioned bucket is built from
// the ETag that Version (the version id) does not give, and in chunk mode
// is the message's; a record written without one has the id the engine
// gave then, from Version.
func TestPendingRecordID(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"named", `{"runId":"r","source":"s3://b/k","version":"v1","offset":7,"recordId":"0123456789abcdef0123456789abcdef","code":"c"}`, "0123456789abcdef0123456789abcdef"},
		{"older", `{"runId":"r","source":"s3://b/k","version":"v1","offset":7,"code":"c"}`, engine.RecordID(dataset.Object{Bucket: "b", Key: "k", VersionID: "v1"}, 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPending([]byte(tc.body), "f line 1")
			if p.item.Outcome != "" || p.item.ID != tc.want {
				t.Errorf("item %+v; want id %s", p.item, tc.want)
			}
		})
	}
}
