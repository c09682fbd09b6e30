package sqsbatch

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

type customSigner struct{}

func (customSigner) SignHTTP(context.Context, aws.Credentials, *http.Request, string, string, string, time.Time, ...func(*v4.SignerOptions)) error {
	return nil
}

type beforeAttempt struct{}

func (beforeAttempt) BeforeAttempt(context.Context, *smithyhttp.InterceptorContext) error { return nil }

// TestDirectOnlyWherePlain holds the choice of newDirect: a client makes
// its own requests only when nothing a caller added must see them.
func TestDirectOnlyWherePlain(t *testing.T) {
	base := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	for _, tc := range []struct {
		name           string
		cfg            func(*aws.Config)
		opt            func(*sqs.Options)
		direct, ownSig bool
	}{
		{name: "plain", direct: true, ownSig: true},
		{name: "stand-in endpoint", opt: func(o *sqs.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:4566") }, direct: true, ownSig: true},
		{name: "endpoint with a path", opt: func(o *sqs.Options) { o.BaseEndpoint = aws.String("https://proxy.example/sqs") }, direct: true},
		{name: "custom signer", opt: func(o *sqs.Options) { o.HTTPSignerV4 = customSigner{} }, direct: true},
		{name: "API options (tracing)", opt: func(o *sqs.Options) {
			o.APIOptions = append(o.APIOptions, func(*middleware.Stack) error { return nil })
		}},
		{name: "interceptor", cfg: func(c *aws.Config) { c.Interceptors.AddBeforeAttempt(beforeAttempt{}) }},
		{name: "request logging", opt: func(o *sqs.Options) { o.ClientLogMode = aws.LogRequest }},
		{name: "anonymous", opt: func(o *sqs.Options) { o.Credentials = aws.AnonymousCredentials{} }},
		{name: "FIPS pseudo-region", opt: func(o *sqs.Options) { o.Region = "fips-us-east-1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base.Copy()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			var opts []func(*sqs.Options)
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			d := newDirect(t.Context(), sqs.NewFromConfig(cfg, opts...))
			if (d != nil) != tc.direct || d != nil && (d.sig != nil) != tc.ownSig {
				t.Errorf("direct %v (own signer %v), want %v (%v)", d != nil, d != nil && d.sig != nil, tc.direct, tc.ownSig)
			}
		})
	}
	if newDirect(t.Context(), struct{ API }{sqs.NewFromConfig(base)}) != nil {
		t.Error("a client that is not a *sqs.Client made direct")
	}
}
