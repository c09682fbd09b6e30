package main

import (
	"fmt"
	"io"

	"github.com/s3sqs/s3sqs/pkg/fanout"
)

// writeArchived says how many objects the run left out as archived, if
// any, and how to send them.
func writeArchived(stderr io.Writer, st fanout.Stats) {
	if st.ObjectsArchived > 0 {
		fmt.Fprintf(stderr, "s3sqs fanout: %d objects (%s) archived (GLACIER, DEEP_ARCHIVE or an archive tier of INTELLIGENT_TIERING) were not read: restore them, then send them in a new run (a key list of them)\n",
			st.ObjectsArchived, megabytes(st.BytesArchived))
	}
}
