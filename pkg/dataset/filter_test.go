package dataset_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
	"github.com/s3sqs/s3sqs/pkg/dataset"
)

func TestFiltersValidate(t *testing.T) {
	at := time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		f    dataset.Filters
		want string // in the error; "" for none
	}{
		{dataset.Filters{}, ""},
		{dataset.Filters{MinSize: 1, MaxSize: 1, StorageClasses: []string{"STANDARD", "GLACIER_IR"}, KeyRegex: `^a/.*\.csv$`, ModifiedAfter: at, ModifiedBefore: at.Add(time.Second)}, ""},
		{dataset.Filters{MinSize: -1}, "not negative"},
		{dataset.Filters{MinSize: 10, MaxSize: 9}, "minSize 10 is above maxSize 9"},
		{dataset.Filters{ModifiedAfter: at, ModifiedBefore: at}, "is not before modifiedBefore"},
		{dataset.Filters{ModifiedBefore: at}, ""},
		{dataset.Filters{StorageClasses: []string{"standard"}}, `"standard" is not an S3 storage class (STANDARD, REDUCED_REDUNDANCY`},
		{dataset.Filters{KeyRegex: "a("}, "keyRegex: error parsing regexp"},
	} {
		err := tc.f.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.f, err, tc.want)
		}
	}
	if err := (dataset.Source{Bucket: "b", Prefix: "p/", Filters: dataset.Filters{KeyRegex: "("}}).Validate(); err == nil {
		t.Error("Source.Validate passed a bad keyRegex")
	}
}

func TestFiltersIsZero(t *testing.T) {
	if !(dataset.Filters{}).IsZero() {
		t.Error("the zero Filters is not zero")
	}
	for _, f := range []dataset.Filters{{ModifiedAfter: time.Unix(0, 0)}, {ModifiedBefore: time.Unix(0, 0)}, {MinSize: 1}, {MaxSize: 1}, {StorageClasses: []string{"STANDARD"}}, {KeyRegex: "x"}} {
		if f.IsZero() {
			t.Errorf("%+v is zero", f)
		}
	}
}

func TestFilterJudges(t *testing.T) {
	at := time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)
	src := dataset.Source{Bucket: "b", Prefix: "p/", Suffix: ".jsonl", Glob: "p/*/*", Filters: dataset.Filters{
		KeyRegex: `/(a|b)/`, StorageClasses: []string{"STANDARD", "GLACIER"}, MinSize: 10, MaxSize: 100, ModifiedAfter: at, ModifiedBefore: at.Add(time.Hour)}}
	f, err := src.Filter()
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"p/a/_SUCCESS":  dataset.FilterHidden,
		"p/a/.x.jsonl":  dataset.FilterHidden,
		"p/a/x.csv":     dataset.FilterSuffix,
		"p/a/b/x.jsonl": dataset.FilterGlob,
		"p/c/x.jsonl":   dataset.FilterKeyRegex,
		"p/b/x.jsonl":   "",
	} {
		if got := f.Key(key); got != want {
			t.Errorf("Key(%q) = %q, want %q", key, got, want)
		}
	}
	for _, tc := range []struct {
		o    dataset.Object
		at   time.Time
		want string
	}{
		{dataset.Object{Size: 10}, at, ""}, // STANDARD is the empty class
		{dataset.Object{Size: 100, StorageClass: "GLACIER"}, at.Add(time.Hour - time.Millisecond), ""},
		{dataset.Object{Size: 10, StorageClass: "STANDARD_IA"}, at, dataset.FilterStorageClasses},
		{dataset.Object{Size: 9}, at, dataset.FilterMinSize},
		{dataset.Object{Size: 101}, at, dataset.FilterMaxSize},
		{dataset.Object{Size: 10}, at.Add(-time.Millisecond), dataset.FilterModifiedAfter},
		{dataset.Object{Size: 10}, at.Add(time.Hour), dataset.FilterModifiedBefore},
	} {
		if got := f.Object(tc.o, tc.at); got != tc.want {
			t.Errorf("Object(%+v, %s) = %q, want %q", tc.o, tc.at, got, tc.want)
		}
	}
	var none *dataset.Filter
	if none.Key("_x") != "" || none.Object(dataset.Object{}, time.Time{}) != "" {
		t.Error("a nil Filter left something out")
	}
}

// filterObject is an object of TestFiltersOnEveryListing.
type filterObject struct {
	key   string
	size  int
	class string
}

