package main

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// keySpace is a synthetic bucket of n objects, Hive-style partitioned by
// day: key i is <root>date=<day>/part-<NNNNNNN>.<ext>, perDay keys a day
// from 2024-01-01. Keys are generated in sorted order, so that key i < key
// i+1 as S3 compares them (bytes), and nothing is stored: a listing of a
// million keys costs the server no memory.
type keySpace struct {
	root   string
	ext    string
	n      int
	perDay int
}

// firstDay is the day of key 0.
var firstDay = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// key returns key i.
func (s keySpace) key(i int) string {
	day := firstDay.AddDate(0, 0, i/s.perDay).Format(time.DateOnly)
	return fmt.Sprintf("%sdate=%s/part-%07d.%s", s.root, day, i%s.perDay, s.ext)
}

// index returns the i whose key is key; ok is false for a key that is not
// one of the space's.
func (s keySpace) index(key string) (i int, ok bool) {
	rest, ok := strings.CutPrefix(key, s.root+"date=")
	if !ok || len(rest) < len("2006-01-02/part-0000000.") {
		return 0, false
	}
	day, err := time.Parse(time.DateOnly, rest[:10])
	if err != nil {
		return 0, false
	}
	part, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rest[10:], "/part-"), "."+s.ext))
	if err != nil || part < 0 || part >= s.perDay {
		return 0, false
	}
	i = int(day.Sub(firstDay)/(24*time.Hour))*s.perDay + part
	if i < 0 || i >= s.n || s.key(i) != key {
		return 0, false
	}
	return i, true
}

// size returns the size of object i: 2 to 6 KiB.
func (s keySpace) size(i int) int64 { return 2048 + int64(i*7919%4096) }

// etag returns the ETag of object i, without quotes.
func (s keySpace) etag(i int) string {
	h := md5.Sum([]byte(s.key(i)))
	return hex.EncodeToString(h[:])
}

// body returns the bytes of object i: a CSV header and rows, exactly
// size(i) bytes. Only CSV objects are read (for their header) when planned.
func (s keySpace) body(i int) []byte {
	n := int(s.size(i))
	b := make([]byte, 0, n+64)
	b = append(b, "id,user,event\n"...)
	for r := 0; len(b) < n; r++ {
		b = fmt.Appendf(b, "%d-%d,u%04d,page_view\n", i, r, r%1000)
	}
	b = b[:n]
	b[n-1] = '\n'
	return b
}

// maxPageKeys is the most keys a page holds, as on S3.
const maxPageKeys = 1000

// listQuery is what a ListObjectsV2 request asks for.
type listQuery struct {
	Prefix     string
	StartAfter string
	Token      string
	// MaxKeys is the most keys of the page; below 0 means not given
	// (1,000); above 1,000 is 1,000.
	MaxKeys int
}

// listPage is one page of a listing: the indices of its keys in order.
type listPage struct {
	Keys      []int
	Truncated bool
	// NextToken resumes the listing after the page, when Truncated.
	NextToken string
}

// errBadToken is a continuation token the server did not write.
var errBadToken = errors.New("the continuation token is not valid")

// page answers q as S3 does: keys under q.Prefix, after the key the
// continuation token names or else after q.StartAfter (the token wins when
// both are given), at most q.MaxKeys of them.
func (s keySpace) page(q listQuery) (listPage, error) {
	after := q.StartAfter
	if q.Token != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Token)
		if err != nil || len(b) == 0 {
			return listPage{}, errBadToken
		}
		after = string(b)
	}
	limit := q.MaxKeys
	if limit < 0 || limit > maxPageKeys {
		limit = maxPageKeys
	}
	i := max(sort.Search(s.n, func(i int) bool { return s.key(i) >= q.Prefix }),
		sort.Search(s.n, func(i int) bool { return s.key(i) > after }))
	var p listPage
	for ; i < s.n && len(p.Keys) < limit && strings.HasPrefix(s.key(i), q.Prefix); i++ {
		p.Keys = append(p.Keys, i)
	}
	if len(p.Keys) > 0 && i < s.n && strings.HasPrefix(s.key(i), q.Prefix) {
		p.Truncated = true
		p.NextToken = base64.RawURLEncoding.EncodeToString([]byte(s.key(p.Keys[len(p.Keys)-1])))
	}
	return p, nil
}

