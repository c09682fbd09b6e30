package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestObjectFilters runs fanout over a prefix on moto_server, which keeps
// storage classes and times of last modification, with every object
// filter at once: each of seven objects is left out by a filter of its
// own but one, which alone is sent. The dry run, the run's report, its
// summary and status count what each filter left out; a GLACIER object
// that -storage-classes leaves out is not counted as archived; filters
// that keep nothing are refused as an empty dataset, naming what they left
// out; bad filters are refused before anything is listed.
func TestObjectFilters(t *testing.T) {
	rig := newMotoRig(t, "filters")
	bucket, table, sqsc := rig.bucket, rig.table, rig.sqs
	put := func(key string, class s3types.StorageClass, body string) { t.Helper(); rig.put(t, key, class, body) }
	put("in/kept.jsonl", "STANDARD", `{"k":"kept"}`+"\n")
	put("in/big.jsonl", "STANDARD", strings.Repeat(`{"k":"big"}`+"\n", 200)) // -max-size
	put("in/ia.jsonl", "STANDARD_IA", `{"k":"ia"}`+"\n")                     // -storage-classes
	put("in/glacier.jsonl", "GLACIER", `{"k":"glacier"}`+"\n")               // -storage-classes, not archived
	put("in/x.csv", "STANDARD", "k\nx\n")                                    // -key-regex
	put("in/tiny.jsonl", "STANDARD", "{}\n")                                 // -min-size
	put("in/_SUCCESS", "STANDARD", "")                                       // hidden
	// moto keeps whole seconds, as S3's listings give them: what is
	// written 1.1 s after cut is after it.
	cut := time.Now().UTC()
	time.Sleep(1100 * time.Millisecond)
	put("in/new.jsonl", "STANDARD", `{"k":"new"}`+"\n") // -modified-before

	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	args := []string{"fanout", "-bucket", bucket, "-prefix", "in/", "-target-queue-url", target, "-s3-path-style",
		"-min-size", "5", "-max-size", "1KiB", "-storage-classes", "STANDARD", "-key-regex", `\.jsonl$`,
		"-modified-before", cut.Format(time.RFC3339Nano)}
	wantBy := map[string]int{"hidden": 1, "keyRegex": 1, "maxSize": 1, "minSize": 1, "modifiedBefore": 1, "storageClasses": 2}
	const wantLine = "7 objects (2.4 kB) left out by the filters: -storage-classes 2, hidden keys (_*, .*; -include-hidden keeps them) 1, -key-regex 1, -max-size 1, -min-size 1, -modified-before 1"

	code, out, errOut := runCLI(t, "", append(args, "-dry-run")...)
	if code != 0 || !strings.Contains(errOut, "dataset:  1 objects") || !strings.Contains(errOut, "filtered: 7 objects, 2.4 kB, left out by the filters: -storage-classes 2,") {
		t.Errorf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "", append(args, "-claims-table", table, "-run-id", "filters-1")...)
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	if code != 0 || rep.Objects != 1 || rep.RecordsSent != 1 || rep.ObjectsFiltered != 7 || !maps.Equal(rep.FilteredBy, wantBy) || rep.ObjectsArchived != 0 || rep.BytesFiltered != 2446 {
		t.Errorf("exit %d, report %+v\n%s", code, rep.Stats, errOut)
	}
	if !strings.Contains(errOut, "s3sqs fanout: "+wantLine) {
		t.Errorf("stderr does not say what the filters left out:\n%s", errOut)
	}
	if got := localaws.Bodies(localaws.Drain(t, sqsc, target, time.Second)); len(got) != 1 || got[0] != `{"k":"kept"}` {
		t.Errorf("delivered %q, want the kept object's record alone", got)
	}
	code, out, _ = runCLI(t, "", "status", "-run-id", "filters-1", "-claims-table", table)
	if code != 0 || !strings.Contains(out, "filtered   7 objects, 2.4 kB, left out by the filters: -storage-classes 2,") {
		t.Errorf("status: exit %d\n%s", code, out)
	}

	// Filters that keep nothing: an empty dataset, refused, saying what
	// they left out.
	code, _, errOut = runCLI(t, "", "fanout", "-bucket", bucket, "-prefix", "in/", "-target-queue-url", target, "-s3-path-style", "-modified-after", "2100-01-01")
	if code != 1 || !strings.Contains(errOut, "that the filters keep: they left out 8 (-modified-after 7, hidden keys") {
		t.Errorf("filters that keep nothing: exit %d\n%s", code, errOut)
	}
	for _, bad := range [][]string{
		{"-storage-classes", "standard", `"standard" is not an S3 storage class`},
		{"-key-regex", "(", "missing closing )"},
		{"-modified-after", "yesterday", `"yesterday" is not a time such as 2024-01-31T12:00:00Z`},
		{"-min-size", "2MiB", "-max-size", "1MiB", "minSize 2097152 is above maxSize 1048576"},
	} {
		flags, want := bad[:len(bad)-1], bad[len(bad)-1]
		code, _, errOut = runCLI(t, "", append([]string{"fanout", "-bucket", bucket, "-prefix", "in/", "-target-queue-url", target, "-s3-path-style"}, flags...)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", flags, code, want, errOut)
		}
	}
}