// TestFiltersOnEveryListing lists one set of objects on moto_server,
// which keeps storage classes, versions and times of last modification,
// through every kind of listing, with each filter: a prefix, a key list,
// a Batch Operations manifest, CSV S3 Inventory reports with and without
// the LastModifiedDate field, a Parquet one without the size field, and
// every version under the prefix. Each must keep exactly the objects the
// case names and count the rest by the filter that left them out; a
// directory marker is neither kept nor counted.
func TestFiltersOnEveryListing(t *testing.T) {
	c := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	bucket := newBucket(t, c, fmt.Sprintf("filters-%d", time.Now().UnixNano()))
	if _, err := c.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	putObj := func(o filterObject) {
		t.Helper()
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key),
			StorageClass: s3types.StorageClass(o.class), Body: strings.NewReader(strings.Repeat("x", o.size))})
		if err != nil {
			t.Fatal(err)
		}
	}
	old := []filterObject{
		{"f/a.jsonl", 10, "STANDARD"},
		{"f/big.jsonl", 5000, "STANDARD"},
		{"f/ia.jsonl", 10, "STANDARD_IA"},
		{"f/x.csv", 10, "STANDARD"},
		{"f/_SUCCESS", 0, "STANDARD"},
		{"f/later.jsonl", 20, "STANDARD"}, // a version before cut, and one after
	}
	for _, o := range old {
		putObj(o)
	}
	// moto keeps whole seconds of a time of last modification, as S3's
	// listings give them: anything written 1.1 s after cut is after it.
	cut := time.Now()
	time.Sleep(1100 * time.Millisecond)
	newer := []filterObject{{"f/new.jsonl", 10, "STANDARD"}, {"f/later.jsonl", 30, "STANDARD"}}
	for _, o := range newer {
		putObj(o)
	}
	current := append(slices.Clone(old[:5]), newer...)
	// A "folder" the S3 console made: no listing takes it, nor counts it.
	dir := filterObject{"f/dir/", 0, "STANDARD"}
	putObj(dir)

	// The manifests: Batch Operations' bucket,key; S3 Inventory's CSV with
	// and without LastModifiedDate, as S3 writes it (ETag, size, class and
	// time from HeadObject); Parquet without size.
	var batch, invFull, invNoTime bytes.Buffer
	var parquetRows []currentRow
	for _, o := range append(slices.Clone(current), dir) {
		h, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)})
		if err != nil {
			t.Fatal(err)
		}
		key, lm, class := url.QueryEscape(o.key), aws.ToTime(h.LastModified).UTC(), cmpOr(string(h.StorageClass), "STANDARD")
		fmt.Fprintf(&batch, "%s,%s\n", bucket, key)
		fmt.Fprintf(&invFull, "%q,%q,%q,\"%d\",%q,%q\n", bucket, key, aws.ToString(h.VersionId), o.size, lm.Format("2006-01-02T15:04:05.000Z"), class)
		fmt.Fprintf(&invNoTime, "%q,%q,%q,\"%d\",%q\n", bucket, key, aws.ToString(h.VersionId), o.size, class)
		parquetRows = append(parquetRows, currentRow{Bucket: bucket, Key: o.key, LastModifiedDate: &lm, StorageClass: &class})
	}
	m := newBucket(t, c, bucket+"-m")
	put(t, c, m, "batch.csv", batch.Bytes())
	sources := map[string]dataset.Source{
		"prefix":                 {Bucket: bucket, Prefix: "f/"},
		"keys":                   {Bucket: bucket, Keys: keysOfObjects(current)},
		"batch manifest":         {Manifest: "s3://" + m + "/batch.csv"},
		"inventory csv":          {Manifest: putInventory(t, c, m, "full", "CSV", "Bucket, Key, VersionId, Size, LastModifiedDate, StorageClass", [][]byte{gzipped(invFull.String())})},
		"inventory csv, no time": {Manifest: putInventory(t, c, m, "notime", "CSV", "Bucket, Key, VersionId, Size, StorageClass", [][]byte{gzipped(invNoTime.String())})},
		"inventory parquet, no size": {Manifest: putInventory(t, c, m, "parquet", "Parquet", inventorySchema(t, currentColumns...).String(),
			[][]byte{writeParquet(t, inventorySchema(t, currentColumns...), parquetRows, 3)})},
		"versions": {Bucket: bucket, Prefix: "f/", Versions: true},
	}

	all := []string{"f/a.jsonl", "f/big.jsonl", "f/ia.jsonl", "f/later.jsonl", "f/new.jsonl", "f/x.csv"}
	for _, tc := range []struct {
		name    string
		filters dataset.Filters
		keep    []string
		by      map[string]int // the current objects left out, f/_SUCCESS apart
		// success is the filter that leaves f/_SUCCESS out of a key list,
		// which names it ("" keeps it; listings leave it out as hidden);
		// first that of f/later.jsonl's first version, 20 bytes, before
		// cut, in a listing of every version.
		success, first string
	}{
		{"none", dataset.Filters{}, all, nil, "", ""},
		{"min size", dataset.Filters{MinSize: 11}, []string{"f/big.jsonl", "f/later.jsonl"}, map[string]int{"minSize": 4}, "minSize", ""},
		{"max size", dataset.Filters{MaxSize: 20}, []string{"f/a.jsonl", "f/ia.jsonl", "f/new.jsonl", "f/x.csv"}, map[string]int{"maxSize": 2}, "", ""},
		{"storage class", dataset.Filters{StorageClasses: []string{"STANDARD_IA"}}, []string{"f/ia.jsonl"}, map[string]int{"storageClasses": 5}, "storageClasses", "storageClasses"},
		{"key regex", dataset.Filters{KeyRegex: `\.csv$`}, []string{"f/x.csv"}, map[string]int{"keyRegex": 5}, "keyRegex", "keyRegex"},
		{"modified after", dataset.Filters{ModifiedAfter: cut}, []string{"f/later.jsonl", "f/new.jsonl"}, map[string]int{"modifiedAfter": 4}, "modifiedAfter", "modifiedAfter"},
		{"modified before", dataset.Filters{ModifiedBefore: cut}, []string{"f/a.jsonl", "f/big.jsonl", "f/ia.jsonl", "f/x.csv"}, map[string]int{"modifiedBefore": 2}, "", ""},
		{"key first", dataset.Filters{KeyRegex: "a", MinSize: 11}, []string{"f/later.jsonl"}, map[string]int{"keyRegex": 3, "minSize": 2}, "keyRegex", ""},
	} {
		for name, src := range sources {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				src.Filters = tc.filters
				keep, by := listFiltered(t, c, src)
				wantKeep, want := slices.Clone(tc.keep), maps.Clone(tc.by)
				if want == nil {
					want = map[string]int{}
				}
				switch {
				case len(src.Keys) > 0 && tc.success == "":
					wantKeep = append(wantKeep, "f/_SUCCESS")
				case len(src.Keys) > 0:
					want[tc.success]++
				default:
					want[dataset.FilterHidden]++
				}
				switch {
				case src.Versions && tc.first == "":
					wantKeep = append(wantKeep, "f/later.jsonl")
				case src.Versions:
					want[tc.first]++
				}
				slices.Sort(wantKeep)
				if !slices.Equal(keep, wantKeep) || !maps.Equal(by, want) {
					t.Errorf("kept %q, left out %v; want %q and %v", keep, by, wantKeep, want)
				}
			})
		}
	}
}

