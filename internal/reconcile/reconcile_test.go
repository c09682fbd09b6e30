package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/s3sqs/s3sqs/internal/reconcile"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/partialbatch"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// failing wraps the claims table and fails the reads of one key's
// markers, as a throttled table would.
type failing struct {
	*claims.Table
	key string
}

func (f failing) IsDone(ctx context.Context, key string) (bool, error) {
	if key == f.key {
		return false, errors.New("throttled")
	}
	return f.Table.IsDone(ctx, key)
}

// TestRunVersions: in a versioned bucket each version is compared by its
// version id, delete markers are counted and skipped, a read that fails is
// counted as failed (not missing), and versions older than MaxAge are
// skipped unless MaxAge is negative.
func TestRunVersions(t *testing.T) {
	s3c := s3.NewFromConfig(localaws.Moto(t), func(o *s3.Options) { o.UsePathStyle = true })
	ddb, name := localaws.ClaimsTable(t)
	table := claims.NewTable(ddb, name, claims.TableOptions{})
	ctx := t.Context()
	bucket := fmt.Sprintf("reconcile-v-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) string {
		out, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.VersionId)
	}
	v1 := put("p/a", "1\n")
	v2 := put("p/a", "2\n")
	gone := put("p/gone", "x\n")
	bad := put("p/bad", "y\n")
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("p/gone")}); err != nil {
		t.Fatal(err)
	}
	// The first version of p/a was ingested; its second was not.
	if err := table.MarkDone(ctx, claims.ObjectKey(bucket, "p/a", v1)); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Run(ctx, s3c, failing{table, claims.ObjectKey(bucket, "p/bad", bad)}, reconcile.Options{Bucket: bucket, Prefix: "p/", Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	missing := map[string]string{}
	for _, o := range rep.Objects {
		missing[o.VersionID] = o.Key
	}
	if rep.Seen != 4 || rep.Ingested != 1 || rep.Missing != 2 || rep.Failed != 1 || rep.SkippedDeleteMarkers != 1 || !rep.DryRun ||
		missing[v2] != "p/a" || missing[gone] != "p/gone" || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "throttled") {
		t.Errorf("report %+v; want 4 versions seen, v1 ingested, v2 and p/gone's version missing, p/bad failed, 1 delete marker", rep)
	}

	// An hour from now, with a 30-minute window, every version is too old;
	// a negative window compares them all again.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	rep, err = reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket, Prefix: "p/", MaxAge: 30 * time.Minute, Now: later})
	if err != nil || rep.SkippedTooOld != 4 || rep.Missing != 0 || rep.MaxAge != "30m0s" {
		t.Errorf("30m window an hour later: %+v, %v; want all 4 skipped as too old", rep, err)
	}
	rep, err = reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket, Prefix: "p/", MaxAge: -1, Now: later})
	if err != nil || rep.SkippedTooOld != 0 || rep.Missing != 3 || rep.MaxAge != "0s" {
		t.Errorf("no window: %+v, %v; want 3 missing, none skipped", rep, err)
	}

	// Filters leave versions out of the comparison, counted by filter: a
	// prefix's by their keys, a manifest's by the size HeadObject gives.
	rep, err = reconcile.Run(ctx, s3c, failing{table, claims.ObjectKey(bucket, "p/bad", bad)},
		reconcile.Options{Bucket: bucket, Prefix: "p/", Filters: dataset.Filters{KeyRegex: "a$"}})
	if err != nil || rep.Seen != 4 || rep.Filtered != 2 || rep.FilteredBy["keyRegex"] != 2 || rep.Missing != 1 || rep.Failed != 0 || rep.Ingested != 1 {
		t.Errorf("keyRegex a$: %+v, %v; want p/gone and p/bad left out, v2 of p/a missing", rep, err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("m.csv"),
		Body: strings.NewReader(bucket + ",p/a\n" + bucket + ",p/bad\n")}); err != nil {
		t.Fatal(err)
	}
	rep, err = reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket, Manifest: "s3://" + bucket + "/m.csv", MaxAge: -1, Filters: dataset.Filters{MinSize: 3}})
	if err != nil || rep.Seen != 2 || rep.Filtered != 2 || rep.FilteredBy["minSize"] != 2 || rep.Missing != 0 {
		t.Errorf("manifest, minSize 3: %+v, %v; want both objects (2 bytes) left out", rep, err)
	}
	if _, err := reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket, Prefix: "p/", Filters: dataset.Filters{StorageClasses: []string{"glacier"}}}); err == nil || !strings.Contains(err.Error(), "not an S3 storage class") {
		t.Errorf("a bad filter: %v; want it refused", err)
	}

	if _, err := reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket + "-none"}); err == nil || !strings.Contains(err.Error(), "list versions") {
		t.Errorf("a missing bucket: %v; want the listing's error", err)
	}
}

// groupChecked sends through the SQS stand-in, which does not check
// message group ids, after checking them as SQS does: 1 to 128 characters,
// each printable ASCII but the space.
type groupChecked struct {
	*sqs.Client
	groups []string
}

func (g *groupChecked) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		id := aws.ToString(e.MessageGroupId)
		g.groups = append(g.groups, id)
		ok := len(id) >= 1 && len(id) <= 128
		for i := 0; i < len(id); i++ {
			ok = ok && id[i] > ' ' && id[i] <= '~'
		}
		if !ok {
			return nil, fmt.Errorf("InvalidParameterValue: Value %q for parameter MessageGroupId is invalid", id)
		}
	}
	return g.Client.SendMessageBatch(ctx, in, opts...)
}

