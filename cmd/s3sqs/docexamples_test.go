package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// TestDocExamplesAccepted runs every `s3sqs` command line the docs and the
// README show in a code block (a command, not the lines it prints) against
// the stand-ins, its variables and elided URLs (".../work") set to queues
// of the stand-ins (a FIFO one where the example's is, a DLQ with a source
// where it names a DLQ) or to a placeholder: each is accepted (exit 0, 1
// or 3, as its bucket or run does not exist here), so that an example the
// CLI would refuse (exit 2) cannot stand in the docs. A file the example
// names that does not exist here is not held against it.
func TestDocExamplesAccepted(t *testing.T) {
	_, sqsc := standIns(t)
	q := docQueues{
		queue: localaws.CreateQueue(t, sqsc, "-docs", nil),
		fifo:  localaws.CreateQueue(t, sqsc, "-docs.fifo", nil),
		dlq:   localaws.CreateQueue(t, sqsc, "-docs-dlq", nil),
	}
	localaws.CreateQueue(t, sqsc, "-docs-src", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + queueARN(t, sqsc, q.dlq) + `","maxReceiveCount":"3"}`,
	})
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	seen := map[string]int{}
	for _, f := range files {
		for _, ex := range cliExamples(t, f) {
			args := q.expand(ex)
			seen[args[0]]++
			code, _, errOut := runCLI(t, "", args...)
			if code == 2 && !strings.Contains(errOut, "no such file or directory") {
				t.Errorf("%s: the CLI refuses the example\n  %s\n%s", filepath.Base(f), ex, errOut)
			}
		}
	}
	for _, cmd := range []string{"fanout", "ingest", "parse", "redrive", "reconcile", "status", "pause", "resume", "cancel", "set"} {
		if seen[cmd] == 0 {
			t.Errorf("found no example of s3sqs %s in the docs; the scan is broken (found %v)", cmd, seen)
		}
	}
}

// cliExamples returns the `s3sqs` command lines in file's code blocks,
// continuation lines joined; not the lines a command prints ("s3sqs
// fanout: ..."), nor a synopsis ("s3sqs fanout [flags]   send ...").
func cliExamples(t *testing.T, file string) []string {
	t.Helper()
	fd, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	var out []string
	in, cur := false, ""
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			in, cur = !in, ""
			continue
		case !in:
			continue
		case cur != "":
			cur += " " + strings.TrimSuffix(line, `\`)
		case isExample(strings.TrimPrefix(line, "$ ")):
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "$ "), `\`)
		default:
			continue
		}
		if !strings.HasSuffix(line, `\`) {
			out = append(out, strings.TrimSpace(cur))
			cur = ""
		}
	}
	return out
}

// isExample reports whether line starts a command line of the CLI.
func isExample(line string) bool {
	w := strings.Fields(line)
	if len(w) < 2 || w[0] != "s3sqs" || strings.HasSuffix(w[1], ":") {
		return false
	}
	synopsis := strings.ContainsAny(line, "[(") || strings.Contains(w[1], "|") ||
		(strings.Contains(line, "  ") && !strings.HasSuffix(line, `\`))
	return !synopsis
}

// docQueues are the stand-ins' queues an example's queue URLs become.
type docQueues struct{ queue, fifo, dlq string }

var docVar = regexp.MustCompile(`^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$`)

// expand splits an example into arguments as a shell does (quotes
// grouping words), stops at a pipe, a redirection or a trailing &, and
// sets its variables: a queue URL's to a queue (the DLQ for a DLQ's),
// any other to a placeholder.
func (q docQueues) expand(example string) []string {
	var args []string
	for _, w := range shellWords(example)[1:] {
		if w == "|" || w == "&" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") {
			break
		}
		name := ""
		if m := docVar.FindStringSubmatch(w); m != nil {
			name = m[1]
		}
		switch {
		case strings.Contains(name, "DLQ"):
			w = q.dlq
		case strings.Contains(name, "QUEUE_URL") || name == "T" || name == "W":
			w = q.queue
		case name != "":
			w = "placeholder"
		case strings.HasPrefix(w, ".../"), strings.HasPrefix(w, "http") && strings.Contains(w, "sqs"):
			switch {
			case strings.HasSuffix(w, ".fifo"):
				w = q.fifo
			case strings.HasSuffix(w, "dlq"):
				w = q.dlq
			default:
				w = q.queue
			}
		}
		args = append(args, w)
	}
	return args
}

// shellWords splits s into words as sh does for the examples' needs:
// blanks separate words, and single or double quotes group and are
// removed.
func shellWords(s string) []string {
	var words []string
	var b strings.Builder
	quote, inWord := rune(0), false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			b.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words
}
