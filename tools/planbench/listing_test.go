package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

// small is a space of 2,500 keys over three days (1,000 a day).
var small = keySpace{root: "t/", ext: "jsonl", n: 2500, perDay: 1000}

func TestKeySpace(t *testing.T) {
	for i := 1; i < small.n; i++ {
		if a, b := small.key(i-1), small.key(i); a >= b {
			t.Fatalf("key %d %q is not before key %d %q", i-1, a, i, b)
		}
	}
	for _, i := range []int{0, 999, 1000, 2499} {
		if got, ok := small.index(small.key(i)); !ok || got != i {
			t.Errorf("index(key(%d)) = %d, %v", i, got, ok)
		}
	}
	if k := small.key(1000); k != "t/date=2024-01-02/part-0000000.jsonl" {
		t.Errorf("key(1000) = %q", k)
	}
	for _, k := range []string{"", "t/", "t/date=2024-01-03/part-0000500.jsonl", "t/date=2024-01-01/part-0000001.csv",
		"t/date=2024-01-01/part-1.jsonl", "c/date=2024-01-01/part-0000001.jsonl", "t/date=2023-12-31/part-0000001.jsonl"} {
		if i, ok := small.index(k); ok {
			t.Errorf("index(%q) = %d, want not a key of the space", k, i)
		}
	}
	if b := small.body(7); int64(len(b)) != small.size(7) || !strings.HasPrefix(string(b), "id,user,event\n") || b[len(b)-1] != '\n' {
		t.Errorf("body(7) is %d bytes %.20q..., want %d bytes with the header", len(b), b, small.size(7))
	}
}

