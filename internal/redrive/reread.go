package redrive

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/worktask"
)

// readAgain reads the records of ps from their objects, pinned to the
// version each failed at, and sends them as the engine does (see
// Options.Mapping and Options.Ingest). A record whose object cannot be
// read at that version is skipped, with why.
func (r *Redriver) readAgain(ctx context.Context, ps []*pending, pace *pace) {
	type group struct {
		source, version string
		ps              []*pending
	}
	var groups []*group
	index := map[string]*group{}
	for _, p := range ps {
		k := p.f.Source + "\x00" + p.f.Version
		g, ok := index[k]
		if !ok {
			g = &group{source: p.f.Source, version: p.f.Version}
			index[k] = g
			groups = append(groups, g)
		}
		g.ps = append(g.ps, p)
	}
	po := r.opts.Plan
	po.ChunkSize, po.RowGroupsPerChunk = 0, math.MaxInt32
	planner := dataset.NewPlanner(r.s3, po)
	for _, g := range groups {
		skip := func(why string) {
			for _, p := range g.ps {
				if p.item.Outcome == "" {
					p.item.Outcome, p.item.Reason = Skipped, whyReread(p)+"and "+why
				}
			}
		}
		obj, err := r.pinned(ctx, g.source, g.version)
		if err != nil {
			skip("the object cannot be read again at its version: " + err.Error())
			continue
		}
		chunks, err := planner.Plan(ctx, obj)
		if err != nil {
			skip("the object cannot be read again: " + err.Error())
			continue
		}
		byChunk := map[int][]*pending{}
		for _, p := range g.ps {
			i := chunkOf(chunks, p.f.Offset)
			if i < 0 {
				p.item.Outcome, p.item.Reason = Skipped, whyReread(p)+fmt.Sprintf("and offset %d is past the end of %s", p.f.Offset, obj)
				continue
			}
			byChunk[i] = append(byChunk[i], p)
		}
		for i, c := range chunks {
			cps := byChunk[i]
			if len(cps) == 0 {
				continue
			}
			if r.opts.DryRun {
				for _, p := range cps {
					p.item.Outcome, p.item.Reason = WouldSend, whyReread(p)+"so it is read again from "+obj.String()
					if readError(p.f.Code) {
						p.item.Reason += ", and sent if it can be read now"
					}
				}
				continue
			}
			offsets := make([]int64, len(cps))
			items := make(map[int64]*Item, len(cps))
			for j, p := range cps {
				offsets[j] = p.f.Offset
				items[p.f.Offset] = &p.item
			}
			if err := pace.wait(ctx, len(cps)); err != nil {
				for _, p := range cps {
					p.item.Outcome, p.item.Reason = Failed, "not sent: "+err.Error()
				}
				continue
			}
			task := worktask.Task{RunID: r.rereadRun(cps[0].f.RunID), Chunk: c, Overrides: r.rereadOverrides()}
			res, missing := r.runner.RunRecords(ctx, task, offsets)
			r.settleRun(items, res, missing, obj)
		}
	}
}

// whyReread says why a record is read from its object, as the start of a
// reason.
func whyReread(p *pending) string {
	switch {
	case p.f.Body == "":
		return "it has no body (it could not be read when it failed), "
	case p.f.Truncated:
		return "its body was cut to fit the failure queue, "
	}
	return "it is read again (-reread), "
}

// chunkOf returns the index of the chunk that holds the record at offset,
// or -1.
func chunkOf(chunks []dataset.Chunk, offset int64) int {
	if len(chunks) == 1 {
		return 0 // a whole object: offsets of rows, or of decompressed bytes
	}
	for i, c := range chunks {
		if offset >= c.Start && offset < c.End {
			return i
		}
	}
	return -1
}

// rereadRun is the run id of a task that reads records again; it names
// nothing that is kept.
func (r *Redriver) rereadRun(runID string) string {
	if engine.CheckRunID(runID) != nil || runID == "" {
		return "redrive"
	}
	return RedriveRunID(runID)
}

// rereadOverrides are the overrides of a task that reads records again:
// record mode, in fanout's mapping or s3ingest's encoding.
func (r *Redriver) rereadOverrides() *worktask.Overrides {
	return &worktask.Overrides{Mode: worktask.ModeRecord, Ingest: r.opts.Ingest}
}

// pinned returns the object source names, pinned as the failure was:
// version is its version id or its ETag (the engine writes either, as
// dataset.Object.Pin), or empty for an object read unpinned.
func (r *Redriver) pinned(ctx context.Context, source, version string) (dataset.Object, error) {
	bucket, key, err := dataset.ParseS3URI(source)
	if err != nil {
		return dataset.Object{}, err
	}
	latest, err := dataset.Head(ctx, r.s3, bucket, key, "")
	if err == nil {
		switch {
		case version == "":
			return dataset.Object{Bucket: bucket, Key: key, Size: latest.Size}, nil
		case latest.VersionID == version:
			return latest, nil
		case latest.ETag == version:
			// Pinned by ETag, as in a bucket without versioning.
			latest.VersionID = ""
			return latest, nil
		}
	}
	if old, verr := r.version(ctx, bucket, key, version); verr == nil {
		return old, nil
	}
	if err != nil {
		return dataset.Object{}, err
	}
	return dataset.Object{}, fmt.Errorf("%s is now at version %s (ETag %s), and %s is neither its ETag nor a version id it keeps: %w",
		source, latest.VersionID, latest.ETag, version, dataset.ErrChanged)
}

// version returns the object's version id, with its size. It asks with a
// one-byte GetObject rather than HeadObject, which some S3 stand-ins
// (gofakes3) answer with the latest version whatever the id.
func (r *Redriver) version(ctx context.Context, bucket, key, id string) (dataset.Object, error) {
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(id), Range: aws.String("bytes=0-0")})
	if err != nil {
		return dataset.Object{}, err
	}
	out.Body.Close()
	obj := dataset.Object{Bucket: bucket, Key: key, VersionID: aws.ToString(out.VersionId), ETag: strings.Trim(aws.ToString(out.ETag), `"`)}
	if obj.VersionID != id {
		return dataset.Object{}, fmt.Errorf("asked for version %s of s3://%s/%s, got %q", id, bucket, key, obj.VersionID)
	}
	// Content-Range: bytes 0-0/SIZE
	cr := aws.ToString(out.ContentRange)
	size, err := strconv.ParseInt(cr[strings.LastIndexByte(cr, '/')+1:], 10, 64)
	if err != nil {
		return dataset.Object{}, fmt.Errorf("s3://%s/%s version %s: Content-Range %q", bucket, key, id, cr)
	}
	obj.Size = size
	return obj, nil
}
