package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// bigRecordSize is about the size of the record too large for any SQS
// queue, which is offloaded.
const bigRecordSize = 1536 << 10

// object is a generated object and the records it holds.
type object struct {
	key     string
	records int
	// fanout objects: the bodies their records must arrive as.
	bodies []string
	// badRecord is set when the object holds a record that must fail.
	badRecord bool
}

type generated struct {
	objects []object
	// garbage is the body of the unparseable notification.
	garbage string
}

func (g *generated) total() int {
	n := 0
	for _, o := range g.objects {
		n += o.records
	}
	return n
}

// generate uploads the ingest objects (whose notifications moto sends), the
// fanout dataset, and an unparseable notification.
func generate(ctx context.Context, st *stack, c Config) (*generated, error) {
	g := &generated{garbage: "this is not an S3 event notification"}
	n := c.Records
	put := func(key string, body []byte) error {
		_, err := st.motoS3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		if err != nil {
			return fmt.Errorf("demo: put %s: %w", key, err)
		}
		return nil
	}
	var jsonl, csv, gz, broken bytes.Buffer
	csv.WriteString("id,kind,note\n")
	broken.WriteString("id,kind,note\n")
	for i := range n {
		fmt.Fprintf(&jsonl, `{"id":%d,"kind":"jsonl","note":"héllo \"%d\""}`+"\n", i, i)
		fmt.Fprintf(&csv, "%d,csv,\"a, b %d\"\r\n", i, i)
		fmt.Fprintf(&gz, `{"id":%d,"kind":"gzip"}`+"\n", i)
		if i == n/2 {
			broken.WriteString("oops,this,row,has,too,many,fields\n")
		}
		fmt.Fprintf(&broken, "%d,broken,x\n", i)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(gz.Bytes())
	zw.Close()
	ingest := []struct {
		key  string
		body []byte
		n    int
		bad  bool
	}{
		{"ingest/date=2024-01-01/city=São Paulo/part 0+1.jsonl", jsonl.Bytes(), n, false},
		{"ingest/date=2024-01-02/city=a=b & c/data.csv", csv.Bytes(), n, false},
		{"ingest/date=2024-01-03/city=東京/part-0.jsonl.gz", zipped.Bytes(), n, false},
		{"ingest/date=2024-01-04/city=__HIVE_DEFAULT_PARTITION__/broken.csv", broken.Bytes(), n + 1, true},
		// One record over SQS's 1 MiB: it arrives as an SQS Extended
		// Client pointer to its copy under OFFLOAD_S3_URI.
		{"ingest/date=2024-01-05/city=Lagos/large.jsonl", []byte(`{"id":0,"kind":"large","doc":"` + strings.Repeat("x", bigRecordSize) + `"}` + "\n"), 1, false},
	}
	for _, o := range ingest {
		if err := put(o.key, o.body); err != nil {
			return nil, err
		}
		g.objects = append(g.objects, object{key: o.key, records: o.n, badRecord: o.bad})
	}
	if _, err := st.motoSQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.ingest), MessageBody: aws.String(g.garbage)}); err != nil {
		return nil, fmt.Errorf("demo: send the unparseable notification: %w", err)
	}
	for o := range c.FanoutObjects {
		key := fmt.Sprintf("fanout/region=eu west/part-%05d.jsonl", o)
		var b strings.Builder
		obj := object{key: key, records: n}
		for i := range n {
			v := fmt.Sprintf("f%d-%d", o, i)
			if o == 0 && i == 7 {
				v = "bad\u0000record" // SQS rejects NUL: it goes to the failure output
				obj.badRecord = true
			}

			quoted, _ := json.Marshal(v)
			fmt.Fprintf(&b, `{"value":%s,"msg_attributes":{"object":"%d"}}`+"\n", quoted, o)
			obj.bodies = append(obj.bodies, v)
		}
		if err := put(key, []byte(b.String())); err != nil {
			return nil, err
		}
		g.objects = append(g.objects, obj)
	}
	return g, nil
}
