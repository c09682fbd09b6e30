// Package emf writes CloudWatch Embedded Metric Format documents: one JSON
// line that CloudWatch Logs turns into metrics, as documented in
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
package emf

import (
	"encoding/json"
	"io"
	"slices"
	"time"
)

// Units used by the functions.
const (
	Count        = "Count"
	Bytes        = "Bytes"
	Milliseconds = "Milliseconds"
)

// Metric is one value.
type Metric struct {
	Name  string
	Unit  string
	Value float64
}

// Write writes one EMF document to w with the metrics under namespace and
// the given dimensions (all in one dimension set), stamped with now.
func Write(w io.Writer, namespace string, dims map[string]string, metrics []Metric, now time.Time) error {
	type def struct {
		Name string `json:"Name"`
		Unit string `json:"Unit,omitempty"`
	}
	type directive struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []def      `json:"Metrics"`
	}
	doc := map[string]any{}
	names := make([]string, 0, len(dims))
	for k, v := range dims {
		names = append(names, k)
		doc[k] = v
	}
	slices.Sort(names)
	d := directive{Namespace: namespace, Dimensions: [][]string{names}}
	for _, m := range metrics {
		d.Metrics = append(d.Metrics, def{Name: m.Name, Unit: m.Unit})
		doc[m.Name] = m.Value
	}
	doc["_aws"] = map[string]any{
		"Timestamp":         now.UnixMilli(),
		"CloudWatchMetrics": []directive{d},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
