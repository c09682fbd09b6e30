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
// A UTF-8 byte order mark at the start of an object (of its decompressed
// bytes, for a compressed one), as Excel and other Windows tools write
// it, is dropped from the first line in every line format: it is in no
// JSON value, text line, CSV field or column name, and a line that holds
// only the mark is blank. The first record's offset stays 0, where its
// line starts, so that it has the same offset, and record id, whether its
// chunk is the whole object or not.
//
// A record that cannot be read (a CSV row with the wrong number of fields
// or that is not valid CSV, a record over the size limit) is yielded as a
// [*RecordError] with its object and offset, and reading goes on. Any
// other error ends the chunk.
//
// CSV is read as encoding/csv reads it with LazyQuotes off (RFC 4180): a
// field that starts with a quote ends at a quote followed by the
// delimiter or the line's end, holds "" as a quote, and may hold
// delimiters and, in an object read whole, newlines. A row that breaks
// these rules is one bad record: the line where it starts, and no more.
// A bare quote in an unquoted field, text after a closing quote, and a
// quoted field that does not end (before the end of the object, within
// MaxRecordSize, or, in an object split at line ends, on its line) each
// make that line a RecordError that wraps [csv.ErrBareQuote],
// [csv.ErrQuote] or [ErrTooLong] and names the column; reading then goes
// on at the next line, which starts a row of its own. So a stray quote
// costs its line, not the lines it would have swallowed, and unless a
// quoted field really holds a newline, an object yields the same rows and
// bad records, at the same offsets, read whole or in chunks of any size.
// Lines that are empty or only white space are not rows.
package records