// TestRunFIFOGroupIDs reconciles, to a FIFO ingest queue, objects whose
// keys hold a space, a character outside ASCII, and 200 bytes: each is
// sent, in its object's group (as fanout's replays and records have it),
// where bucket/key as written was refused as a group id.
func TestRunFIFOGroupIDs(t *testing.T) {
	s3c := s3.NewFromConfig(localaws.Moto(t), func(o *s3.Options) { o.UsePathStyle = true })
	ddb, name := localaws.ClaimsTable(t)
	table := claims.NewTable(ddb, name, claims.TableOptions{})
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	ctx := t.Context()
	bucket := fmt.Sprintf("reconcile-fifo-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"p/with space.json", "p/été.json", "p/" + strings.Repeat("k", 200) + ".json"}
	for _, k := range keys {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("{}\n")}); err != nil {
			t.Fatal(err)
		}
	}
	queue := localaws.CreateQueue(t, sqsc, "-ingest.fifo", map[string]string{"FifoQueue": "true"})
	checked := &groupChecked{Client: sqsc}
	sender, err := sqsbatch.New(ctx, checked, sqsbatch.Queue{URL: queue}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Run(ctx, s3c, table, reconcile.Options{Bucket: bucket, Prefix: "p/", SendTo: sender, Region: "eu-west-1"})
	if err != nil || rep.Missing != 3 || rep.Sent != 3 || rep.Failed != 0 {
		t.Fatalf("reconcile to a FIFO queue: %+v, %v; want the 3 objects sent", rep, err)
	}
	for i, k := range keys {
		if want := (dataset.Object{Bucket: bucket, Key: k}).GroupID(); !slices.Contains(checked.groups, want) {
			t.Errorf("object %d (%q): group ids sent %q, want its object's %q", i, k, checked.groups, want)
		}
	}
	msgs := localaws.Drain(t, sqsc, queue, time.Second)
	if len(msgs) != 3 {
		t.Errorf("the FIFO queue holds %d notifications, want 3", len(msgs))
	}
	// Each names the bucket's region, as S3's own do (it was empty).
	for _, m := range msgs {
		n, err := s3event.Parse([]byte(aws.ToString(m.Body)))
		if err != nil || len(n.Objects) != 1 || n.Objects[0].Region != "eu-west-1" {
			t.Errorf("notification %s: %+v, %v; want awsRegion eu-west-1", aws.ToString(m.Body), n, err)
		}
	}
}

// pagedUntil lists two versions a page, and holds its second page until
// the work context it is called with ends, as a function's deadline
// would end it during a long listing.
type pagedUntil struct {
	reconcile.ListAPI
	calls int
}

func (p *pagedUntil) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	p.calls++
	if p.calls == 2 {
		<-ctx.Done()
	}
	in.MaxKeys = aws.Int32(2)
	return p.ListAPI.ListObjectVersions(context.WithoutCancel(ctx), in, opts...)
}

// TestRunStopsAtDeadline lists a prefix whose listing outlasts the work
// context: the notifications of the versions listed before it ended are
// sent (not held back until a listing that never ends), the report says
// where the listing stopped, and a Run from there sends the rest, each
// version once.
func TestRunStopsAtDeadline(t *testing.T) {
	s3c := s3.NewFromConfig(localaws.Moto(t), func(o *s3.Options) { o.UsePathStyle = true })
	ddb, name := localaws.ClaimsTable(t)
	table := claims.NewTable(ddb, name, claims.TableOptions{})
	bucket := fmt.Sprintf("reconcile-d-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("p/k%d", i)), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	sqsc := sqs.NewFromConfig(localaws.SQS(t))
	queue := localaws.CreateQueue(t, sqsc, "-ingest", nil)
	send, err := sqsbatch.New(t.Context(), sqsc, sqsbatch.Queue{URL: queue}, sqsbatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	// Work ends after 1 s, sends after 4 s.
	work, stop := partialbatch.Deadlines(ctx, 5*time.Second, nil)
	defer stop()
	o := reconcile.Options{Bucket: bucket, Prefix: "p/", SendTo: send, MaxAge: -1}
	rep, err := reconcile.Run(work, &pagedUntil{ListAPI: s3c}, table, o)
	if err == nil || rep.NextKeyMarker != "p/k3" || rep.Missing != 4 || rep.Sent != 4 {
		t.Fatalf("stopped run: %+v, %v; want 4 sent of the first two pages, and the marker p/k3", rep, err)
	}
	o.KeyMarker, o.VersionIDMarker = rep.NextKeyMarker, rep.NextVersionIDMarker
	rep, err = reconcile.Run(t.Context(), s3c, table, o)
	if err != nil || rep.Sent != 3 || rep.NextKeyMarker != "" {
		t.Fatalf("run from the marker: %+v, %v; want the other 3 sent", rep, err)
	}
	keys := map[string]int{}
	for _, m := range localaws.Drain(t, sqsc, queue, time.Second) {
		n, err := s3event.Parse([]byte(aws.ToString(m.Body)))
		if err != nil || len(n.Objects) != 1 {
			t.Fatalf("notification %s: %v", aws.ToString(m.Body), err)
		}
		keys[n.Objects[0].Key]++
	}
	if len(keys) != 7 {
		t.Errorf("notified %v; want each of the 7 keys once", keys)
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s notified %d times", k, n)
		}
	}
}
