// Package sqsextended reads and writes messages in the format of the Amazon
// SQS Extended Client Library: a message too large for its queue is written
// to S3, and the message carries a pointer to it. Messages written by an
// [Offloader] are read unchanged by the Java and Python Extended Clients,
// and a [Resolver] reads what those clients (and older ones) write.
//
// # The format
//
// An offloaded message has:
//
//   - the body ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"BUCKET","s3Key":"KEY"}]
//     ([Pointer.Body]): the Java class PayloadS3Pointer serialised by
//     Jackson with default typing, which wraps the object in an array
//     naming its class (awslabs/payload-offloading-java-common-lib-for-aws,
//     src/main/java/software/amazon/payloadoffloading/PayloadS3Pointer.java
//     and JsonDataConverter.java, enableDefaultTyping(NON_FINAL));
//   - the message attribute ExtendedPayloadSize ([SizeAttribute]), data type
//     Number, holding the payload's size in UTF-8 bytes
//     (awslabs/amazon-sqs-java-extended-client-lib,
//     src/main/java/com/amazon/sqs/javamessaging/SQSExtendedClientConstants.java
//     and AmazonSQSExtendedClientUtil.java, updateMessageAttributePayloadSize);
//   - the message's other attributes, unchanged;
//   - the payload itself in S3 at BUCKET/KEY.
//
// A message is large when its body's UTF-8 bytes plus, for every message
// attribute, the bytes of its name, data type and value exceed the limit:
// the sum SQS applies to MaximumMessageSize (sqsbatch.Entry.Size), and the
// sum the Java and Python clients compare with their threshold
// (AmazonSQSExtendedClientUtil.java isLarge and getMsgAttributesSize;
// awslabs/amazon-sqs-python-extended-client-lib, src/sqs_extended_client/client.py
// _is_large). The pointer message must itself fit, so a message whose
// attributes alone nearly fill the limit cannot be offloaded, and the size
// attribute takes one of the ten attributes SQS allows.
//
// # What older clients wrote
//
// A [Resolver] also reads:
//
//   - the attribute SQSLargePayloadSize ([LegacySizeAttribute]) instead of
//     ExtendedPayloadSize. Version 2 of the Java client still writes it by
//     default (useLegacyReservedAttributeName = true in
//     src/main/java/com/amazon/sqs/javamessaging/ExtendedClientConfiguration.java);
//   - the class name com.amazon.sqs.javamessaging.MessageS3Pointer
//     ([LegacyPointerClass]), written by Java client 1.0 and by the Python
//     client with use_legacy_attribute set;
//   - a bare object {"s3BucketName":"BUCKET","s3Key":"KEY"}, with field
//     names matched without regard to case, as .NET ports write it with
//     Json.NET ({"S3Key":...,"S3BucketName":...});
//   - any JSON spacing and escaping, such as Python's json.dumps writes
//     (", " and ": " separators, \uXXXX escapes).
//
// Whether a message is a pointer is decided by its attributes, as the Java
// and Python clients decide it: a message with ExtendedPayloadSize or
// SQSLargePayloadSize must carry a pointer, and any other message is
// returned as it is, whatever its body looks like. So messages must be
// received with their message attributes (MessageAttributeNames "All", or
// [AttributeNames]); Lambda's SQS event source always includes them.
//
// # Receipt handles
//
// On receive, the Java client prefixes the receipt handle with
// "-..s3BucketName..-BUCKET-..s3BucketName..--..s3Key..-KEY-..s3Key..-"
// so that its deleteMessage can find the payload to delete
// (AmazonSQSExtendedClientUtil.java embedS3PointerInReceiptHandle). This
// package leaves receipt handles alone: Lambda's event source deletes
// messages with the handles SQS gave, and a changed handle would be
// refused. [Resolver.Resolve] returns the [Pointer] instead, and
// [Resolver.Delete] deletes the payload when the caller is done with it,
// as the Java client's deletePayloadFromS3 does.
//
// # Object keys
//
// The Java and Python clients name objects with a random UUID, so a
// retried send writes a second object. An [Offloader] names an object
// after what it holds: Prefix, the hex SHA-256 of a stable record id that
// the caller supplies, "/", and the hex SHA-256 of the body
// ([Offloader.Key]). It writes the object only if the key is free
// (If-None-Match: *), so an object never changes once written: a retried
// or re-run record with the same body finds its object and points to it,
// and a record whose body differs (another mapping, another mode) gets an
// object of its own, leaving the pointers already sent intact. Objects are
// written with the bucket's default encryption (S3 encrypts every object:
// SSE-S3 unless the bucket's default is SSE-KMS), or SSE-KMS with a given
// key.
//
// # Deleting payloads
//
// Several messages may name one object: every copy of a record with the
// same body, on any queue the Offloader's prefix serves: a message SQS
// delivers twice, a record sent again after a lost answer, a second run of
// the same object. A consumer that deletes the payload once it has
// processed a message ([Resolver.Delete], as the Java client does when it
// deletes a message) leaves the other copies without one. When that
// consumer is the only reader of the records, a copy whose payload is gone
// carries a record it has processed (the same id with the same body), and
// [ResolverOptions].IgnorePayloadNotFound reports it as [ErrSkip] instead
// of a failure. S3 reports a missing object as NoSuchKey only to a reader
// allowed s3:ListBucket on the bucket (AccessDenied otherwise), so such a
// consumer needs it. A payload also disappears when the bucket's lifecycle
// rule expires it, which should therefore keep payloads at least as long
// as their queue (and its dead-letter queue, for a redrive) keeps
// messages. Where several consumers, or several queues served by one
// prefix, read the same records, none should delete payloads: the
// lifecycle rule does.
package sqsextended
