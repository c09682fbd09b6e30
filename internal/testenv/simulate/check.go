package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/sqsextended"
)

// delivery is one record as the target queue holds it.
type delivery struct {
	recordID string
	msgID    string
	lost     bool // in a request whose answer was lost
	body     []byte
	chunk    bool
	ingest   bool
}

// ingestOnly reports whether ds are all in s3ingest's encoding (and there
// is one).
func ingestOnly(ds []delivery) bool {
	for _, d := range ds {
		if !d.ingest {
			return false
		}
	}
	return len(ds) > 0
}

// expected is a record of the scenario with where it lives.
type expected struct {
	Record
	obj *Object
	uri string
}

// check computes the oracle from the generated data and compares the
// outcome with it.
func (w *world) check(out *Outcome) {
	bad := func(format string, a ...any) {
		if len(out.Violations) < 40 {
			out.Violations = append(out.Violations, fmt.Sprintf(format, a...))
		}
	}
	byToken := map[string]*expected{}
	byOffset := map[string]*expected{} // uri \x00 offset
	for i := range w.sc.Objects {
		o := &w.sc.Objects[i]
		uri := "s3://" + dataBucket + "/" + o.Key
		for _, r := range o.Records {
			e := &expected{Record: r, obj: o, uri: uri}
			byToken[r.Token] = e
			byOffset[fmt.Sprintf("%s\x00%d", uri, r.Offset)] = e
		}
	}
	// coverage is how many runs cover each object: each may send it.
	coverage := map[string]int{}
	for _, req := range w.sc.Requests {
		for _, k := range req.Keys {
			coverage[k]++
		}
	}
	for _, n := range w.sc.Notifications {
		// A notification delivered twice is one run: the second copy
		// is a duplicate delivery.
		coverage[n.Key]++
	}
	for k, n := range w.reconciled {
		coverage[k] += n
	}
	// resent is how many more times a record of each object may come: a
	// task that stops its run past the failure budget (or finds it
	// stopped) sends again, when it goes on, what it sent after its first
	// failure. Each try to stop a run counts; a task tries at its read's
	// end and as it settles, so the bound is loose by up to twice.
	resent := map[string]int{}
	for _, req := range w.sc.Requests {
		for _, k := range req.Keys {
			if w.dynamo != nil {
				resent[k] += w.dynamo.Stops[req.RunID]
			}
		}
	}

	for _, e := range byToken {
		if coverage[e.obj.Key] > 0 {
			out.Records++
		}
	}
	// What the target holds, record by record.
	got := map[string][]delivery{}
	chunkIDs := map[string]string{} // chunk mode: record id -> tokens
	for _, m := range w.sqs.Messages(w.target) {
		body := m.Body
		if sqsextended.Marked(m.Attributes) {
			p, err := sqsextended.ParsePointer(body)
			if err != nil {
				bad("message %s: offloaded but its pointer does not parse: %v", m.ID, err)
				continue
			}
			b, ok := w.s3.Object(p.Bucket, p.Key)
			if !ok {
				bad("message %s: its payload %s is missing", m.ID, p)
				continue
			}
			body = string(b)
		}
		rid := m.Attributes[engine.AttrRecordID]
		lost := w.faults.Lost(m.ID)
		lines := []string{body}
		_, chunk := m.Attributes[engine.AttrCount]
		// s3ingest's messages (and fanout's in its encoding) carry only
		// the record id: their bodies are the record as a JSON object.
		_, hasSource := m.Attributes[engine.AttrSource]
		ingestBody := !hasSource
		if chunk {
			lines = strings.Split(body, "\n")
			tokens := make([]string, len(lines))
			for i, l := range lines {
				tokens[i] = tokenOf([]byte(l))
			}
			all := strings.Join(tokens, ",")
			if prev, ok := chunkIDs[rid]; ok && prev != all {
				bad("chunk-mode messages share record id %s but carry different records: [%.200s] and [%.200s]", rid, prev, all)
			}
			chunkIDs[rid] = all
		}
		for _, l := range lines {
			out.Deliveries++
			tok := tokenOf([]byte(l))
			e := byToken[tok]
			if e == nil {
				bad("delivered a record that is not in the data: %.200q", l)
				continue
			}
			if !sameBody(e, []byte(l), ingestBody) {
				at := 0
				for at < len(l) && at < len(e.Body) && l[at] == e.Body[at] {
					at++
				}
				bad("record %s of %s (offset %d, %s, %s) delivered garbled: %d bytes, want %d; from byte %d got %.80q, want %.80q", tok, e.uri, e.Offset, e.obj.Format, e.Class,
					len(l), len(e.Body), at, l[at:], e.Body[min(at, len(e.Body)):])
				continue
			}
			got[tok] = append(got[tok], delivery{recordID: rid, msgID: m.ID, lost: lost, body: []byte(l), chunk: chunk, ingest: ingestBody})
		}
	}

	fails := w.failures(bad)
	for tok, e := range byToken {
		ds := got[tok]
		if coverage[e.obj.Key] == 0 {
			if len(ds) > 0 {
				bad("record %s of %s delivered, but no request names its object", tok, e.uri)
			}
			continue
		}
		where := fmt.Sprintf("record %s of %s (offset %d, %s, %s)", tok, e.uri, e.Offset, e.obj.Format, e.Class)
		fs := fails[fmt.Sprintf("%s\x00%d", e.uri, e.Offset)]
		if e.obj.Format == "csv" && e.BlankAt > 0 {
			fs = append(fs, fails[fmt.Sprintf("%s\x00%d", e.uri, e.BlankAt)]...)
		}
		fs = append(fs, fails["token\x00"+tok]...)
		codes, reasons := []string{}, []string{}
		for _, f := range fs {
			codes = append(codes, f.Code)
			reasons = append(reasons, f.Code+": "+f.Message)
		}
		mustDeliver := e.Fail == "" && !e.Either || e.Fail == CodeTooLarge && w.sc.Settings.Offload
		if w.sc.Settings.FIFO && len(ds) == 0 && slices.Contains(codes, "MessageGroupFailed") && w.failsBefore(e, got) {
			// On a FIFO queue the records after one that failed for
			// good fail with it, to keep their order (sqsbatch
			// CodeGroupFailed); they are on the failure output.
			continue
		}
		if len(ds) == 0 && len(codes) > 0 && w.faults.Stats.PutRefused+w.faults.Stats.PutFailed > 0 && !slices.ContainsFunc(codes, func(c string) bool { return c != "OffloadFailed" }) {
			// A payload S3 refused, or failed on every attempt of the
			// SDK's retries, is on the failure output as OffloadFailed,
			// to redrive, as an entry SQS refuses after MAX_ATTEMPTS is.
			continue
		}
		if e.Fail == failUnread {
			if !w.unreadOnFailureOutput(e, fails) && len(ds) == 0 {
				bad("%s: after the end of the truncated stream, and no failure on the failure output covers it", where)
			}
			continue
		}
		switch {
		case mustDeliver && len(ds) == 0 && len(fs) > 0:
			bad("%s: readable but not delivered; on the failure output with %q", where, reasons)
		case mustDeliver && len(ds) == 0:
			bad("%s: lost: neither delivered nor on the failure output", where)
		case e.Either && len(ds) == 0 && !slices.Contains(codes, CodeTooLarge):
			bad("%s: near the size limit, neither delivered nor on the failure output as too large (%q)", where, reasons)
		case e.Fail == CodeInvalidChars && ingestOnly(ds):
			// s3ingest's JSON escapes the character: the record is
			// deliverable in its encoding.
		case !mustDeliver && !e.Either && len(ds) > 0:
			bad("%s: delivered although it must fail with %s", where, e.Fail)
		case !mustDeliver && !e.Either && !slices.Contains(codes, e.Fail):
			bad("%s: not on the failure output with %s (codes there: %v)", where, e.Fail, codes)
		}
		ids := map[string]bool{}
		lost := 0
		for _, d := range ds {
			if !d.chunk {
				ids[d.recordID] = true
			}
			if d.lost {
				lost++
			}
		}
		if len(ids) > 1 {
			bad("%s: delivered under %d record ids %v", where, len(ids), keys(ids))
		}
		if w.sc.Settings.Claims && mustDeliver && len(ds) > 0 && len(fs) > 0 && coverage[e.obj.Key] == 1 {
			// Redriving the failure output would send it again.
			bad("%s: delivered, and on the failure output too with %v", where, codes)
		}
		if w.sc.Settings.Claims && len(ds) > coverage[e.obj.Key]+lost+resent[e.obj.Key] {
			bad("%s: delivered %d times by %d runs, %d of them explained by lost answers, %d by budget stops", where, len(ds), coverage[e.obj.Key], lost, resent[e.obj.Key])
		}
	}

	// The run report lists each unreadable record exactly once per run.
	if w.sc.Settings.Report {
		w.checkReport(byOffset, bad)
	}
	// No payload object is ever rewritten with other bytes.
	seen := map[string][]byte{}
	for _, wr := range w.s3.Writes() {
		if wr.Bucket != auxBucket || !strings.HasPrefix(wr.Key, offPrefix) {
			continue
		}
		if prev, ok := seen[wr.Key]; ok && !bytes.Equal(prev, wr.Body) {
			bad("offloaded payload s3://%s/%s rewritten with other bytes (%d, then %d bytes)", wr.Bucket, wr.Key, len(prev), len(wr.Body))
		}
		seen[wr.Key] = wr.Body
	}
}

