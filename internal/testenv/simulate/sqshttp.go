package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// badMD5Key marks a call whose answer must carry a wrong MD5 for its
// first accepted entry; its value is the *Faults that counts it lost.
type badMD5Key struct{}

// sqsTransport serves the SQS model over the SDK's own protocol (AWS JSON
// 1.0), in process: the engine's calls then go through the real client's
// serializers, deserializers and middleware (sqsbatch's own body
// serializer and MD5 check among them), as they do against SQS.
type sqsTransport struct{ m *SQSModel }

// NewSQSClient returns a real SQS client whose requests the model answers,
// without the SDK's retries: the engine's own retries are what is tested.
func NewSQSClient(m *SQSModel) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String("http://sqs.model.invalid"),
		HTTPClient:   &http.Client{Transport: sqsTransport{m}},
		Retryer:      aws.NopRetryer{},
	})
}

func (t sqsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "AmazonSQS.")
	var out any
	switch op {
	case "SendMessageBatch":
		var in sqs.SendMessageBatchInput
		if err = json.Unmarshal(b, &in); err == nil {
			var o *sqs.SendMessageBatchOutput
			if o, err = t.m.SendMessageBatch(ctx, &in); err == nil {
				if f, ok := ctx.Value(badMD5Key{}).(*Faults); ok && len(o.Successful) > 0 {
					o.Successful[0].MD5OfMessageBody = aws.String(strings.Repeat("0", 32))
					f.markLost(aws.ToString(o.Successful[0].MessageId))
				}
				out = o
			}
		}
	case "GetQueueUrl":
		var in sqs.GetQueueUrlInput
		if err = json.Unmarshal(b, &in); err == nil {
			out, err = t.m.GetQueueUrl(ctx, &in)
		}
	case "GetQueueAttributes":
		var in sqs.GetQueueAttributesInput
		if err = json.Unmarshal(b, &in); err == nil {
			out, err = t.m.GetQueueAttributes(ctx, &in)
		}
	default:
		err = sqsError(400, "InvalidAction", "the model does not serve "+op)
	}
	status := 200
	if err != nil {
		var api smithy.APIError
		if !errors.As(err, &api) {
			return nil, err
		}
		status = 400
		if api.ErrorFault() == smithy.FaultServer {
			status = 500
		}
		out = map[string]string{"__type": "com.amazonaws.sqs#" + api.ErrorCode(), "message": api.ErrorMessage()}
	}
	body, _ := json.Marshal(out)
	return &http.Response{
		StatusCode: status, Status: fmt.Sprint(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"model"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}
