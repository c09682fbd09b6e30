package faultproxy

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// service is the protocol family of a request; it decides which faults the
// request can get and what they look like.
type service int

const (
	// serviceOther is forwarded untouched: SNS, SQS's query protocol,
	// the stand-ins' own endpoints.
	serviceOther service = iota
	// serviceSQS is SQS's JSON protocol (awsJson1_0).
	serviceSQS
	// serviceS3 is S3's REST protocol with path-style addressing.
	serviceS3
)

const sqsTargetPrefix = "AmazonSQS."

// classify names the service and the operation of r, whose body is body.
func classify(r *http.Request, body []byte) (service, string) {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if op, ok := strings.CutPrefix(t, sqsTargetPrefix); ok {
			return serviceSQS, op
		}
		return serviceOther, "target:" + t
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		// SNS, STS and SQS's old query protocol all put the operation in
		// Action and share this content type; S3 never uses it.
		action := r.URL.Query().Get("Action")
		if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") != "" {
			action = v.Get("Action")
		}
		return serviceOther, "query:" + action
	}
	// The stand-ins' own endpoints (health checks, moto's API) are not S3.
	if r.URL.Path == "/health" || strings.HasPrefix(r.URL.Path, "/moto-api") || strings.HasPrefix(r.URL.Path, "/_fauxqs/") {
		return serviceOther, "other"
	}
	return serviceS3, s3Op(r)
}

// objectSubresources are query parameters that turn a request on an object
// into another operation than GetObject, PutObject, HeadObject or
// DeleteObject.
var objectSubresources = []string{"acl", "tagging", "attributes", "retention", "legal-hold", "torrent", "uploads", "uploadId", "restore", "select", "annotation"}

// s3Op names the S3 operation of a path-style request. aws-sdk-go-v2 puts
// most operation names in the x-id query parameter; the rest (HeadObject,
// ListObjectsV2, requests of other clients) are recognised by method, path
// and query.
func s3Op(r *http.Request) string {
	q := r.URL.Query()
	if id := q.Get("x-id"); id != "" {
		return id
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case bucket == "":
		if r.Method == http.MethodGet {
			return "ListBuckets"
		}
	case key != "":
		for _, s := range objectSubresources {
			if q.Has(s) {
				return "S3:" + r.Method + "Object?" + s
			}
		}
		switch r.Method {
		case http.MethodGet:
			return "GetObject"
		case http.MethodHead:
			return "HeadObject"
		case http.MethodPut:
			if r.Header.Get("X-Amz-Copy-Source") != "" {
				return "CopyObject"
			}
			return "PutObject"
		case http.MethodDelete:
			return "DeleteObject"
		}
	default:
		if q.Get("list-type") == "2" {
			return "ListObjectsV2"
		}
		if len(q) == 0 {
			switch r.Method {
			case http.MethodGet:
				return "ListObjects"
			case http.MethodHead:
				return "HeadBucket"
			case http.MethodPut:
				return "CreateBucket"
			case http.MethodDelete:
				return "DeleteBucket"
			}
		}
		if len(q) > 0 {
			// Bucket subresources are set-up (notification, versioning,
			// ...): named for the stats, never faulted by default.
			return "S3:" + r.Method + "Bucket?" + slices.Sorted(maps.Keys(q))[0]
		}
	}
	return "S3:" + r.Method
}