// TestFiltersNamedKeyMissing: a key the source names is pinned before the
// filters judge it, so that one that is missing ends the listing, as
// without filters, even when a filter would leave it out.
func TestFiltersNamedKeyMissing(t *testing.T) {
	c := localaws.S3Client(localaws.Endpoint(t, localaws.EnvMoto))
	bucket := newBucket(t, c, fmt.Sprintf("filters-named-%d", time.Now().UnixNano()))
	put(t, c, bucket, "k/a.jsonl", []byte("{}\n"))
	src := dataset.Source{Bucket: bucket, Keys: []string{"k/a.jsonl", "k/typo.csv"}, Filters: dataset.Filters{KeyRegex: `\.jsonl$`}}
	var errs []error
	for _, err := range dataset.List(t.Context(), c, src, dataset.Cursor{}, dataset.ListOptions{}) {
		errs = append(errs, err)
	}
	if last := errs[len(errs)-1]; !errors.Is(last, dataset.ErrNotFound) || !strings.Contains(last.Error(), "k/typo.csv") {
		t.Errorf("listing ended with %v, want k/typo.csv not found", last)
	}
}

func keysOfObjects(objs []filterObject) []string {
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.key)
	}
	return keys
}

// listFiltered lists src whole, and returns the keys it kept (a key once
// per version kept), sorted, and what it left out by filter.
func listFiltered(t *testing.T, c dataset.ListAPI, src dataset.Source) ([]string, map[string]int) {
	t.Helper()
	var keep []string
	by := map[string]int{}
	for l, err := range dataset.List(t.Context(), c, src, dataset.Cursor{}, dataset.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range l.Filtered {
			by[f.By]++
		}
		switch {
		case len(l.Versions) > 0:
			for _, v := range l.Versions {
				keep = append(keep, v.Key)
			}
		case !l.Mark():
			keep = append(keep, l.Key)
		}
	}
	slices.Sort(keep)
	return keep, by
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
