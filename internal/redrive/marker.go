package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// Marker records what redrives sent from one failure output file or one
// run report task, as <file>.redriven next to the file, or
// <run>/redriven/<taskId>.json in the run report. A redrive skips the
// records a marker lists, so that running it again sends them no second
// time; delete the marker to send them again.
type Marker struct {
	// Sent lists the record ids sent, by every redrive so far, sorted.
	Sent []string `json:"sent"`
	// Queued lists the tasks sent to the work queue, by id.
	Queued []string `json:"queued,omitempty"`
	// To lists the queues they were sent to.
	To []string `json:"to"`
	// UpdatedAt is when a redrive last wrote the marker.
	UpdatedAt time.Time `json:"updatedAt"`
}

// has reports whether the marker lists record id.
func (m *Marker) has(id string) bool {
	_, ok := slices.BinarySearch(m.Sent, id)
	return ok
}

// add adds record ids sent to queue.
func (m *Marker) add(queue string, ids ...string) {
	m.Sent = append(m.Sent, ids...)
	slices.Sort(m.Sent)
	m.Sent = slices.Compact(m.Sent)
	if !slices.Contains(m.To, queue) {
		m.To = append(m.To, queue)
	}
}

// readMarker reads the marker at key; a missing one is empty.
func readMarker(ctx context.Context, files failureFiles, key string) (*Marker, error) {
	m := &Marker{}
	b, err := files.read(ctx, key)
	switch {
	case errors.Is(err, fs.ErrNotExist) || awserr.Missing(err) == awserr.Key:
		return m, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", files.name(key), err)
	}
	slices.Sort(m.Sent)
	return m, nil
}

// writeMarker writes m at key, stamped with the time.
func writeMarker(ctx context.Context, files failureFiles, key string, m *Marker) error {
	m.UpdatedAt = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := files.write(ctx, key, b); err != nil {
		return fmt.Errorf("write the marker %s: %w", files.name(key), err)
	}
	return nil
}

// getJSON reads the JSON object at key into v; found is false when there is
// no such object.
func getJSON(ctx context.Context, c S3API, bucket, key string, v any) (found bool, err error) {
	b, err := getObject(ctx, c, bucket, key)
	if err != nil {
		if awserr.Missing(err) == awserr.Key {
			return false, nil
		}
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
	}
	return true, nil
}

func getObject(ctx context.Context, c S3API, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	return b, nil
}

// listKeys returns the keys under prefix, in order, whose names end with
// suffix.
func listKeys(ctx context.Context, c S3API, bucket, prefix, suffix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range out.Contents {
			if k := aws.ToString(o.Key); strings.HasSuffix(k, suffix) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys, nil
}
