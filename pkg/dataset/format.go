package dataset

import (
	"fmt"
	"path"
	"strings"
)

// Format is how an object's bytes are records.
type Format string

// Formats.
const (
	// FormatAuto picks the format from the key's extension.
	FormatAuto Format = ""
	// FormatJSONL is JSON Lines: one JSON value per line.
	FormatJSONL Format = "jsonl"
	// FormatCSV is delimited text with an optional header line.
	FormatCSV Format = "csv"
	// FormatText is plain text: each non-empty line is a record.
	FormatText Format = "text"
	// FormatParquet is Apache Parquet; chunks are row groups.
	FormatParquet Format = "parquet"
)

// ParseFormat reads a format name as configuration gives it ("auto",
// "jsonl", "csv", "text", "parquet"; "ndjson" and "json" mean jsonl).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return FormatAuto, nil
	case "jsonl", "ndjson", "json":
		return FormatJSONL, nil
	case "csv", "tsv":
		return FormatCSV, nil
	case "text", "txt", "lines":
		return FormatText, nil
	case "parquet":
		return FormatParquet, nil
	}
	return "", fmt.Errorf("dataset: unknown format %q (want auto, jsonl, csv, text or parquet)", s)
}

// Compression is how an object's bytes are compressed. Compressed objects
// cannot be split: each is one chunk, read as a stream.
type Compression string

// Compressions.
const (
	CompressionNone Compression = ""
	CompressionGzip Compression = "gzip"
	CompressionZstd Compression = "zstd"
)

// Detect returns the format and compression that key's extensions name,
// such as "part-0.jsonl.gz" (jsonl, gzip) or "t.tsv" (csv). The format is
// FormatAuto when no extension names one.
func Detect(key string) (Format, Compression) {
	name := strings.ToLower(path.Base(key))
	var c Compression
	switch ext := path.Ext(name); ext {
	case ".gz", ".gzip":
		c = CompressionGzip
		name = strings.TrimSuffix(name, ext)
	case ".zst", ".zstd":
		c = CompressionZstd
		name = strings.TrimSuffix(name, ext)
	}
	switch path.Ext(name) {
	case ".jsonl", ".ndjson", ".json":
		return FormatJSONL, c
	case ".csv", ".tsv":
		return FormatCSV, c
	case ".txt", ".log", ".text":
		return FormatText, c
	case ".parquet", ".pq":
		return FormatParquet, c
	}
	return FormatAuto, c
}

// CompressionFromEncoding returns the compression a Content-Encoding names.
func CompressionFromEncoding(enc string) Compression {
	for _, e := range strings.Split(strings.ToLower(enc), ",") {
		switch strings.TrimSpace(e) {
		case "gzip", "x-gzip":
			return CompressionGzip
		case "zstd":
			return CompressionZstd
		}
	}
	return CompressionNone
}
