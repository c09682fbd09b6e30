package localaws

import (
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rclone/gofakes3"
	"github.com/rclone/gofakes3/s3mem"
)

// FakeS3 starts an in-process S3 server (rclone/gofakes3 with its memory
// backend, which supports versioning, ranges and conditional reads) on
// 127.0.0.1 for the duration of the test, and returns a client for it.
// Unlike the other stand-ins it needs no `make test`.
func FakeS3(tb testing.TB) *s3.Client {
	tb.Helper()
	return S3Client(FakeS3URL(tb))
}

// FakeS3URL starts the server FakeS3 starts and returns its URL, for a
// process that the test runs (such as a function under aws-lambda-rie).
func FakeS3URL(tb testing.TB) string {
	tb.Helper()
	faker := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	tb.Cleanup(srv.Close)
	return srv.URL
}

// S3Client returns a path-style S3 client for the stand-in at endpoint.
func S3Client(endpoint string) *s3.Client {
	return s3.NewFromConfig(Config(endpoint), func(o *s3.Options) { o.UsePathStyle = true })
}
