package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// TestArchivedObjects runs fanout over a prefix on moto_server, which keeps
// storage classes and refuses a GET of an archived object as S3 does
// (InvalidObjectState): one object each in GLACIER, DEEP_ARCHIVE, GLACIER
// restored, GLACIER_IR, INTELLIGENT_TIERING (moto has no archive tiers) and
// STANDARD. The dry run and the run count the two archived ones, by their
// listing and HeadObject, not by a failed GET, and read the other four;
// the run ends without a failure, and status shows them from the claims
// table.
func TestArchivedObjects(t *testing.T) {
	rig := newMotoRig(t, "archived")
	ctx, s3c, sqsc, table, bucket := t.Context(), rig.s3, rig.sqs, rig.table, rig.bucket
	for _, class := range []s3types.StorageClass{"GLACIER", "DEEP_ARCHIVE", "GLACIER_IR", "INTELLIGENT_TIERING", "STANDARD"} {
		rig.put(t, "in/"+string(class)+".jsonl", class, `{"class":"`+string(class)+`"}`+"\n")
	}
	rig.put(t, "in/restored.jsonl", "GLACIER", `{"class":"restored"}`+"\n")
	if _, err := s3c.RestoreObject(ctx, &s3.RestoreObjectInput{Bucket: aws.String(bucket), Key: aws.String("in/restored.jsonl"), RestoreRequest: &s3types.RestoreRequest{Days: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	target := localaws.CreateQueue(t, sqsc, "-target", nil)
	args := []string{"fanout", "-bucket", bucket, "-prefix", "in/", "-target-queue-url", target, "-s3-path-style", "-claims-table", table, "-run-id", "archived-1"}

	manifest := filepath.Join(t.TempDir(), "restore.csv")
	code, out, errOut := runCLI(t, "", append(args, "-dry-run", "-restore-manifest", manifest)...)
	if code != 0 || !strings.Contains(errOut, "archived: 2 objects") || !strings.Contains(errOut, "2 archived objects listed in "+manifest) {
		t.Errorf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	// The restore manifest is S3 Batch Operations' CSV: bucket and
	// URL-encoded key, which a run of it (-manifest) reads back.
	b, err := os.ReadFile(manifest)
	wantRows := fmt.Sprintf("%[1]s,in%%2FDEEP_ARCHIVE.jsonl\n%[1]s,in%%2FGLACIER.jsonl\n", bucket)
	if err != nil || string(b) != wantRows {
		t.Errorf("restore manifest: %q (%v), want %q", b, err, wantRows)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/restore.csv"), Body: strings.NewReader(string(b))}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "", "fanout", "-manifest", "s3://"+bucket+"/manifests/restore.csv", "-target-queue-url", target, "-s3-path-style", "-dry-run")
	if code != 0 || !strings.Contains(errOut, "archived: 2 objects") || !strings.Contains(errOut, "dataset:  0 objects") {
		t.Errorf("dry run of the restore manifest: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "", args...)
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	if code != 0 || rep.ObjectsArchived != 2 || rep.Objects != 4 || rep.RecordsSent != 4 || rep.RecordsFailed != 0 || rep.BytesArchived == 0 {
		t.Errorf("exit %d, report %+v\n%s", code, rep.Stats, errOut)
	}
	if !strings.Contains(errOut, "s3sqs fanout: 2 objects (0.0 kB) archived") {
		t.Errorf("stderr does not say what was archived:\n%s", errOut)
	}
	got := strings.Join(localaws.Bodies(localaws.Drain(t, sqsc, target, time.Second)), "\n")
	for class, want := range map[string]bool{"GLACIER": false, "DEEP_ARCHIVE": false, "restored": true, "GLACIER_IR": true, "INTELLIGENT_TIERING": true, "STANDARD": true} {
		if strings.Contains(got, `"`+class+`"`) != want {
			t.Errorf("record of %s delivered: %v, want %v:\n%s", class, !want, want, got)
		}
	}

	code, out, _ = runCLI(t, "", "status", "-run-id", "archived-1", "-claims-table", table)
	if code != 0 || !strings.Contains(out, "archived   2 objects") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
}
