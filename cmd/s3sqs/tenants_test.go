package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
)

// sentEntries is a loopback proxy in front of the SQS stand-in that keeps
// the entries of every SendMessageBatch, as SQS receives them: fauxqs
// keeps no MessageGroupId of a standard queue's message, so the request
// is where a test sees the group.
type sentEntries struct {
	mu      sync.Mutex
	entries []sentEntry
}

type sentEntry struct{ MessageBody, MessageGroupId, MessageDeduplicationId string }

// take returns the entries sent so far and starts again from none.
func (s *sentEntries) take() []sentEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries
	s.entries = nil
	return e
}

func newSentEntries(t *testing.T, upstream string) (*sentEntries, string) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	s := &sentEntries{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessageBatch" {
			var in struct{ Entries []sentEntry }
			if err := json.Unmarshal(body, &in); err != nil {
				t.Errorf("SendMessageBatch body: %v", err)
			}
			s.mu.Lock()
			s.entries = append(s.entries, in.Entries...)
			s.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// TestGroupsOnStandardQueue sends Spark-mapped records to a standard
// queue in record and chunk mode: a record's group_id goes as its
// MessageGroupId (a tenant of SQS's fair queues), a record without one
// has none, no entry has a deduplication id (SQS refuses one on a
// standard queue), and the deduplication field the mapping names is
// reported as left out rather than dropped unsaid.
func TestGroupsOnStandardQueue(t *testing.T) {
	s3c, sqsc := standIns(t)
	put(t, s3c, "tenants/a.jsonl", `{"value":"a","group_id":"tenant-1","id":"r1"}`+"\n"+`{"value":"b","id":"r2"}`+"\n")
	sent, proxy := newSentEntries(t, localaws.Endpoint(t, localaws.EnvSQS))
	t.Setenv("AWS_ENDPOINT_URL_SQS", proxy)
	for _, mode := range []string{"record", "chunk"} {
		target := localaws.CreateQueue(t, sqsc, "-"+mode, nil)
		code, _, errOut := runCLI(t, "", append([]string{"fanout", "-bucket", "lake", "-prefix", "tenants/", "-target-queue-url", target,
			"-s3-path-style", "-mode", mode, "-dedup-id-field", "id"}, spark...)...)
		if code != 0 {
			t.Fatalf("%s mode: exit %d\n%s", mode, code, errOut)
		}
		if mode == "record" && !strings.Contains(errOut, "fields left out of them: id") {
			t.Errorf("record mode: the deduplication field is not named as left out:\n%s", errOut)
		}
		groups := map[string]string{}
		for _, e := range sent.take() {
			if e.MessageDeduplicationId != "" {
				t.Errorf("%s mode: entry %q has deduplication id %q on a standard queue", mode, e.MessageBody, e.MessageDeduplicationId)
			}
			groups[e.MessageBody] = e.MessageGroupId
		}
		want := map[string]string{"a": "tenant-1", "b": ""}
		if mode == "chunk" {
			// One message of both records: no group.
			want = map[string]string{`{"value":"a","group_id":"tenant-1","id":"r1"}` + "\n" + `{"value":"b","id":"r2"}`: ""}
		}
		for body, g := range want {
			if got, ok := groups[body]; !ok || got != g {
				t.Errorf("%s mode: entry %q sent: %v, group %q; want group %q (sent %v)", mode, body, ok, got, g, groups)
			}
		}
		if n := len(localaws.Drain(t, sqsc, target, time.Second)); n != len(want) {
			t.Errorf("%s mode: %d messages on the queue, want %d", mode, n, len(want))
		}
	}
}

// TestGroupsFromPartition sends the objects of a lake laid out by tenant
// (tenant=acme/, tenant=zeta/, and one key without the column) with
// -group-id-partition tenant, to a standard queue in record and chunk
// mode and to a FIFO queue: each message's group is its object's tenant
// (none without the column on the standard queue, the object's group on
// the FIFO one), and the records are sent whole.
func TestGroupsFromPartition(t *testing.T) {
	s3c, sqsc := standIns(t)
	put(t, s3c, "lake/tenant=acme/a.jsonl", `{"n":1}`+"\n")
	put(t, s3c, "lake/tenant=zeta/b.jsonl", `{"n":2}`+"\n")
	put(t, s3c, "lake/other/c.jsonl", `{"n":3}`+"\n")
	sent, proxy := newSentEntries(t, localaws.Endpoint(t, localaws.EnvSQS))
	t.Setenv("AWS_ENDPOINT_URL_SQS", proxy)
	other := engine.GroupID(dataset.Object{Bucket: "lake", Key: "lake/other/c.jsonl"})
	for _, tc := range []struct {
		suffix, mode string
		want         map[string]string
	}{
		{"-record", "record", map[string]string{`{"n":1}`: "acme", `{"n":2}`: "zeta", `{"n":3}`: ""}},
		{"-chunk", "chunk", map[string]string{`{"n":1}`: "acme", `{"n":2}`: "zeta", `{"n":3}`: ""}},
		{"-tenants.fifo", "record", map[string]string{`{"n":1}`: "acme", `{"n":2}`: "zeta", `{"n":3}`: other}},
	} {
		target := localaws.CreateQueue(t, sqsc, tc.suffix, nil)
		code, _, errOut := runCLI(t, "", "fanout", "-bucket", "lake", "-prefix", "lake/", "-target-queue-url", target,
			"-s3-path-style", "-mode", tc.mode, "-group-id-partition", "tenant")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", tc.suffix, code, errOut)
		}
		got := map[string]string{}
		for _, e := range sent.take() {
			got[e.MessageBody] = e.MessageGroupId
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: groups %v, want %v", tc.suffix, got, tc.want)
		}
	}
}

// TestIngestGroupsFromPartition ingests objects as s3ingest does, with
// -group-id-partition tenant: on a standard queue each record carries its
// key's tenant as its group (the request SQS receives says so, since
// fauxqs keeps no group of a standard queue's message), and an object
// without the partition none.
func TestIngestGroupsFromPartition(t *testing.T) {
	s3c, sqsc := standIns(t)
	put(t, s3c, "in/tenant=acme/a.jsonl", `{"n":1}`+"\n"+`{"n":2}`+"\n")
	put(t, s3c, "in/other/c.jsonl", `{"n":3}`+"\n")
	sent, proxy := newSentEntries(t, localaws.Endpoint(t, localaws.EnvSQS))
	t.Setenv("AWS_ENDPOINT_URL_SQS", proxy)
	target := localaws.CreateQueue(t, sqsc, "-ingest-tenants", nil)
	for key, want := range map[string]string{"in/tenant=acme/a.jsonl": "acme", "in/other/c.jsonl": ""} {
		code, _, errOut := runCLI(t, "", "ingest", "-bucket", "lake", "-key", key, "-output-queue-url", target,
			"-s3-path-style", "-group-id-partition", "tenant", "-file-metadata=false", "-partitions", "false")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", key, code, errOut)
		}
		entries := sent.take()
		if len(entries) == 0 {
			t.Errorf("%s: nothing sent", key)
		}
		for _, e := range entries {
			if e.MessageGroupId != want || e.MessageDeduplicationId != "" {
				t.Errorf("%s: %s sent with group %q, dedup %q; want group %q", key, e.MessageBody, e.MessageGroupId, e.MessageDeduplicationId, want)
			}
		}
	}
}
