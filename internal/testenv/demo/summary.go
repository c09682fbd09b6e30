package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/s3sqs/s3sqs/internal/redrive"
	"github.com/s3sqs/s3sqs/internal/testenv/esm"
	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/rie"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/s3event"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// Summary is what the demo saw, and its accounting of every record.
type Summary struct {
	gen *generated

	Ingest, Fanout         esm.Stats
	IngestTime, FanoutTime time.Duration
	Total                  time.Duration
	FanoutPlan             engine.Report

	// IngestRequests and FanoutRequests are the SendMessageBatch requests
	// the functions reported in their summary lines.
	IngestRequests, FanoutRequests int64
	IngestRecordsRead              int64
	FanoutRecordsRead              int64

	// Delivered counts distinct records on the output and target queues.
	Delivered int
	// OnFailureOutput are the records either function refused, with
	// their reasons.
	OnFailureOutput []engine.Failure
	// InDLQ counts the records of objects whose notification is in the
	// ingest DLQ; DLQ lists what is there and why.
	InDLQ int
	DLQ   []string
	// WorkDLQ counts chunk tasks that ended in the work DLQ.
	WorkDLQ int
	// Missing lists records that are nowhere.
	Missing []string
	// Offloaded are the records that arrived as SQS Extended Client
	// pointers, and were read back.
	Offloaded []offloaded
	// Redrive is what the closing redrive of the failure output did;
	// Redriven counts the records it delivered.
	Redrive  *redrive.Summary
	Redriven int
}

// offloaded is a record that arrived as a pointer: where, and its size.
type offloaded struct {
	pointer sqsextended.Pointer
	size    int
}

// OK reports whether every generated record is accounted for.
func (s *Summary) OK() bool { return len(s.Missing) == 0 }

// collect drains the output, target, failure queues and DLQs and accounts
// for every generated record.
func (s *Summary) collect(ctx context.Context, st *stack, fns map[string]*rie.Runtime) error {
	// A record too large for its queue arrives as a pointer: it is read
	// back from S3, and must then be the record itself.
	resolver := sqsextended.NewResolver(st.motoS3, sqsextended.ResolverOptions{})
	resolve := func(m sqstypes.Message) (string, error) {
		body, ptr, err := resolver.Resolve(ctx, m)
		if err != nil {
			return "", fmt.Errorf("demo: resolve a message: %w", err)
		}
		if ptr != nil {
			var rec struct {
				Doc string `json:"doc"`
			}
			if json.Unmarshal([]byte(body), &rec) != nil || rec.Doc != strings.Repeat("x", bigRecordSize) {
				s.Missing = append(s.Missing, fmt.Sprintf("%s does not hold the large record", ptr))
			}
			s.Offloaded = append(s.Offloaded, offloaded{pointer: *ptr, size: len(body)})
		}
		return body, nil
	}
	// s3ingest's records carry their object and offset in _file.
	offsets := map[string]map[int64]bool{}
	for _, m := range localaws.ReceiveAll(ctx, st.sqs, st.output, time.Minute) {
		body, err := resolve(m)
		if err != nil {
			return err
		}
		var rec struct {
			File struct {
				Key    string `json:"key"`
				Offset *int64 `json:"offset"`
			} `json:"_file"`
		}
		if json.Unmarshal([]byte(body), &rec) != nil || rec.File.Offset == nil {
			continue
		}
		if offsets[rec.File.Key] == nil {
			offsets[rec.File.Key] = map[int64]bool{}
		}
		offsets[rec.File.Key][*rec.File.Offset] = true
	}
	bodies := map[string]bool{}
	for _, m := range localaws.ReceiveAll(ctx, st.sqs, st.target, time.Minute) {
		body, err := resolve(m)
		if err != nil {
			return err
		}
		bodies[body] = true
	}
	// Both functions write the same failure output: fanout's records are
	// known by body, s3ingest's by object and offset.
	refused := map[string]bool{}
	refusedAt := map[string]map[int64]bool{}
	for _, m := range localaws.ReceiveAll(ctx, st.sqs, st.failed, time.Minute) {
		var f engine.Failure
		if json.Unmarshal([]byte(aws.ToString(m.Body)), &f) != nil {
			continue
		}
		s.OnFailureOutput = append(s.OnFailureOutput, f)
		refused[f.Body] = true
		key := strings.TrimPrefix(f.Source, "s3://"+bucket+"/")
		if refusedAt[key] == nil {
			refusedAt[key] = map[int64]bool{}
		}
		refusedAt[key][f.Offset] = true
	}
	dead := map[string]bool{}
	for _, m := range localaws.ReceiveAll(ctx, st.motoSQS, st.ingestDLQ, time.Minute) {
		body := aws.ToString(m.Body)
		n, err := s3event.Parse([]byte(body))
		if err != nil {
			s.DLQ = append(s.DLQ, fmt.Sprintf("%q: %v", truncate(body, 40), shortErr(err)))
			continue
		}
		for _, o := range n.Objects {
			dead[o.Key] = true
			s.DLQ = append(s.DLQ, fmt.Sprintf("%s: a bad record (see s3ingest.log)", short(o.Key)))
		}
	}
	s.WorkDLQ = len(localaws.ReceiveAll(ctx, st.sqs, st.workDLQ, time.Minute))

	for _, o := range s.gen.objects {
		if o.bodies != nil {
			for _, b := range o.bodies {
				switch {
				case bodies[b]:
					s.Delivered++
				case bodies[strings.ReplaceAll(b, "\x00", "\uFFFD")]:
					// Refused for its NUL, sent again by the redrive.
					s.Delivered++
					s.Redriven++
				case refused[b]:
				default:
					s.Missing = append(s.Missing, fmt.Sprintf("%s: %q", o.key, b))
				}
			}
			continue
		}
		got, failed := len(offsets[o.key]), len(refusedAt[o.key])
		switch {
		case dead[o.key]:
			s.InDLQ += o.records
		case got+failed == o.records:
			s.Delivered += got
		default:
			s.Delivered += got
			s.Missing = append(s.Missing, fmt.Sprintf("%s: %d of %d records", o.key, o.records-got-failed, o.records))
		}
	}
	if !containsGarbage(s.DLQ, s.gen.garbage) {
		s.Missing = append(s.Missing, "the unparseable notification is not in the ingest DLQ")
	}
	s.readLogs(fns)
	return nil
}

