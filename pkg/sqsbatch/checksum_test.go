package sqsbatch_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/internal/testenv/sqsfault"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// TestMD5MismatchRetriesOnlyItsEntry sends ten entries to fauxqs through
// a transport that garbles the MD5 of one entry in SQS's answers: only that
// entry is sent again, and the other nine count as accepted after one
// request. When every answer garbles it, it fails with MD5Mismatch, and an
// entry throttled in the same requests keeps its own code.
func TestMD5MismatchRetriesOnlyItsEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		// bad says which answers garble the MD5 of md5-3.
		bad func(answer int) bool
		// throttled fails md5-7 on every attempt, before it reaches SQS.
		throttled bool
		// sent lists, per request, the bodies sent.
		sent      [][]string
		failures  map[string]string
		delivered int
	}{
		{
			name: "once",
			bad:  func(answer int) bool { return answer == 1 },
			sent: [][]string{bodies(10), {"md5-3"}},
			// SQS stored md5-3 both times: the garbling was in the answer.
			delivered: 11,
		},
		{
			name:      "always",
			bad:       func(int) bool { return true },
			throttled: true,
			sent:      [][]string{bodies(10), {"md5-3", "md5-7"}, {"md5-3", "md5-7"}},
			failures:  map[string]string{"md5-3": sqsbatch.CodeMD5Mismatch, "md5-7": "RequestThrottled"},
			delivered: 8 + 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			url := createQueue(t, c, false, nil)
			garbling := sqs.NewFromConfig(localaws.SQS(t), func(o *sqs.Options) {
				o.HTTPClient = &sqsfault.BadChecksums{Next: o.HTTPClient, Bad: func(body string, answer int) bool {
					return body == "md5-3" && tc.bad(answer)
				}}
			})
			fc := &sqsfault.Client{API: garbling, EntryErr: func(body string, _ int) *types.BatchResultErrorEntry {
				if tc.throttled && body == "md5-7" {
					return &types.BatchResultErrorEntry{Code: aws.String("RequestThrottled"), Message: aws.String("injected")}
				}
				return nil
			}}
			s, err := sqsbatch.New(t.Context(), fc, sqsbatch.Queue{URL: url}, sqsbatch.Options{MaxAttempts: 3, Backoff: noWait})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.SendEntries(t.Context(), entries("md5", 10))
			if err != nil {
				t.Fatalf("send: %v; want the mismatch kept to its entry", err)
			}
			var sent [][]string
			for _, r := range fc.Requests() {
				var b []string
				for _, e := range r.Entries {
					b = append(b, aws.ToString(e.MessageBody))
				}
				sent = append(sent, b)
			}
			if diff := cmp.Diff(tc.sent, sent); diff != "" {
				t.Errorf("bodies per request (-want +got):\n%s", diff)
			}
			if want := 10 - len(tc.failures); res.Sent != want || res.Requests != len(tc.sent) {
				t.Errorf("sent %d in %d requests, want %d in %d", res.Sent, res.Requests, want, len(tc.sent))
			}
			if diff := cmp.Diff(tc.failures, failureCodes(res), cmpEmpty); diff != "" {
				t.Errorf("failure codes (-want +got):\n%s", diff)
			}
			for _, f := range res.Failures {
				if f.SenderFault || f.Attempts != 3 || f.Code == sqsbatch.CodeMD5Mismatch && !strings.Contains(f.Message, "MD5") {
					t.Errorf("failure %+v: want retryable, 3 attempts, and the checksums in its message", f)
				}
			}
			receiveAll(t, c, url, tc.delivered)
		})
	}
}

// cmpEmpty treats a nil map and an empty one as equal.
var cmpEmpty = cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

// bodies returns the bodies of entries("md5", n).
func bodies(n int) []string {
	var out []string
	for _, e := range entries("md5", n) {
		out = append(out, e.Body)
	}
	return out
}