func TestPage(t *testing.T) {
	token := func(key string) string {
		p, err := small.page(listQuery{StartAfter: key, MaxKeys: 1})
		if err != nil || p.NextToken == "" {
			t.Fatalf("no token after %q: %v", key, err)
		}
		return p.NextToken
	}
	day2 := "t/date=2024-01-02/"
	tests := []struct {
		name        string
		q           listQuery
		first, n    int // the first index and the number of keys
		truncated   bool
		wantErr     bool
		wantNoToken bool
	}{
		{name: "first page", q: listQuery{Prefix: "t/", MaxKeys: -1}, first: 0, n: 1000, truncated: true},
		{name: "MaxKeys above 1000 is 1000", q: listQuery{MaxKeys: 5000}, first: 0, n: 1000, truncated: true},
		{name: "MaxKeys", q: listQuery{MaxKeys: 7}, first: 0, n: 7, truncated: true},
		{name: "StartAfter a key", q: listQuery{StartAfter: small.key(41), MaxKeys: 3}, first: 42, n: 3, truncated: true},
		{name: "StartAfter between keys", q: listQuery{StartAfter: small.key(41) + "x", MaxKeys: 3}, first: 42, n: 3, truncated: true},
		{name: "token", q: listQuery{Token: token(small.key(1499)), MaxKeys: -1}, first: 1501, n: 999, truncated: false, wantNoToken: true},
		{name: "token wins over StartAfter", q: listQuery{Token: token(small.key(9)), StartAfter: small.key(100), MaxKeys: 2}, first: 11, n: 2, truncated: true},
		{name: "last page", q: listQuery{StartAfter: small.key(2489), MaxKeys: 10}, first: 2490, n: 10, truncated: false, wantNoToken: true},
		{name: "prefix of one day", q: listQuery{Prefix: day2, MaxKeys: -1}, first: 1000, n: 1000, truncated: false, wantNoToken: true},
		{name: "prefix and StartAfter before it", q: listQuery{Prefix: day2, StartAfter: small.key(3), MaxKeys: 5}, first: 1000, n: 5, truncated: true},
		{name: "prefix and StartAfter inside it", q: listQuery{Prefix: day2, StartAfter: small.key(1990), MaxKeys: 50}, first: 1991, n: 9, truncated: false},
		{name: "prefix that matches nothing", q: listQuery{Prefix: "u/", MaxKeys: -1}, n: 0},
		{name: "StartAfter past the end", q: listQuery{StartAfter: "z", MaxKeys: -1}, n: 0},
		{name: "MaxKeys 0", q: listQuery{MaxKeys: 0}, n: 0},
		{name: "bad token", q: listQuery{Token: "%%%", MaxKeys: -1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := small.page(tt.q)
			if tt.wantErr {
				if !errors.Is(err, errBadToken) {
					t.Fatalf("err = %v, want errBadToken", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Keys) != tt.n || p.Truncated != tt.truncated {
				t.Fatalf("%d keys, truncated %v; want %d, %v", len(p.Keys), p.Truncated, tt.n, tt.truncated)
			}
			for j, i := range p.Keys {
				if i != tt.first+j {
					t.Fatalf("key %d of the page is %d, want %d", j, i, tt.first+j)
				}
			}
			if (p.NextToken == "") != !p.Truncated {
				t.Errorf("token %q with truncated %v", p.NextToken, p.Truncated)
			}
		})
	}
}

// TestPagesCoverEveryKey walks the whole space by tokens, 333 keys a page.
func TestPagesCoverEveryKey(t *testing.T) {
	q := listQuery{Prefix: "t/", MaxKeys: 333}
	next := 0
	for pages := 0; ; pages++ {
		p, err := small.page(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range p.Keys {
			if i != next {
				t.Fatalf("page %d: key %d where %d was due", pages, i, next)
			}
			next++
		}
		if !p.Truncated {
			break
		}
		q.Token = p.NextToken
	}
	if next != small.n {
		t.Errorf("%d keys listed, want %d", next, small.n)
	}
}

// handlerClient is an HTTP client that hands requests to a handler in
// this process, with no network.
type handlerClient struct{ h http.Handler }

func (c handlerClient) Do(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// TestServerWithSDK lists the space through the AWS SDK's own paginator
// and dataset.List (so that the XML is what the SDK parses) and reads a
// CSV header with a ranged, pinned GetObject, as fanout's planner does.
func TestServerWithSDK(t *testing.T) {
	csvSpace := keySpace{root: "c/", ext: "csv", n: 30, perDay: 10}
	ls := &listingServer{buckets: map[string]keySpace{"b": small, "c": csvSpace}}
	cfg := localaws.Config("http://127.0.0.1:9")
	cfg.HTTPClient = handlerClient{ls}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	ctx := context.Background()

	src := dataset.Source{Bucket: "b", Prefix: "t/date=2024-01-02/"}
	n := 0
	for l, err := range dataset.List(ctx, c, src, dataset.Cursor{After: small.key(1499)}, dataset.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		i := 1500 + n
		if l.Key != small.key(i) || l.Size != small.size(i) || l.ETag != small.etag(i) || l.Next.After != l.Key {
			t.Fatalf("listed %+v, want key %d %s size %d etag %s", l, i, small.key(i), small.size(i), small.etag(i))
		}
		n++
	}
	if n != 500 {
		t.Errorf("dataset.List from the middle of a day listed %d keys, want 500", n)
	}
	pages := 0
	for p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("b")}); p.HasMorePages(); pages++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if int(aws.ToInt32(out.KeyCount)) != len(out.Contents) {
			t.Errorf("KeyCount %d for %d keys", aws.ToInt32(out.KeyCount), len(out.Contents))
		}
	}
	if pages != 3 || ls.lists.Load() != 1+3 {
		t.Errorf("the paginator read %d pages (%d LISTs in all), want 3 (and 4)", pages, ls.lists.Load())
	}

	obj := dataset.Object{Bucket: "c", Key: csvSpace.key(3), Size: csvSpace.size(3), ETag: csvSpace.etag(3)}
	chunks, err := dataset.NewPlanner(c, dataset.PlanOptions{CSV: dataset.CSVOptions{NoQuotedNewlines: true}}).Plan(ctx, obj)
	if err != nil || len(chunks) != 1 || chunks[0].CSV == nil || strings.Join(chunks[0].CSV.Header, ",") != "id,user,event" {
		t.Fatalf("plan %s: %+v, %v; want one chunk with the header", obj.Key, chunks, err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("c"), Key: aws.String(obj.Key), Range: aws.String("bytes=3-9")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	if string(b) != string(csvSpace.body(3)[3:10]) {
		t.Errorf("bytes 3-9 are %q", b)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("c"), Key: aws.String(obj.Key), IfMatch: aws.String(`"0000"`)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "PreconditionFailed" {
		t.Errorf("GetObject with another ETag: %v, want PreconditionFailed", err)
	}
}

func TestTally(t *testing.T) {
	space := keySpace{root: "t/", ext: "jsonl", n: 4, perDay: 10}
	tests := []struct {
		name string
		add  func(tl *tally)
		want checkResult
		pass bool
	}{
		{name: "each key once", add: func(tl *tally) {
			for i := range 4 {
				tl.add(space.key(i), "m"+space.key(i), true)
			}
		}, want: checkResult{Keys: 4, Tasks: 4}, pass: true},
		{name: "a message received twice is one task", add: func(tl *tally) {
			for i := range 4 {
				tl.add(space.key(i), "m"+space.key(i), true)
			}
			tl.add(space.key(2), "m"+space.key(2), true)
		}, want: checkResult{Keys: 4, Tasks: 4, Redelivered: 1}, pass: true},
		{name: "missing and doubled", add: func(tl *tally) {
			tl.add(space.key(0), "a", true)
			tl.add(space.key(1), "b", true)
			tl.add(space.key(1), "c", true)
			tl.add(space.key(2), "d", true)
		}, want: checkResult{Keys: 4, Tasks: 4, Missing: 1, Doubled: 1}},
		{name: "unknown key and partial chunk", add: func(tl *tally) {
			for i := range 4 {
				tl.add(space.key(i), "m"+space.key(i), i != 3)
			}
			tl.add("t/other", "x", true)
		}, want: checkResult{Keys: 4, Tasks: 5, Unknown: 1, Partial: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTally(space)
			tt.add(tl)
			got := tl.result()
			if got != tt.want || got.Pass() != tt.pass {
				t.Errorf("result %+v (pass %v), want %+v (pass %v)", got, got.Pass(), tt.want, tt.pass)
			}
		})
	}
}
