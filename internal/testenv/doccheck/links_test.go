package doccheck_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
)

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"What each path costs (`make bench`)", "what-each-path-costs-make-bench"},
		{"Deploy with the AWS CDK (`infra/`)", "deploy-with-the-aws-cdk-infra"},
		{"What each function refuses, and how it says so", "what-each-function-refuses-and-how-it-says-so"},
		{"pkg/dataset and pkg/records", "pkgdataset-and-pkgrecords"},
		{"The s3ingest function", "the-s3ingest-function"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"Déjà vu: Ünïcode, 日本語!", "déjà-vu-ünïcode-日本語"},
		{"A  -  B", "a-----b"},
		{"  Trimmed  ", "trimmed"},
		{"100% done? Yes.", "100-done-yes"},
		{"", ""},
	} {
		if got := doccheck.Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q; want %q", tc.heading, got, tc.want)
		}
	}
}

func ExampleSlug() {
	fmt.Println(doccheck.Slug("Deploy with the AWS CDK (`infra/`)"))
	// Output: deploy-with-the-aws-cdk-infra
}

func TestLinks(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"README.md": "# Project\n\n" +
			"## Setup\n\n## Setup\n\n## Setup\n\n" +
			"## What each path costs (`make bench`)\n\n" +
			"## Title with closing hashes ##\n" +
			"Setext heading\n--------------\n\n" +
			`<a name="legacy-anchor"></a>` + "\n\n" +
			"## Links\n\n" +
			"[ok file](docs/guide.md) [ok dir](docs/) [ok dir no slash](docs)\n" +
			"[ok anchor](#setup) [ok repeat](#setup-1) [ok repeat 2](#setup-2) [ok code heading](#what-each-path-costs-make-bench)\n" +
			"[ok setext](#setext-heading) [ok closing](#title-with-closing-hashes) [ok html](#legacy-anchor) [ok other file](docs/guide.md#a-guide) ![ok image](img/logo.png)\n" +
			"[ok titled](docs/guide.md \"Title\") [ok angle](<docs/with space.md>) [ok escaped](docs/with%20space.md)\n" +
			"[ok url](https://example.com/x) [ok mail](mailto:a@example.com) [ok proto](//example.com) [ok code anchor](main.go#L10)\n" +
			"[ok parens](docs/paren(1).md) [ok root](/docs/guide.md#a-guide) [ok nested [brackets]](docs/guide.md)\n" +
			"`[in code](missing-in-code.md)` and ``[in `double` code](missing2.md)``\n" +
			"\\[not a link\\](missing-escaped.md) and [not closed](missing-open.md\n" +
			"[ref]: docs/guide.md\n" +
			"[^1]: a footnote, not a link\n" +
			"```markdown\n[in a fence](missing-fence.md)\n# Fenced heading\n```\n" +
			"   ~~~\n   [in an indented fence](missing-tilde.md)\n   ~~~\n" +
			"[broken file](docs/missing.md)\n" +
			"[broken dir](docs/guide.md/)\n" +
			"[broken anchor](#nope) [broken fenced heading](#fenced-heading) [broken repeat](#setup-3)\n" +
			"[broken other anchor](docs/guide.md#setup)\n" +
			"[broken image](img/none.png) [broken empty]()\n" +
			"[broken outside](../outside.md)\n" +
			"[broken ref]: docs/none.md\n" +
			"[broken multi-line text\n" +
			"continued](docs/none2.md)\n",
		"docs/guide.md":        "# A guide\n\nBack to [the top](../README.md#project) and [setup](../README.md#setup-1).\n[broken up](../README.md#a-guide)\n",
		"docs/with space.md":   "",
		"docs/paren(1).md":     "",
		"img/logo.png":         "",
		"main.go":              "package main\n",
		"docs/not-listed.md":   "[broken but not checked](none.md)\n",
		"docs/bad-escape.md":   "[bad escape](a%zz.md)\n",
		"docs/windows-eols.md": "# Title\r\n\r\n[ok](#title)\r\n",
	})
	errs := doccheck.Links(root, []string{"README.md", "docs/guide.md", "docs/bad-escape.md", "docs/windows-eols.md", "docs/absent.md"})
	var got []string
	for _, err := range errs {
		var le *doccheck.LinkError
		if !errors.As(err, &le) {
			got = append(got, "not a LinkError")
			continue
		}
		got = append(got, fmt.Sprintf("%s:%d: %s: %s", le.File, le.Line, le.Target, le.Reason))
	}
	want := []string{
		"README.md:36: docs/missing.md: no such file or directory",
		"README.md:37: docs/guide.md/: not a directory",
		"README.md:38: #nope: no heading with the anchor #nope in README.md",
		"README.md:38: #fenced-heading: no heading with the anchor #fenced-heading in README.md",
		"README.md:38: #setup-3: no heading with the anchor #setup-3 in README.md",
		"README.md:39: docs/guide.md#setup: no heading with the anchor #setup in docs/guide.md",
		"README.md:40: img/none.png: no such file or directory",
		"README.md:40: : empty target",
		"README.md:41: ../outside.md: points outside the repository",
		"README.md:42: docs/none.md: no such file or directory",
		"README.md:44: docs/none2.md: no such file or directory",
		"docs/guide.md:4: ../README.md#a-guide: no heading with the anchor #a-guide in README.md",
		"docs/bad-escape.md:1: a%zz.md: the path is not URL-escaped correctly",
		"not a LinkError", // docs/absent.md cannot be read
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
	if len(errs) > 0 {
		if msg, want := errs[0].Error(), "README.md:36: (docs/missing.md): no such file or directory"; msg != want {
			t.Errorf("Error() = %q; want %q", msg, want)
		}
	}
	if errs := doccheck.Links(root, []string{"docs/windows-eols.md"}); errs != nil {
		t.Errorf("Links of a file without broken links = %v; want nil", errs)
	}
}