// failures reads the failure output: by object URI and offset.
func (w *world) failures(bad func(string, ...any)) map[string][]engine.Failure {
	out := map[string][]engine.Failure{}
	add := func(b []byte) {
		var f engine.Failure
		if err := json.Unmarshal(b, &f); err != nil {
			bad("failure output holds a line that is not a Failure: %v: %.200q", err, b)
			return
		}
		k := fmt.Sprintf("%s\x00%d", f.Source, f.Offset)
		out[k] = append(out[k], f)
		// A chunk-mode message that failed holds several records: each
		// is on the failure output by its token too.
		if lines := strings.Split(f.Body, "\n"); len(lines) > 1 {
			for _, l := range lines {
				if tok := tokenOf([]byte(l)); tok != "" {
					out["token\x00"+tok] = append(out["token\x00"+tok], f)
				}
			}
		}
	}
	if w.failQ != "" {
		for _, m := range w.sqs.Messages(w.failQ) {
			add([]byte(m.Body))
		}
		return out
	}
	for _, k := range w.s3.Keys(auxBucket, failPrefix+"/") {
		b, _ := w.s3.Object(auxBucket, k)
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			add(sc.Bytes())
		}
	}
	return out
}

// checkReport holds the run report's failed tasks to the unreadable
// records of each run.
func (w *world) checkReport(byOffset map[string]*expected, bad func(string, ...any)) {
	for _, req := range w.sc.Requests {
		if req.Replay {
			continue
		}
		count := map[string]int{}
		for _, k := range w.s3.Keys(auxBucket, repPrefix+"/"+req.RunID+"/failed/") {
			b, _ := w.s3.Object(auxBucket, k)
			var ft engine.FailedTask
			if err := json.Unmarshal(b, &ft); err != nil {
				bad("run report %s does not parse: %v", k, err)
				continue
			}
			for _, f := range ft.Failures {
				if f.Code == CodeUnreadable {
					count[fmt.Sprintf("%s\x00%d", ft.Task.Chunk.URI(), f.Offset)]++
				}
			}
		}
		for _, k := range req.Keys {
			for _, o := range w.sc.Objects {
				if o.Key != k {
					continue
				}
				uri := "s3://" + dataBucket + "/" + k
				for _, r := range o.Records {
					if r.Fail != CodeUnreadable {
						continue
					}
					n := count[fmt.Sprintf("%s\x00%d", uri, r.Offset)]
					if o.Format == "csv" && r.BlankAt > 0 {
						n += count[fmt.Sprintf("%s\x00%d", uri, r.BlankAt)]
					}
					// A report written whose answer was lost fails its
					// task, and the next attempt writes it again.
					if n != 1 && (n == 0 || w.faults.Stats.PutLost == 0) {
						bad("run %s: unreadable record %s of %s (offset %d, %s) is %d times in the run report, want once", req.RunID, r.Token, uri, r.Offset, r.Class, n)
					}
				}
			}
		}
	}
}

