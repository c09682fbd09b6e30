package iamrecord

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClassify holds the request-to-action table to the Service
// Authorization Reference: batch operations are authorized as their single
// form, a read with a version id as the Version action, a listing with its
// s3:prefix, a transaction item by item.
func TestClassify(t *testing.T) {
	r := &Recorder{opts: Options{Region: "eu-west-1", Account: "111122223333"}}
	sqsReq := func(op, body string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		return req
	}
	ddbReq := func(op, body string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		return req
	}
	const q = `{"QueueUrl":"http://127.0.0.1:4566/444455556666/work"}`
	const queue = "arn:aws:sqs:eu-west-1:444455556666:work"
	const table = "arn:aws:dynamodb:eu-west-1:111122223333:table/claims"
	tests := []struct {
		req  *http.Request
		body string
		want []Call
	}{
		{sqsReq("SendMessageBatch", q), q, []Call{{Action: "sqs:SendMessage", Resource: queue, Operation: "SendMessageBatch"}}},
		{sqsReq("DeleteMessageBatch", q), q, []Call{{Action: "sqs:DeleteMessage", Resource: queue, Operation: "DeleteMessageBatch"}}},
		{sqsReq("ReceiveMessage", q), q, []Call{{Action: "sqs:ReceiveMessage", Resource: queue, Operation: "ReceiveMessage"}}},
		{sqsReq("GetQueueUrl", `{"QueueName":"orders","QueueOwnerAWSAccountId":"444455556666"}`), `{"QueueName":"orders","QueueOwnerAWSAccountId":"444455556666"}`,
			[]Call{{Action: "sqs:GetQueueUrl", Resource: "arn:aws:sqs:eu-west-1:444455556666:orders", Operation: "GetQueueUrl"}}},
		{ddbReq("GetItem", `{"TableName":"claims"}`), `{"TableName":"claims"}`, []Call{{Action: "dynamodb:GetItem", Resource: table, Operation: "GetItem"}}},
		{ddbReq("TransactWriteItems", `{"TransactItems":[{"Update":{"TableName":"claims"}},{"ConditionCheck":{"TableName":"claims"}}]}`),
			`{"TransactItems":[{"Update":{"TableName":"claims"}},{"ConditionCheck":{"TableName":"claims"}}]}`,
			[]Call{{Action: "dynamodb:UpdateItem", Resource: table, Operation: "TransactWriteItems"}, {Action: "dynamodb:ConditionCheckItem", Resource: table, Operation: "TransactWriteItems"}}},
		{httptest.NewRequest(http.MethodHead, "/lake/in/a%20b.json?versionId=v1", nil), "",
			[]Call{{Action: "s3:GetObjectVersion", Resource: "arn:aws:s3:::lake/in/a b.json", Operation: "HEAD object"}}},
		{httptest.NewRequest(http.MethodGet, "/lake/in/a.json?x-id=GetObject", nil), "",
			[]Call{{Action: "s3:GetObject", Resource: "arn:aws:s3:::lake/in/a.json", Operation: "GET object"}}},
		{httptest.NewRequest(http.MethodPut, "/lake/out/r.json?x-id=PutObject", nil), "",
			[]Call{{Action: "s3:PutObject", Resource: "arn:aws:s3:::lake/out/r.json", Operation: "PutObject"}}},
		{httptest.NewRequest(http.MethodGet, "/lake?list-type=2&prefix=in%2F", nil), "",
			[]Call{{Action: "s3:ListBucket", Resource: "arn:aws:s3:::lake", Context: map[string]string{"s3:prefix": "in/"}, Operation: "ListObjects"}}},
		{httptest.NewRequest(http.MethodGet, "/lake?versions&prefix=in%2F", nil), "",
			[]Call{{Action: "s3:ListBucketVersions", Resource: "arn:aws:s3:::lake", Context: map[string]string{"s3:prefix": "in/"}, Operation: "ListObjectVersions"}}},
		// Not known: recorded so that a check fails on it.
		{httptest.NewRequest(http.MethodPut, "/lake?notification", nil), "",
			[]Call{{Action: "unknown:s3 PUT /lake?notification", Resource: "*", Operation: "PUT /lake?notification"}}},
		{httptest.NewRequest(http.MethodGet, "/lake/in/a.json?tagging", nil), "",
			[]Call{{Action: "unknown:s3 GET /lake/in/a.json?tagging", Resource: "*", Operation: "GET /lake/in/a.json?tagging"}}},
		{httptest.NewRequest(http.MethodDelete, "/lake/in/a.json?uploadId=u", nil), "",
			[]Call{{Action: "unknown:s3 DELETE /lake/in/a.json?uploadId=u", Resource: "*", Operation: "DELETE /lake/in/a.json?uploadId=u"}}},
		{httptest.NewRequest(http.MethodGet, "/lake?uploads&prefix=in%2F", nil), "",
			[]Call{{Action: "unknown:s3 GET /lake?uploads&prefix=in%2F", Resource: "*", Operation: "GET /lake?uploads&prefix=in%2F"}}},
		{httptest.NewRequest(http.MethodGet, "/", nil), "",
			[]Call{{Action: "unknown:s3 GET /?", Resource: "*", Operation: "GET /?"}}},
	}
	for _, tt := range tests {
		got := r.classify(tt.req, []byte(tt.body))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s: (-want +got)\n%s", tt.req.Method, tt.req.URL, diff)
		}
	}
}
