package sqsbatch

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestSigV4AsTheSDK signs requests of the direct sender's shape with
// sigV4 and with the SDK's v4.Signer, over random hosts, ports, regions,
// credentials, session tokens, lengths and times (days change, so keys
// are derived again), and wants the same headers from both.
func TestSigV4AsTheSDK(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	hosts := []string{
		"https://sqs.eu-west-1.amazonaws.com", "https://sqs.us-east-1.amazonaws.com:443",
		"http://127.0.0.1:4566", "http://localhost:80", "https://sqs-fips.us-gov-west-1.amazonaws.com",
		"https://sqs.ap-southeast-2.api.aws",
	}
	regions := []string{"us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1"}
	sdk := v4.NewSigner()
	signers := map[string]*sigV4{}
	for i := range 2000 {
		region := regions[rng.IntN(len(regions))]
		s := signers[region]
		if s == nil {
			s = &sigV4{region: region}
			signers[region] = s
		}
		// An access key has one secret: the SDK's signer keeps its keys
		// by access key.
		id := rng.IntN(3)
		creds := aws.Credentials{AccessKeyID: fmt.Sprintf("AKID%d", id), SecretAccessKey: fmt.Sprintf("secret/%d+", id)}
		if rng.IntN(2) == 0 {
			creds.SessionToken = fmt.Sprintf("IQoJb3JpZ2luX2VjE%d//////////wEaCXVzLWVhc3QtMSJGMEQCIA==", rng.IntN(1000))
		}
		at := time.Date(2026, 12, 1+rng.IntN(3), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9), time.UTC)
		if rng.IntN(4) == 0 {
			at = at.In(time.FixedZone("elsewhere", -7*3600))
		}
		payloadHash := fmt.Sprintf("%064x", rng.Uint64())
		ours := request(t, hosts[rng.IntN(len(hosts))], rng.Int64N(1<<20)+1)
		theirs := ours.Clone(t.Context())
		s.sign(ours, creds, payloadHash, at)
		if err := sdk.SignHTTP(t.Context(), creds, theirs, payloadHash, "sqs", region, at); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
			if got, want := ours.Header.Get(h), theirs.Header.Get(h); got != want {
				t.Fatalf("request %d to %s: %s\n got %s\nwant %s", i, ours.URL, h, got, want)
			}
		}
	}
}

func request(t *testing.T, url string, length int64) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header["Content-Type"] = hdrContentType
	req.Header["X-Amz-Target"] = hdrTarget
	req.Header["X-Amzn-Query-Mode"] = hdrQueryMode
	req.Header["User-Agent"] = []string{"not signed"}
	return req
}
