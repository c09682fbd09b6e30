package doccheck

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// LinkError is a broken link: a relative target that does not exist, or
// an anchor that is no heading of its file.
type LinkError struct {
	File   string // the file that holds the link, as passed to Links
	Line   int    // 1-based
	Target string // as written
	Reason string
}

// Error returns "file:line: target: reason".
func (e *LinkError) Error() string {
	return fmt.Sprintf("%s:%d: (%s): %s", e.File, e.Line, e.Target, e.Reason)
}

// Links checks every Markdown link and image of files (paths relative to
// root, such as README.md or docs/configuration.md) and returns one error
// per broken link, as a *LinkError, plus one per file it cannot read. It
// returns nil when every link works.
//
// A link is an inline link or image, [text](target) or ![alt](target), or
// a reference definition, [label]: target, outside fenced code blocks and
// inline code. Targets with a scheme (https:, mailto:) or starting with //
// are not checked. Any other target must exist, relative to the file (or
// to root when it starts with /) and inside root; a trailing / means a
// directory. An anchor (#x, or file.md#x) must be a heading of the
// Markdown file it points into, by Slug's rules with -1, -2 for repeated
// headings, or an HTML id or <a name>; anchors into directories and other
// files (main.go#L10) are not checked.
func Links(root string, files []string) []error {
	c := &linkChecker{root: root, anchors: map[string]map[string]bool{}}
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			errs = append(errs, fmt.Errorf("doccheck: %w", err))
			continue
		}
		for _, l := range findLinks(data) {
			if reason := c.check(f, l.target); reason != "" {
				errs = append(errs, &LinkError{File: f, Line: l.n, Target: l.target, Reason: reason})
			}
		}
	}
	return errs
}

// linkChecker resolves targets, keeping the anchors of each Markdown file
// it has read.
type linkChecker struct {
	root    string
	anchors map[string]map[string]bool // path → its anchors
}

// scheme matches a target that starts with a URL scheme.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// check returns why target, written in file, is broken, or "".
func (c *linkChecker) check(file, target string) string {
	if target == "" {
		return "empty target"
	}
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	p, frag, hasFrag := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	p, err := url.PathUnescape(p)
	if err != nil {
		return "the path is not URL-escaped correctly"
	}
	dest := filepath.Join(c.root, file)
	if p != "" {
		base := filepath.Dir(dest)
		if strings.HasPrefix(p, "/") {
			base = c.root
		}
		dest = filepath.Join(base, filepath.FromSlash(p))
		rel, err := filepath.Rel(c.root, dest)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "points outside the repository"
		}
		info, err := os.Stat(dest)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "no such file or directory"
		case err != nil:
			return err.Error()
		case strings.HasSuffix(p, "/") && !info.IsDir():
			return "not a directory"
		case info.IsDir():
			return ""
		}
	}
	if !hasFrag {
		return ""
	}
	if ext := strings.ToLower(filepath.Ext(dest)); ext != ".md" && ext != ".markdown" {
		return ""
	}
	anchor, err := url.PathUnescape(frag)
	if err != nil {
		return "the anchor is not URL-escaped correctly"
	}
	anchors, err := c.fileAnchors(dest)
	if err != nil {
		return err.Error()
	}
	if !anchors[anchor] {
		rel, _ := filepath.Rel(c.root, dest)
		return fmt.Sprintf("no heading with the anchor #%s in %s", anchor, filepath.ToSlash(rel))
	}
	return ""
}

// fileAnchors returns the anchors of the Markdown file at path.
func (c *linkChecker) fileAnchors(path string) (map[string]bool, error) {
	if a, ok := c.anchors[path]; ok {
		return a, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a := anchors(data)
	c.anchors[path] = a
	return a, nil
}

// Slug returns the anchor GitHub gives a heading with this text, before
// repeats are numbered: the text lowercased, with spaces turned into '-'
// and everything but letters (any script), marks, digits, '-' and '_'
// dropped. "Deploy with the AWS CDK (`infra/`)" is
// "deploy-with-the-aws-cdk-infra". Markdown inside the text is taken as
// written, so pass the heading's text as rendered (Links does).
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	// inlineLink is [text](target) or ![alt](target) inside a heading.
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// htmlTag is an HTML tag inside a heading.
	htmlTag = regexp.MustCompile(`<[^>]*>`)
	// htmlAnchor is an id="x" or <a name="x"> anywhere outside code.
	htmlAnchor = regexp.MustCompile(`(?i)(?:\bid|<a\s[^>]*\bname)\s*=\s*"([^"]+)"`)
	// setextUnderline is the line under a setext heading.
	setextUnderline = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	// notParagraph starts a line that cannot be a setext heading's text.
	notParagraph = regexp.MustCompile(`^(\s{4}|\s*([|>#*+-]|\d+[.)])(\s|$))`)
)