// listBucketResult is the ListObjectsV2 answer, as S3 writes it.
type listBucketResult struct {
	XMLName               xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	KeyCount              int            `xml:"KeyCount"`
	MaxKeys               int            `xml:"MaxKeys"`
	IsTruncated           bool           `xml:"IsTruncated"`
	Contents              []listContents `xml:"Contents"`
}

type listContents struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

// lastModified is every object's LastModified.
const lastModified = "2024-06-01T00:00:00.000Z"

// listingServer serves the key spaces, one per bucket, over S3's REST API
// with path-style addressing: ListObjectsV2, and GetObject (with Range and
// If-Match) for the CSV headers. It counts the requests it answers.
type listingServer struct {
	buckets map[string]keySpace
	lists   atomic.Int64
	gets    atomic.Int64
}

func (ls *listingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	space, ok := ls.buckets[bucket]
	switch {
	case !ok:
		s3Error(w, http.StatusNotFound, "NoSuchBucket", "no bucket "+bucket)
	case r.Method == http.MethodGet && key == "" && r.URL.Query().Get("list-type") == "2":
		ls.lists.Add(1)
		ls.list(w, r, bucket, space)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && key != "":
		ls.gets.Add(1)
		ls.get(w, r, space, key)
	default:
		s3Error(w, http.StatusNotImplemented, "NotImplemented", r.Method+" "+r.URL.String()+" is not served here")
	}
}

func (ls *listingServer) list(w http.ResponseWriter, r *http.Request, bucket string, space keySpace) {
	v := r.URL.Query()
	if v.Get("delimiter") != "" || v.Get("encoding-type") != "" {
		s3Error(w, http.StatusNotImplemented, "NotImplemented", "delimiter and encoding-type are not served here")
		return
	}
	q := listQuery{Prefix: v.Get("prefix"), StartAfter: v.Get("start-after"), Token: v.Get("continuation-token"), MaxKeys: -1}
	if mk := v.Get("max-keys"); mk != "" {
		n, err := strconv.Atoi(mk)
		if err != nil || n < 0 {
			s3Error(w, http.StatusBadRequest, "InvalidArgument", "max-keys "+mk)
			return
		}
		q.MaxKeys = n
	}
	p, err := space.page(q)
	if err != nil {
		s3Error(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	res := listBucketResult{Name: bucket, Prefix: q.Prefix, StartAfter: q.StartAfter, ContinuationToken: q.Token,
		NextContinuationToken: p.NextToken, KeyCount: len(p.Keys), MaxKeys: q.MaxKeys, IsTruncated: p.Truncated,
		Contents: make([]listContents, len(p.Keys))}
	if res.MaxKeys < 0 {
		res.MaxKeys = maxPageKeys
	}
	for j, i := range p.Keys {
		res.Contents[j] = listContents{Key: space.key(i), LastModified: lastModified, ETag: `"` + space.etag(i) + `"`,
			Size: space.size(i), StorageClass: "STANDARD"}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Write([]byte(xml.Header))
	xml.NewEncoder(w).Encode(res)
}

func (ls *listingServer) get(w http.ResponseWriter, r *http.Request, space keySpace, key string) {
	i, ok := space.index(key)
	if !ok {
		s3Error(w, http.StatusNotFound, "NoSuchKey", "no key "+key)
		return
	}
	etag := `"` + space.etag(i) + `"`
	if m := r.Header.Get("If-Match"); m != "" && m != etag {
		s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed", "If-Match "+m)
		return
	}
	body := space.body(i)
	start, end := 0, len(body)-1
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		var err error
		if start, end, err = parseRange(rg, len(body)); err != nil {
			s3Error(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", err.Error())
			return
		}
		status = http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(body)))
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", "Sat, 01 Jun 2024 00:00:00 GMT")
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.Itoa(end-start+1))
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		w.Write(body[start : end+1])
	}
}

// parseRange reads "bytes=a-b" or "bytes=a-" for an object of size bytes.
func parseRange(h string, size int) (start, end int, err error) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("range %q", h)
	}
	if start, err = strconv.Atoi(a); err != nil || start >= size {
		return 0, 0, fmt.Errorf("range %q of %d bytes", h, size)
	}
	end = size - 1
	if b != "" {
		if end, err = strconv.Atoi(b); err != nil || end < start {
			return 0, 0, fmt.Errorf("range %q", h)
		}
		end = min(end, size-1)
	}
	return start, end, nil
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>%s</Message></Error>", xml.Header, code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