func containsGarbage(dlq []string, garbage string) bool {
	for _, d := range dlq {
		if strings.Contains(d, truncate(garbage, 40)) {
			return true
		}
	}
	return false
}

// readLogs sums what the functions reported in their summary lines.
func (s *Summary) readLogs(fns map[string]*rie.Runtime) {
	s.IngestRequests, s.IngestRecordsRead = sumSummaries(fns["s3ingest"].Logs(), "s3ingest", "records")
	s.FanoutRequests, s.FanoutRecordsRead = sumSummaries(fns["fanout"].Logs(), "fanout", "recordsRead")
}

// sumSummaries adds up the requests and the records field of the summary
// lines of function in logs.
func sumSummaries(logs, function, records string) (requests, recs int64) {
	for line := range strings.SplitSeq(logs, "\n") {
		var l struct {
			Message string         `json:"message"`
			Summary map[string]any `json:"summary"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == function+" invocation" {
			n, _ := l.Summary["requests"].(float64)
			r, _ := l.Summary[records].(float64)
			requests += int64(n)
			recs += int64(r)
		}
	}
	return requests, recs
}

// Print writes the summary a person reads at a glance.
func (s *Summary) Print(w io.Writer) {
	ingestObjs, fanoutObjs, ingestRecs, fanoutRecs := 0, 0, 0, 0
	for _, o := range s.gen.objects {
		if o.bodies != nil {
			fanoutObjs++
			fanoutRecs += o.records
		} else {
			ingestObjs++
			ingestRecs += o.records
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tin\tout\tSQS requests\tfailures\ttime")
	fmt.Fprintf(tw, "s3ingest\t%s, %s (%s)\t%s read, %s\t%d\t%s retried, %d in DLQ\t%s\n",
		plural(ingestObjs, "object"), plural(ingestRecs, "record"), plural(s.Ingest.Received, "delivery"),
		plural(s.IngestRecordsRead, "record"), plural(s.Ingest.Invocations, "invocation"),
		s.IngestRequests, plural(s.Ingest.Failed, "message"), len(s.DLQ), s.IngestTime.Round(time.Millisecond))
	// fanout's invocations are its request's and the work queue's.
	fmt.Fprintf(tw, "fanout\t%s, %s, %s\t%s read, %s\t%d\t%s on the failure output (both functions), %s in DLQ\t%s\n",
		plural(fanoutObjs, "object"), plural(fanoutRecs, "record"), plural(s.FanoutPlan.TasksQueued, "task"),
		plural(s.FanoutRecordsRead, "record"), plural(s.Fanout.Invocations+1, "invocation"),
		s.FanoutRequests, plural(len(s.OnFailureOutput), "record"), plural(s.WorkDLQ, "task"), s.FanoutTime.Round(time.Millisecond))
	tw.Flush()
	fmt.Fprintln(w)
	sort.Strings(s.DLQ)
	for _, d := range s.DLQ {
		fmt.Fprintf(w, "ingest DLQ: %s\n", d)
	}
	for _, f := range s.OnFailureOutput {
		// A reader's message names the object again: keep what follows.
		reason := fmt.Sprintf("offset %d: %s", f.Offset, f.Message)
		if i := strings.Index(f.Message, " at offset "); i >= 0 {
			reason = f.Message[i+len(" at "):]
		}
		fmt.Fprintf(w, "failure output: %s: %s at %s\n", short(f.Source), f.Code, truncate(reason, 90))
	}
	if s.Redrive != nil {
		fmt.Fprintf(w, "redrive: the failure output's InvalidCharacters records sent again with U+FFFD: %d sent, %d skipped (other reasons stay on the failure output), %d failed; %d now delivered\n",
			s.Redrive.Sent, s.Redrive.Skipped, s.Redrive.Failed, s.Redriven)
	}
	for _, o := range s.Offloaded {
		fmt.Fprintf(w, "offloaded: a record of %d bytes arrived as a pointer to %s and was read back whole\n", o.size, truncate(o.pointer.String(), 60))
	}
	for _, m := range s.Missing {
		fmt.Fprintf(w, "MISSING: %s\n", m)
	}
	total := s.gen.total()
	verdict := "every record is accounted for"
	if !s.OK() {
		verdict = "RECORDS ARE MISSING"
	}
	fmt.Fprintf(w, "accounted: %d of %s: %d delivered, %d on the failure output, %d in objects whose notification is in the DLQ; %s (%s)\n",
		s.Delivered+len(s.OnFailureOutput)+s.InDLQ, plural(total, "record"), s.Delivered, len(s.OnFailureOutput), s.InDLQ, verdict, s.Total.Round(time.Millisecond))
}

// plural is n and word, in the plural unless n is 1.
func plural[N ~int | ~int64](n N, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func shortErr(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && i < 30 {
		msg = msg[i+2:]
	}
	return truncate(msg, 60)
}
