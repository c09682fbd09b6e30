// Package localaws connects integration tests to the local AWS stand-ins
// that `make test` starts: fauxqs for SQS and SNS, and moto_server for S3
// and the bucket notifications it produces.
//
// The stand-ins are found through environment variables. When one is
// missing the test fails with a message that says to run `make test`; it
// never skips silently. Only `go test -short` skips, on purpose, so that the
// pure tests can run on their own in a quick loop.
package localaws

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Environment variables set by `make test` (see tools/with-local-aws).
const (
	// EnvSQS is the base URL of the SQS stand-in (fauxqs).
	EnvSQS = "AWS_ENDPOINT_URL_SQS"
	// EnvSNS is the base URL of the SNS stand-in (fauxqs).
	EnvSNS = "AWS_ENDPOINT_URL_SNS"
	// EnvS3 is the base URL of the S3 stand-in (moto_server).
	EnvS3 = "AWS_ENDPOINT_URL_S3"
	// EnvMoto is the base URL of moto_server, which serves S3, SNS and SQS
	// together and delivers bucket notifications between them.
	EnvMoto = "S3SQS_MOTO_URL"
	// EnvRIE is the path of the aws-lambda-rie binary.
	EnvRIE = "S3SQS_AWS_LAMBDA_RIE"
)

// Region is the region every stand-in is used with.
const Region = "us-east-1"

// Endpoint returns the value of the environment variable name, or fails the
// test with a message saying how to get it. Under `go test -short` it skips
// the test instead.
func Endpoint(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if testing.Short() {
		tb.Skipf("integration test: %s is not set and -short was given", name)
	}
	tb.Fatalf("integration test needs the local AWS stand-ins: %s is not set; run `make test` (or tools/with-local-aws go test ./...)", name)
	return ""
}

// Config returns an AWS config that sends every request to endpoint with
// static test credentials.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// SQS returns a config for the SQS stand-in, failing the test when it is not
// running.
func SQS(tb testing.TB) aws.Config {
	tb.Helper()
	return Config(Endpoint(tb, EnvSQS))
}

// Moto returns a config for moto_server, failing the test when it is not
// running. Use it for S3 clients with UsePathStyle set.
func Moto(tb testing.TB) aws.Config {
	tb.Helper()
	return Config(Endpoint(tb, EnvMoto))
}
