package ingesthandler_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/handler/ingesthandler"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// TestEncodeRecords checks the body s3ingest's encoding gives a record of
// a chunk (the engine adds the record id and FIFO ids; see fanout's
// TestEncodedEntries): the record with the key's typed partition value and
// a _file object from the chunk and the event time, and a JSON Lines
// record that is not JSON refused with recordjson.ErrNotJSON.
func TestEncodeRecords(t *testing.T) {
	ie := worktask.IngestEncoding{Partitions: recordjson.PartitionsTyped, FileMetadata: true, EventTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := dataset.Chunk{Object: dataset.Object{Bucket: "b", Key: "d=1/k.jsonl", ETag: "e", VersionID: "v"}, Format: dataset.FormatJSONL}
	encode := ingesthandler.EncodeRecords(t.Context(), c, ie, slog.New(slog.DiscardHandler))
	body, err := encode(records.Record{Offset: 10, Line: 2, Value: []byte(`{"value":"x","group_id":"g"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"value":"x","group_id":"g","d":1,"_file":{"bucket":"b","key":"d=1/k.jsonl","versionId":"v","eTag":"e","eventTime":"2024-01-02T03:04:05Z","offset":10,"line":2}}`
	if body != want {
		t.Errorf("body %s; want %s", body, want)
	}
	if _, err := encode(records.Record{Offset: 20, Value: []byte(`{"a":`)}); !errors.Is(err, recordjson.ErrNotJSON) {
		t.Errorf("body of a bad record: %v", err)
	}
}
