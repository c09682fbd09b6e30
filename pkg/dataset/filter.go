package dataset

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Filters leave objects out of a dataset by what S3 says of them, as S3
// Batch Operations' manifest generator does: their key, size, storage
// class and time of last modification. They apply to every listing: a
// prefix, a key list, a manifest (an S3 Inventory report or a Batch
// Operations CSV) and, with Source.Versions, to each version. The zero
// Filters keeps every object.
//
// A filter whose value the listing does not give (the size of a key list's
// objects, the time of a Batch Operations manifest's) is judged on
// HeadObject's answer, which pinning asks for anyway for such objects; an
// S3 Inventory report without the field costs a HeadObject per object.
type Filters struct {
	// ModifiedAfter keeps objects last modified at or after it.
	ModifiedAfter time.Time `json:"modifiedAfter,omitzero"`
	// ModifiedBefore keeps objects last modified before it.
	ModifiedBefore time.Time `json:"modifiedBefore,omitzero"`
	// MinSize keeps objects of at least this many bytes.
	MinSize int64 `json:"minSize,omitempty"`
	// MaxSize keeps objects of at most this many bytes; zero means no
	// bound.
	MaxSize int64 `json:"maxSize,omitempty"`
	// StorageClasses keeps objects in one of these storage classes, as S3
	// names them (STANDARD, INTELLIGENT_TIERING, GLACIER, ...).
	StorageClasses []string `json:"storageClasses,omitempty"`
	// KeyRegex keeps keys in which the regular expression (RE2 syntax, as
	// Go's regexp package reads it) finds a match: anchor it with ^ and $
	// to match whole keys.
	KeyRegex string `json:"keyRegex,omitempty"`
}

// The names of the filters, as Filter.Key and Filter.Object return them:
// the request fields that set them, and FilterHidden for the keys a
// listing leaves out unless Source.IncludeHidden is set.
const (
	FilterHidden         = "hidden"
	FilterSuffix         = "suffix"
	FilterGlob           = "glob"
	FilterKeyRegex       = "keyRegex"
	FilterStorageClasses = "storageClasses"
	FilterMinSize        = "minSize"
	FilterMaxSize        = "maxSize"
	FilterModifiedAfter  = "modifiedAfter"
	FilterModifiedBefore = "modifiedBefore"
)

// IsZero reports whether f keeps every object.
func (f Filters) IsZero() bool {
	return f.ModifiedAfter.IsZero() && f.ModifiedBefore.IsZero() && f.MinSize == 0 && f.MaxSize == 0 && len(f.StorageClasses) == 0 && f.KeyRegex == ""
}

// Validate reports a filter that could keep no object, or that does not
// parse: a negative size, bounds or times the wrong way round, a storage
// class S3 does not have, a regular expression that does not compile.
func (f Filters) Validate() error {
	switch {
	case f.MinSize < 0 || f.MaxSize < 0:
		return fmt.Errorf("dataset: minSize %d, maxSize %d: a size is not negative", f.MinSize, f.MaxSize)
	case f.MaxSize > 0 && f.MinSize > f.MaxSize:
		return fmt.Errorf("dataset: minSize %d is above maxSize %d: no object is kept", f.MinSize, f.MaxSize)
	case !f.ModifiedBefore.IsZero() && !f.ModifiedAfter.Before(f.ModifiedBefore):
		return fmt.Errorf("dataset: modifiedAfter %s is not before modifiedBefore %s: no object is kept",
			f.ModifiedAfter.Format(time.RFC3339), f.ModifiedBefore.Format(time.RFC3339))
	}
	known := types.ObjectStorageClass("").Values()
	for _, c := range f.StorageClasses {
		if !slices.Contains(known, types.ObjectStorageClass(c)) {
			return fmt.Errorf("dataset: storageClasses: %q is not an S3 storage class (%s)", c, classNames(known))
		}
	}
	if _, err := regexp.Compile(f.KeyRegex); err != nil {
		return fmt.Errorf("dataset: keyRegex: %w", err)
	}
	return nil
}

func classNames(cs []types.ObjectStorageClass) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// Filter is a source's filters ready to judge objects: Source.Filter
// builds it. A nil *Filter keeps every object.
type Filter struct {
	src     Source
	re      *regexp.Regexp
	classes map[string]bool
}

// Filter returns the source's filters, those of its Filters and its
// Suffix, Glob and IncludeHidden, ready to judge objects. It returns the
// error Validate would.
func (s Source) Filter() (*Filter, error) {
	if err := s.Filters.Validate(); err != nil {
		return nil, err
	}
	f := &Filter{src: s}
	if s.KeyRegex != "" {
		f.re = regexp.MustCompile(s.KeyRegex) // Validate compiled it
	}
	if len(s.StorageClasses) > 0 {
		f.classes = map[string]bool{}
		for _, c := range s.StorageClasses {
			f.classes[storageClass(c)] = true
		}
	}
	return f, nil
}

// Key returns the name of the first filter that leaves key out, or "" when
// its key keeps it: hidden keys (a last segment that starts with "_" or
// "."), the suffix, the glob, the regular expression.
func (f *Filter) Key(key string) string {
	if f == nil {
		return ""
	}
	s := f.src
	if !s.IncludeHidden {
		base := path.Base(key)
		if strings.HasPrefix(base, "_") || strings.HasPrefix(base, ".") {
			return FilterHidden
		}
	}
	if s.Suffix != "" && !strings.HasSuffix(key, s.Suffix) {
		return FilterSuffix
	}
	if s.Glob != "" {
		if ok, _ := path.Match(s.Glob, key); !ok {
			return FilterGlob
		}
	}
	if f.re != nil && !f.re.MatchString(key) {
		return FilterKeyRegex
	}
	return ""
}

// Object returns the name of the first filter that leaves o, last modified
// at modified, out by what S3 says of it, or "" when they keep it: its
// storage class, size and time. Its key is judged by Key.
func (f *Filter) Object(o Object, modified time.Time) string {
	if f == nil {
		return ""
	}
	s := f.src.Filters
	switch {
	case f.classes != nil && !f.classes[o.StorageClass]:
		return FilterStorageClasses
	case o.Size < s.MinSize:
		return FilterMinSize
	case s.MaxSize > 0 && o.Size > s.MaxSize:
		return FilterMaxSize
	case !s.ModifiedAfter.IsZero() && modified.Before(s.ModifiedAfter):
		return FilterModifiedAfter
	case !s.ModifiedBefore.IsZero() && !modified.Before(s.ModifiedBefore):
		return FilterModifiedBefore
	}
	return ""
}

// LeftOut returns the name of the first filter that leaves o, last
// modified at modified, out, its key first (see Key and Object), or ""
// when they keep it.
func (f *Filter) LeftOut(o Object, modified time.Time) string {
	return cmp.Or(f.Key(o.Key), f.Object(o, modified))
}

// needs reports whether judging an object takes what a listing may not
// give: its size, storage class, or time of last modification.
func (f *Filter) needs() (size, class, modified bool) {
	if f == nil {
		return false, false, false
	}
	s := f.src.Filters
	return s.MinSize > 0 || s.MaxSize > 0, f.classes != nil, !s.ModifiedAfter.IsZero() || !s.ModifiedBefore.IsZero()
}

// Filtered is an object a source's filters left out, and the name of the
// filter that did (see Filter.Key).
type Filtered struct {
	Object
	By string
}