// anchors returns the anchors of a Markdown file: the slugs of its ATX and
// setext headings (outside fenced code), numbered as GitHub numbers
// repeats, and its HTML ids and <a name>s.
func anchors(data []byte) map[string]bool {
	seen := map[string]int{} // slug as computed → repeats so far
	out := map[string]bool{}
	add := func(heading string) {
		heading = inlineLink.ReplaceAllString(heading, "$1")
		heading = htmlTag.ReplaceAllString(heading, "")
		slug := Slug(heading)
		s := slug
		for out[s] {
			seen[slug]++
			s = fmt.Sprintf("%s-%d", slug, seen[slug])
		}
		out[s] = true
	}
	lines := markdownLines(data)
	for i, l := range lines {
		if l.code {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(stripCode(l.text), -1) {
			out[m[1]] = true
		}
		if h, ok := atxHeading(l.text); ok {
			add(h)
			continue
		}
		if i > 0 && setextUnderline.MatchString(l.text) {
			prev := lines[i-1]
			if !prev.code && strings.TrimSpace(prev.text) != "" && !notParagraph.MatchString(prev.text) {
				add(strings.TrimSpace(prev.text))
			}
		}
	}
	return out
}

// atxHeading returns the text of an ATX heading line (# Title), without
// its closing #s.
func atxHeading(line string) (string, bool) {
	s := line
	for range 3 {
		s = strings.TrimPrefix(s, " ")
	}
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(s[n:])
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") {
		text = strings.TrimSpace(t)
	}
	return text, true
}

// line is one line of a Markdown file.
type line struct {
	n    int // 1-based
	text string
	code bool // a fence line or inside a fenced code block
}

// markdownLines splits data into lines and marks those of fenced code
// blocks (``` or ~~~, indented or not, closed by a fence of the same
// character at least as long, or by the end of the file).
func markdownLines(data []byte) []line {
	var out []line
	fence := "" // the open fence, or ""
	for i, text := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		l := line{n: i + 1, text: text}
		trimmed := strings.TrimLeft(text, " \t")
		switch {
		case fence != "":
			l.code = true
			if f := fenceOf(trimmed); f != "" && f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "" {
				fence = ""
			}
		case fenceOf(trimmed) != "":
			l.code = true
			fence = fenceOf(trimmed)
		}
		out = append(out, l)
	}
	return out
}

// fenceOf returns the run of three or more backticks or tildes that s
// starts with, or "".
func fenceOf(s string) string {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return ""
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 || (s[0] == '`' && strings.Contains(s[n:], "`")) {
		return ""
	}
	return s[:n]
}

// stripCode replaces each inline code span of line, opened and closed by
// runs of as many backticks, with "_".
// A backtick run without a closing run of the same length is kept.
func stripCode(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		run := line[i:n]
		end := -1
		for j := n; j < len(line); {
			k := strings.Index(line[j:], run)
			if k < 0 {
				break
			}
			k += j
			m := k
			for m < len(line) && line[m] == '`' {
				m++
			}
			if m-k == len(run) {
				end = m
				break
			}
			j = m
		}
		if end < 0 {
			b.WriteString(run)
			i = n
			continue
		}
		b.WriteByte('_')
		i = end
	}
	return b.String()
}

// link is a link target and its line.
type link struct {
	n      int
	target string
}

// refDefinition is a link reference definition, [label]: target (not a
// footnote, [^1]: text).
var refDefinition = regexp.MustCompile(`^ {0,3}\[([^\]^][^\]]*)\]:[ \t]*(<[^>]*>|\S+)`)

// findLinks returns the targets of the inline links, images and reference
// definitions of a Markdown file, outside fenced code and inline code.
func findLinks(data []byte) []link {
	var out []link
	for _, l := range markdownLines(data) {
		if l.code {
			continue
		}
		text := stripCode(l.text)
		if m := refDefinition.FindStringSubmatch(text); m != nil {
			out = append(out, link{l.n, strings.Trim(m[2], "<>")})
		}
		for i := 0; ; {
			k := strings.Index(text[i:], "](")
			if k < 0 {
				break
			}
			k += i
			i = k + 2
			if k > 0 && text[k-1] == '\\' {
				continue
			}
			if target, ok := destination(text[k+2:]); ok {
				out = append(out, link{l.n, target})
			}
		}
	}
	return out
}

// destination parses the part of an inline link after "](": the target
// (<...> or up to a space or the unbalanced ')'), then an optional title,
// then ')'. ok is false when s is not a link's destination.
func destination(s string) (target string, ok bool) {
	s = strings.TrimLeft(s, " \t")
	var rest string
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return "", false
		}
		target, rest = s[1:end], s[end+1:]
	} else {
		depth, end := 0, len(s)
	scan:
		for j := 0; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '(':
				depth++
			case ')':
				if depth == 0 {
					end = j
					break scan
				}
				depth--
			case ' ', '\t':
				end = j
				break scan
			}
		}
		target, rest = s[:end], s[end:]
	}
	rest = strings.TrimLeft(rest, " \t")
	if rest == "" {
		return "", false
	}
	switch rest[0] {
	case ')':
		return target, true
	case '"', '\'', '(':
		closer := rest[0]
		if closer == '(' {
			closer = ')'
		}
		end := strings.IndexByte(rest[1:], closer)
		if end < 0 {
			return "", false
		}
		if after := strings.TrimLeft(rest[end+2:], " \t"); strings.HasPrefix(after, ")") {
			return target, true
		}
	}
	return "", false
}
