package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/agnivade/levenshtein"
)

// closest returns the option nearest to name by edit distance, when it is
// near enough to be a typo (at most a third of its length, and at least
// one edit), or "".
func closest(name string, options []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	for _, o := range options {
		if d := levenshtein.ComputeDistance(name, o); d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

// didYouMean is "; did you mean PREFIX+X?" for the option X closest to
// name, or "".
func didYouMean(name string, options []string, prefix string) string {
	if c := closest(name, options); c != "" {
		return fmt.Sprintf("; did you mean %s%s?", prefix, c)
	}
	return ""
}

// version is what `s3sqs version` prints: the module's version and the
// commit it was built from, as the Go toolchain recorded them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "s3sqs (no build information)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "s3sqs %s", info.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, " commit %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(" with local changes")
		}
	}
	fmt.Fprintf(&b, ", %s %s/%s", info.GoVersion, settings["GOOS"], settings["GOARCH"])
	return b.String()
}
