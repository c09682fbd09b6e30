// Package records reads the records of a dataset chunk (see package
// dataset) from S3 as a stream, in bounded memory.
//
// A record belongs to the chunk in which its first byte lies. A reader of a
// byte range [Start, End) therefore starts one byte early: unless that byte
// ends a line, it skips the partial first record, which the previous chunk
// reads. It then reads every record that starts before End, reading past
// End to finish the last one. Over all the chunks of an object every record
// is read exactly once, whatever the chunk size: records longer than a
// chunk, "\r\n" line endings, a missing final newline, empty lines (which
// are not records) and chunks in which no record starts.
//
// Formats: JSON Lines and plain text yield each non-empty line; CSV yields
// each row as a JSON object keyed by the header; Parquet yields each row of
// the chunk's row groups as a JSON object. gzip and zstd objects are read
// whole, as a stream.
//
// A record that cannot be read (a CSV row with the wrong number of fields, a
// record over the size limit) is yielded as a [*RecordError] with its object
// and offset, and reading goes on. Any other error ends the chunk.
package records
