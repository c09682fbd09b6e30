package faultproxy

import (
	"net/http"
	"strconv"
)

// writeS3InternalError answers as S3 does when it fails inside: HTTP 500
// with an XML error body, which a HEAD answer cannot carry (the SDK then
// names the error after the status).
func writeS3InternalError(w http.ResponseWriter, r *http.Request, requestID string) {
	body := []byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message>` +
		`<RequestId>` + requestID + `</RequestId><HostId>faultproxy</HostId></Error>`)
	h := w.Header()
	h.Set("X-Amz-Request-Id", requestID)
	h.Set("X-Amz-Id-2", "faultproxy")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(body)
}
