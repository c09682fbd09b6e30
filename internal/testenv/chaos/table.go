package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Table writes results as a Markdown table: one row per function run, the
// accounting first, then the faults the proxies injected.
func Table(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| function | claims | records | delivered | on the failure output | lost | duplicates | from lost answers | other | in the DLQ | messages delivered twice | invocations | faults injected |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range results {
		claims := "off"
		if r.Claims {
			claims = "on"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %d | %d (%.1f%%) | %d | %d | %d | %d | %d | %s |\n",
			r.Function, claims, r.Records, r.Delivered, codes(r), r.Lost, r.Duplicates, percent(r.Duplicates, r.Records),
			r.LostAnswerDuplicates, r.OtherDuplicates(), r.DLQ, r.Redelivered, r.Invocations, faults(r))
	}
}

// codes is the number of records on the failure output, with their codes.
func codes(r Result) string {
	if r.OnFailureOutput == 0 {
		return "0"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(r.FailureCodes)) {
		parts = append(parts, fmt.Sprintf("%d %s", r.FailureCodes[c], c))
	}
	return fmt.Sprintf("%d (%s)", r.OnFailureOutput, strings.Join(parts, ", "))
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// faults lists the faults of both proxies that happened, by class.
func faults(r Result) string {
	q, s := r.SQSFaults, r.S3Faults
	var parts []string
	for _, f := range []struct {
		name string
		n    int
	}{
		{"entries failed", q.EntriesFailed}, {"SQS 500", q.SQS500}, {"SQS throttled", q.SQSThrottled},
		{"reset before", q.ResetBefore + s.ResetBefore}, {"reset after (lost answer)", q.ResetAfter + s.ResetAfter},
		{"S3 500", s.S3500}, {"bodies cut", s.BodyCut}, {"delayed 2 s", q.Delayed + s.Delayed},
		{"client gone", q.ClientGone + s.ClientGone},
	} {
		if f.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", f.n, f.name))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
