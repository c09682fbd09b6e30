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

// TestDocExamplesAccepted runs every `s3sqs fanout` command line the docs
// show in a code block against the stand-ins, with their variables set to
// a queue of the stand-ins (queue URLs) or a placeholder: each is accepted
// (its flags and values pass; exit 0 or 1, as the example's bucket does
// not exist here), so that an example the CLI would refuse (exit 2)
// cannot stand in the docs.
func TestDocExamplesAccepted(t *testing.T) {
	_, sqsc := standIns(t)
	queue := localaws.CreateQueue(t, sqsc, "-docs", nil)
	fifo := localaws.CreateQueue(t, sqsc, "-docs.fifo", nil)
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	n := 0
	for _, f := range files {
		for _, ex := range fanoutExamples(t, f) {
			n++
			args := expand(ex, queue, fifo)
			if code, _, errOut := runCLI(t, "", args...); code == 2 {
				t.Errorf("%s: the CLI refuses the example\n  %s\n%s", filepath.Base(f), ex, errOut)
			}
		}
	}
	if n < 8 {
		t.Errorf("found %d examples of s3sqs fanout in the docs; the scan is broken", n)
	}
}

// fanoutExamples returns the `s3sqs fanout` command lines in file's code
// blocks, continuation lines joined.
func fanoutExamples(t *testing.T, file string) []string {
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
		case strings.HasPrefix(strings.TrimPrefix(line, "$ "), "s3sqs fanout ") && !strings.Contains(line, "[flags]"):
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

var docVar = regexp.MustCompile(`^"?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?"?$`)

// expand splits an example into arguments (it quotes nothing with
// spaces), drops a redirection, and sets its variables: a queue URL's to
// queue (fifo where the example's queue is FIFO), any other to a
// placeholder.
func expand(example, queue, fifo string) []string {
	var args []string
	for _, w := range strings.Fields(example)[1:] {
		if w == ">" || w == "|" || strings.HasPrefix(w, ">") {
			break
		}
		if m := docVar.FindStringSubmatch(w); m != nil {
			switch name := m[1]; {
			case strings.Contains(name, "QUEUE_URL") || name == "T" || name == "W":
				w = queue
			default:
				w = "placeholder"
			}
		} else if strings.HasPrefix(w, "http") && strings.Contains(w, "sqs") {
			if strings.HasSuffix(strings.Trim(w, `"'`), ".fifo") {
				w = fifo
			} else {
				w = queue
			}
		}
		args = append(args, strings.Trim(w, `"'`))
	}
	return args
}
