package awserr_test

import (
	"fmt"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3sqs/s3sqs/pkg/awserr"
)

// A caller maps each class to its own outcome; here, what a reader of an
// object pinned to its ETag does.
func ExampleClassify() {
	for _, status := range []int{503, 412, 404, 403} {
		code := map[int]string{503: "SlowDown", 412: "PreconditionFailed", 404: "NoSuchKey", 403: "AccessDenied"}[status]
		err := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code},
		}}
		switch awserr.Classify(err) {
		case awserr.Retryable:
			fmt.Println(code, "-> read again")
		case awserr.Changed, awserr.NotFound:
			fmt.Println(code, "-> skip: that version is gone")
		default:
			fmt.Println(code, "-> fail")
		}
	}
	// Output:
	// SlowDown -> read again
	// PreconditionFailed -> skip: that version is gone
	// NoSuchKey -> skip: that version is gone
	// AccessDenied -> fail
}
