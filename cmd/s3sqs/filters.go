package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// filterFlags defines the flags of the object filters (see
// dataset.Filters), which fanout and reconcile share.
func filterFlags(f *cmdFlags, p *dataset.Filters) {
	parsedInto(f, settings.ModifiedAfter, &p.ModifiedAfter)
	parsedInto(f, settings.ModifiedBefore, &p.ModifiedBefore)
	parsedInto(f, settings.MinObjectSize, &p.MinSize)
	parsedInto(f, settings.MaxObjectSize, &p.MaxSize)
	parsedInto(f, settings.StorageClasses, &p.StorageClasses)
	parsedInto(f, settings.KeyRegex, &p.KeyRegex)
}

// parsedInto defines the flag of setting s, parsed by s's Parse into p
// when given.
func parsedInto[T any](f *cmdFlags, s settings.Setting[T], p *T) {
	text := new(string)
	f.checkedText(s.Spec(), text, "", func(v string) (err error) {
		*p, err = s.Parse(v)
		return err
	})
}

// filterNames are the flags of dataset's filter names, for people.
var filterNames = map[string]string{
	dataset.FilterHidden:         "hidden keys (_*, .*; -include-hidden keeps them)",
	dataset.FilterSuffix:         "-suffix",
	dataset.FilterGlob:           "-glob",
	dataset.FilterKeyRegex:       "-" + settings.KeyRegex.Flag,
	dataset.FilterStorageClasses: "-" + settings.StorageClasses.Flag,
	dataset.FilterMinSize:        "-" + settings.MinObjectSize.Flag,
	dataset.FilterMaxSize:        "-" + settings.MaxObjectSize.Flag,
	dataset.FilterModifiedAfter:  "-" + settings.ModifiedAfter.Flag,
	dataset.FilterModifiedBefore: "-" + settings.ModifiedBefore.Flag,
}

// filteredBy says how many objects each filter left out, most first:
// "-min-size 10, -storage-classes 2".
func filteredBy[N int | int64](by map[string]N) string {
	names := slices.SortedFunc(maps.Keys(by), func(a, b string) int {
		return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", cmp.Or(filterNames[n], n), by[n])
	}
	return strings.Join(parts, ", ")
}

// writeLeftOut says what the run left out when it planned, if anything:
// the objects the filters left out, and the archived ones, with how to
// send those.
func writeLeftOut(stderr io.Writer, st engine.Stats) {
	if st.ObjectsFiltered > 0 {
		fmt.Fprintf(stderr, "s3sqs fanout: %d objects (%s) left out by the filters: %s\n", st.ObjectsFiltered, megabytes(st.BytesFiltered), filteredBy(st.FilteredBy))
	}
	if st.ObjectsArchived > 0 {
		fmt.Fprintf(stderr, "s3sqs fanout: %d objects (%s) archived (GLACIER, DEEP_ARCHIVE or an archive tier of INTELLIGENT_TIERING) were not read: restore them (-restore-manifest lists them for a restore job), then send them in a new run\n",
			st.ObjectsArchived, megabytes(st.BytesArchived))
	}
}

// noObject says which dataset held no object: where it was looked for,
// and what the filters left out.
func noObject(src dataset.Source, st engine.Stats) string {
	var where string
	switch {
	case src.Manifest != "":
		where = "the manifest " + src.Manifest + " names no object"
	case src.Key != "":
		where = fmt.Sprintf("no object s3://%s/%s", src.Bucket, src.Key)
	case len(src.Keys) > 0:
		where = fmt.Sprintf("none of the %d -keys is an object in bucket %s", len(src.Keys), src.Bucket)
	case src.All:
		where = "no object in bucket " + src.Bucket
	default:
		where = fmt.Sprintf("no object under s3://%s/%s (-bucket %s -prefix %s)", src.Bucket, src.Prefix, src.Bucket, src.Prefix)
	}
	if st.ObjectsFiltered > 0 {
		where += fmt.Sprintf(" that the filters keep: they left out %d (%s)", st.ObjectsFiltered, filteredBy(st.FilteredBy))
	}
	return where
}
