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
	faker := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	tb.Cleanup(srv.Close)
	return s3.NewFromConfig(Config(srv.URL), func(o *s3.Options) { o.UsePathStyle = true })
}
