package s3event_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/s3sqs/s3sqs/pkg/s3event"
)

type part = s3event.Partition

func TestPartitions(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want []s3event.Partition
	}{
		{name: "issue example, trailing slash", key: "a=1/b=x y/", want: []part{{Name: "a", Value: "1"}, {Name: "b", Value: "x y"}}},
		{name: "with a file name", key: "a=1/b=x y/part-0.csv", want: []part{{Name: "a", Value: "1"}, {Name: "b", Value: "x y"}}},
		{name: "file name is never a partition", key: "a=1.csv", want: nil},
		{name: "file name with = after partitions", key: "dt=2024-01-01/x=y=z.txt", want: []part{{Name: "dt", Value: "2024-01-01"}}},
		{name: "plain directories are passed over", key: "events/dt=2024-01-01/raw/hour=07/f.json", want: []part{{Name: "dt", Value: "2024-01-01"}, {Name: "hour", Value: "07"}}},
		{name: "hive escapes decoded", key: "p=a%3Db%2Fc%25d/q=100%25/f", want: []part{{Name: "p", Value: "a=b/c%d"}, {Name: "q", Value: "100%"}}},
		{name: "escaped name", key: "my%3Dcol=v/f", want: []part{{Name: "my=col", Value: "v"}}},
		{name: "lone percent kept", key: "p=100%/q=%zz/r=%4/f", want: []part{{Name: "p", Value: "100%"}, {Name: "q", Value: "%zz"}, {Name: "r", Value: "%4"}}},
		{name: "plus stays plus", key: "p=a+b/f", want: []part{{Name: "p", Value: "a+b"}}},
		{name: "null partition", key: "dt=__HIVE_DEFAULT_PARTITION__/n=1/f", want: []part{{Name: "dt", Null: true}, {Name: "n", Value: "1"}}},
		{name: "empty value is not null", key: "p=/f", want: []part{{Name: "p", Value: ""}}},
		{name: "empty name is not a partition", key: "=v/f", want: nil},
		{name: "first = splits", key: "p=a=b/f", want: []part{{Name: "p", Value: "a=b"}}},
		{name: "repeated name kept twice", key: "a=1/a=2/f", want: []part{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}},
		{name: "unicode", key: "région=Zürich/日付=2024年/f", want: []part{{Name: "région", Value: "Zürich"}, {Name: "日付", Value: "2024年"}}},
		{name: "empty segments", key: "//a=1//f", want: []part{{Name: "a", Value: "1"}}},
		{name: "no slash", key: "f", want: nil},
		{name: "empty key", key: "", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s3event.Partitions(tt.key)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Partitions(%q) (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

func TestPartitionTyped(t *testing.T) {
	tests := []struct {
		value string
		null  bool
		want  any
	}{
		{null: true, want: nil},
		{value: "2024", want: int64(2024)},
		{value: "-7", want: int64(-7)},
		{value: "+7", want: int64(7)},
		{value: "007", want: int64(7)},
		{value: "99999999999999999999", want: "99999999999999999999"},
		{value: "1.5", want: 1.5},
		{value: "-.5", want: -0.5},
		{value: "1e3", want: 1000.0},
		{value: "1.", want: 1.0},
		{value: "1e999", want: "1e999"},
		{value: "NaN", want: "NaN"},
		{value: "Inf", want: "Inf"},
		{value: "0x10", want: "0x10"},
		{value: "1_000", want: "1_000"},
		{value: ".", want: "."},
		{value: "e5", want: "e5"},
		{value: "true", want: true},
		{value: "FALSE", want: false},
		{value: "2024-01-31", want: time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)},
		{value: "2024-02-30", want: "2024-02-30"},
		{value: "2024-1-31", want: "2024-1-31"},
		{value: "x y", want: "x y"},
		{value: "", want: ""},
	}
	for _, tt := range tests {
		got := s3event.Partition{Name: "p", Value: tt.value, Null: tt.null}.Typed()
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Partition{Value: %q, Null: %v}.Typed() (-want +got):\n%s", tt.value, tt.null, diff)
		}
	}
}

func TestObjectPartitionsAndFileName(t *testing.T) {
	o := s3event.Object{Key: "events/date=2024-01-01/kind=a b/part 0.csv"}
	if diff := cmp.Diff([]part{{Name: "date", Value: "2024-01-01"}, {Name: "kind", Value: "a b"}}, o.Partitions()); diff != "" {
		t.Errorf("Partitions (-want +got):\n%s", diff)
	}
	for key, want := range map[string]string{"a/b/c.csv": "c.csv", "c.csv": "c.csv", "a/b/": ""} {
		if got := (s3event.Object{Key: key}).FileName(); got != want {
			t.Errorf("FileName of %q = %q, want %q", key, got, want)
		}
	}
}
