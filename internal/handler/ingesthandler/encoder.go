package ingesthandler

import (
	"context"
	"log/slog"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/fanout"
	"github.com/s3sqs/s3sqs/pkg/recordjson"
	"github.com/s3sqs/s3sqs/pkg/records"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

var _ fanout.IngestEncoder = EncodeRecords

// EncodeRecords is s3ingest's encoding of records, as
// fanout.Options.IngestEncoder takes it: each record of chunk c is the JSON
// object of [recordjson.Encoder], with the key's partition values as
// ie.Partitions says and, with ie.FileMetadata, a _file object naming the
// chunk's bucket, key, version id and ETag and ie.EventTime. A field the
// record already has wins over an added one, with a warning on log once
// per field. Every Runner that may run s3ingest's tasks takes it: both
// functions' (fanout's workers run the tasks s3ingest hands off), the
// CLI's and a redrive's, so that a record arrives the same whichever of
// them read it.
func EncodeRecords(ctx context.Context, c dataset.Chunk, ie worktask.IngestEncoding, log *slog.Logger) fanout.RecordEncoder {
	src := s3event.Object{Bucket: c.Bucket, Key: c.Key, ETag: c.ETag, VersionID: c.VersionID, EventTime: ie.EventTime}
	enc := recordjson.NewEncoder(c.Format, src, ie.Partitions, ie.FileMetadata, func(field string) {
		log.WarnContext(ctx, "records already have a field that s3ingest adds; the record's value is kept",
			"object", c.URI(), "field", field)
	})
	return func(rec records.Record) (string, error) { return enc.Encode(c.Object, rec) }
}
