package dataset

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// maxManifestJSON bounds the size of an S3 Inventory manifest.json, which
// lists data files, not objects.
const maxManifestJSON = 64 << 20

// manifestObjects yields the objects a manifest lists. A key ending in
// manifest.json is an S3 Inventory manifest; anything else is a CSV of
// bucket,key[,versionId] lines as S3 Batch Operations uses, with URL-encoded
// keys.
func manifestObjects(ctx context.Context, client ListAPI, src Source) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		bucket, key, err := ParseS3URI(src.Manifest)
		if err != nil {
			yield(Object{}, err)
			return
		}
		body, err := getBody(ctx, client, bucket, key)
		if err != nil {
			yield(Object{}, err)
			return
		}
		defer body.Close()
		if strings.HasSuffix(key, "manifest.json") {
			inventoryObjects(ctx, client, src, body, yield)
			return
		}
		// A Batch Operations manifest names objects without their size or
		// ETag.
		readManifestCSV(src, src.Manifest, body, nil, pinEach(ctx, client, yield))
	}
}

func getBody(ctx context.Context, client ListAPI, bucket, key string) (io.ReadCloser, error) {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("dataset: get manifest s3://%s/%s: %w", bucket, key, err)
	}
	return out.Body, nil
}

// pinEach wraps yield so that each object is pinned with HeadObject first,
// for manifests that do not give sizes and ETags.
func pinEach(ctx context.Context, client ListAPI, yield func(Object, error) bool) func(Object, error) bool {
	return func(o Object, err error) bool {
		if err == nil {
			o, err = Head(ctx, client, o.Bucket, o.Key, o.VersionID)
		}
		return yield(o, err)
	}
}

// inventoryManifest is the part of an S3 Inventory manifest.json that
// listing reads.
type inventoryManifest struct {
	SourceBucket      string `json:"sourceBucket"`
	DestinationBucket string `json:"destinationBucket"`
	FileFormat        string `json:"fileFormat"`
	FileSchema        string `json:"fileSchema"`
	Files             []struct {
		Key string `json:"key"`
	} `json:"files"`
}

func inventoryObjects(ctx context.Context, client ListAPI, src Source, r io.Reader, yield func(Object, error) bool) {
	var m inventoryManifest
	if err := json.NewDecoder(io.LimitReader(r, maxManifestJSON)).Decode(&m); err != nil {
		yield(Object{}, fmt.Errorf("dataset: inventory manifest %s: %w", src.Manifest, err))
		return
	}
	if !strings.EqualFold(m.FileFormat, "CSV") {
		yield(Object{}, fmt.Errorf("dataset: inventory manifest %s: fileFormat %q is not supported (want CSV)", src.Manifest, m.FileFormat))
		return
	}
	schema := strings.Split(m.FileSchema, ",")
	for i := range schema {
		schema[i] = strings.TrimSpace(schema[i])
	}
	dest := m.DestinationBucket
	if i := strings.LastIndex(dest, ":"); i >= 0 {
		dest = dest[i+1:] // arn:aws:s3:::bucket
	}
	for _, f := range m.Files {
		body, err := getBody(ctx, client, dest, f.Key)
		if err != nil {
			yield(Object{}, err)
			return
		}
		gz, err := gzip.NewReader(body)
		if err != nil {
			body.Close()
			yield(Object{}, fmt.Errorf("dataset: inventory file s3://%s/%s: %w", dest, f.Key, err))
			return
		}
		emit := yield
		if !slices.Contains(schema, "Size") {
			emit = pinEach(ctx, client, yield)
		}
		ok := readManifestCSV(src, Object{Bucket: dest, Key: f.Key}.URI(), gz, schema, emit)
		body.Close()
		if !ok {
			return
		}
	}
}

// readManifestCSV yields the objects of a manifest CSV. schema names the
// columns (S3 Inventory); nil means bucket,key[,versionId] (Batch
// Operations). Keys are URL-encoded in both. It returns false when yield
// did, or after yielding an error.
func readManifestCSV(src Source, name string, r io.Reader, schema []string, yield func(Object, error) bool) bool {
	col := map[string]int{"Bucket": 0, "Key": 1, "VersionId": 2}
	if schema != nil {
		col = map[string]int{}
		for i, c := range schema {
			col[c] = i
		}
		if _, ok := col["Key"]; !ok {
			return yield(Object{}, fmt.Errorf("dataset: inventory %s: schema has no Key column", name))
		}
	}
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return yield(Object{}, fmt.Errorf("dataset: manifest %s: %w", name, err))
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 2 {
			return yield(Object{}, fmt.Errorf("dataset: manifest %s line %d: want bucket,key, got %d fields", name, line, len(rec)))
		}
		key, err := url.QueryUnescape(field(rec, "Key"))
		if err != nil {
			return yield(Object{}, fmt.Errorf("dataset: manifest %s line %d: key %q: %w", name, line, field(rec, "Key"), err))
		}
		if field(rec, "IsDeleteMarker") == "true" || field(rec, "IsLatest") == "false" {
			continue
		}
		if !src.keep(key) {
			continue
		}
		o := Object{Bucket: field(rec, "Bucket"), Key: key, VersionID: field(rec, "VersionId"), ETag: field(rec, "ETag")}
		if s := field(rec, "Size"); s != "" {
			o.Size, err = strconv.ParseInt(s, 10, 64)
			if err != nil {
				return yield(Object{}, fmt.Errorf("dataset: manifest %s line %d: size %q: %w", name, line, s, err))
			}
		}
		if !yield(o, nil) {
			return false
		}
	}
}
