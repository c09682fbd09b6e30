package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"

	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// restoreManifest writes the objects a run leaves out as archived (see
// engine.Options.Planning.OnArchived) as an S3 Batch Operations CSV manifest: a
// row of bucket, URL-encoded key and, for an object with one, version id.
// A restore job (Initiate Restore Object) takes it, and once the objects
// are restored a run of it (-manifest) sends them. The file is made when
// the first archived object is found.
type restoreManifest struct {
	path string
	f    lazyFile
	w    *csv.Writer
	mu   sync.Mutex
	n    int
}

func newRestoreManifest(path string) *restoreManifest {
	m := &restoreManifest{path: path, f: lazyFile{path: path}}
	m.w = csv.NewWriter(&m.f)
	return m
}

// add writes o's row.
func (m *restoreManifest) add(o dataset.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row := []string{o.Bucket, url.QueryEscape(o.Key)}
	if o.VersionID != "" {
		row = append(row, o.VersionID)
	}
	m.w.Write(row) // its error stays in m.w, for close
	m.n++
}

// close ends the manifest and says on stderr what it holds and what to do
// with it, or why it could not be written.
func (m *restoreManifest) close(stderr io.Writer) {
	m.w.Flush()
	err := errors.Join(m.w.Error(), m.f.Close())
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "s3sqs fanout: the restore manifest %s was not written whole: %v\n", m.path, err)
	case m.n > 0:
		fmt.Fprintf(stderr, "s3sqs fanout: %d archived objects listed in %s, an S3 Batch Operations manifest: upload it and run a restore job (Initiate Restore Object) on it; once they are restored, a run of it (-manifest s3://...) sends them\n", m.n, m.path)
	default:
		fmt.Fprintf(stderr, "s3sqs fanout: no archived object: %s was not written\n", m.path)
	}
}