// tokenOf finds the record token in a delivered record: the "id" of a
// JSON object, or the first word of a text line.
func tokenOf(b []byte) string {
	var v struct {
		ID   string  `json:"id"`
		Line *string `json:"line"`
	}
	if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &v) == nil {
		if v.Line != nil {
			return tokenOf([]byte(*v.Line))
		}
		return v.ID
	}
	tok, _, _ := strings.Cut(string(b), " ")
	return tok
}

// sameBody compares a delivered record with the generated one: bytes for
// JSON Lines and text, JSON values for CSV rows.
// In s3ingest's encoding (ingest) every record is a JSON object: a text
// line is {"line": ...}, and _file may be added.
func sameBody(e *expected, got []byte, ingest bool) bool {
	if ingest {
		var m map[string]any
		if json.Unmarshal(got, &m) != nil {
			return false
		}
		delete(m, "_file")
		if e.obj.Format == "text" {
			line, ok := m["line"].(string)
			return ok && len(m) == 1 && line == string(e.Body)
		}
		var want map[string]any
		return json.Unmarshal(e.Body, &want) == nil && fmt.Sprint(want) == fmt.Sprint(m)
	}
	if e.obj.Format == "parquet" {
		var a, b map[string]any
		return json.Unmarshal(e.Body, &a) == nil && json.Unmarshal(got, &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
	}
	if e.obj.Format != "csv" {
		return bytes.Equal(e.Body, got)
	}
	var a, b map[string]string
	return json.Unmarshal(e.Body, &a) == nil && json.Unmarshal(got, &b) == nil && fmt.Sprint(a) == fmt.Sprint(b) && len(a) == len(b)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// failsBefore reports whether a record before e in its object must fail
// for good (or may, near the size limit, and was not delivered).
func (w *world) failsBefore(e *expected, got map[string][]delivery) bool {
	for _, r := range e.obj.Records {
		if r.Offset >= e.Offset {
			break
		}
		offloaded := r.Fail == CodeTooLarge && w.sc.Settings.Offload
		if (r.Fail != "" && !offloaded || r.Either) && len(got[r.Token]) == 0 {
			return true
		}
	}
	return false
}

// unreadOnFailureOutput reports whether a failure of e's object is on the
// failure output at an offset from the end of the last record read before
// e to e's own.
func (w *world) unreadOnFailureOutput(e *expected, fails map[string][]engine.Failure) bool {
	from := int64(0)
	for _, r := range e.obj.Records {
		if r.Offset >= e.Offset {
			break
		}
		if r.Fail != failUnread {
			from = r.Offset + 1
		}
	}
	for k, fs := range fails {
		uri, _, _ := strings.Cut(k, "\x00")
		if uri != e.uri {
			continue
		}
		for _, f := range fs {
			if f.Offset >= from && f.Offset <= e.Offset {
				return true
			}
		}
	}
	return false
}
