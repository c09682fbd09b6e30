package awserr

// Resource is what a not-found answer says is missing.
type Resource int

// The resources Missing names.
const (
	// NoResource: err is no not-found answer, or one whose code names none
	// of the others (a 404 with another code, or none).
	NoResource Resource = iota
	// Key is a missing object: NoSuchKey, or NotFound, S3's answer to a
	// HEAD of a missing key (a HEAD's answer has no body, so it cannot say
	// that the bucket is missing instead).
	Key
	// Version is a missing version of an object: NoSuchVersion.
	Version
	// Bucket is a missing bucket: NoSuchBucket.
	Bucket
	// Queue is a missing queue: QueueDoesNotExist, or
	// AWS.SimpleQueueService.NonExistentQueue, its query-compatible code.
	Queue
)

var resourceNames = [...]string{NoResource: "NoResource", Key: "Key", Version: "Version", Bucket: "Bucket", Queue: "Queue"}

// String returns the resource's name.
func (r Resource) String() string {
	if r < 0 || int(r) >= len(resourceNames) {
		return "Resource(?)"
	}
	return resourceNames[r]
}

// missingCodes are the not-found codes and what each says is missing.
var missingCodes = map[string]Resource{
	"NoSuchKey":         Key,
	"NotFound":          Key,
	"NoSuchVersion":     Version,
	"NoSuchBucket":      Bucket,
	"QueueDoesNotExist": Queue,
	"AWS.SimpleQueueService.NonExistentQueue": Queue,
}

// Missing returns what err's code says is missing, or NoResource. It
// reads only the code: a caller that must know that S3 answered 404 asks
// Classify for NotFound.
func Missing(err error) Resource {
	return missingCodes[Code(err)]
}

// Unsupported reports an answer that the action does not exist at the
// endpoint, as the stand-ins answer for the actions they lack
// (InvalidAction, UnsupportedOperation, UnknownOperationException,
// NotImplemented).
func Unsupported(err error) bool {
	switch Code(err) {
	case "InvalidAction", "UnsupportedOperation", "UnknownOperationException", "NotImplemented":
		return true
	}
	return false
}
