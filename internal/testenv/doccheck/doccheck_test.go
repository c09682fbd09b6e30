package doccheck_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
)

// TestDocLinks checks the links of the repository's README.md and of every
// Markdown file under docs/.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) && path == filepath.Join(root, "docs") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	errs := doccheck.Links(root, files)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.Logf("%d broken links in %s", len(errs), strings.Join(files, ", "))
	}
}

// repoRoot returns the directory of the go.mod above the working
// directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// writeFiles writes files (path → content) under a new temporary
// directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const header = "| variable | function | default | meaning |\n| --- | --- | --- | --- |\n"

func TestConfigTable(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    map[string]string
		wantErr []string // each must appear in the error
	}{
		{
			name: "one table",
			doc: "# Configuration\n\nSome text.\n\n" + header +
				"| `OUTPUT_QUEUE_URL` | s3ingest | required | the queue \\| with a pipe |\n" +
				"| `TARGET_QUEUE_URL` | `fanout` | | the target |\n" +
				"|`FORMAT`|both|`auto`|the format|\n" +
				"\nAfter the table.\n\n| other | table |\n| --- | --- |\n| `X` | y |\n",
			want: map[string]string{"OUTPUT_QUEUE_URL": "s3ingest", "TARGET_QUEUE_URL": "fanout", "FORMAT": "both"},
		},
		{
			name: "a table in a code block does not count",
			doc:  "```markdown\n" + header + "| `A` | fanout | | |\n```\n\n" + header + "| `B` | both | | |\n",
			want: map[string]string{"B": "both"},
		},
		{
			name: "outer pipes are optional",
			doc:  "variable | function | default | meaning\n--- | :-- | --: | :-:\n`A` | fanout | x | y\n",
			want: map[string]string{"A": "fanout"},
		},
		{name: "no table", doc: "# Configuration\n\n| variable | default | meaning |\n| --- | --- | --- |\n", wantErr: []string{"no table with the header"}},
		{name: "empty file", doc: "", wantErr: []string{"no table with the header"}},
		{name: "header without delimiter", doc: "| variable | function | default | meaning |\n| `A` | fanout | | |\n", wantErr: []string{":1: the header row is not followed by a delimiter row"}},
		{name: "header repeated", doc: header + "| `A` | fanout | | |\n| variable | function | default | meaning |\n", wantErr: []string{":4: the header row is repeated"}},
		{name: "two tables", doc: header + "| `A` | fanout | | |\n\n" + header + "| `B` | fanout | | |\n", wantErr: []string{":5: a second table"}},
		{name: "too few cells", doc: header + "| `A` | fanout | |\n", wantErr: []string{":3: a row of 3 cells, not 4"}},
		{name: "too many cells", doc: header + "| `A` | fanout | | | |\n", wantErr: []string{":3: a row of 5 cells"}},
		{name: "name without backticks", doc: header + "| A | fanout | | |\n", wantErr: []string{`:3: the variable cell "A" is not one name in backticks`}},
		{name: "two names in one cell", doc: header + "| `A`, `B` | fanout | | |\n", wantErr: []string{"not one name in backticks"}},
		{name: "unknown function", doc: header + "| `A` | fan-out | | |\n", wantErr: []string{`:3: A: the function "fan-out" is not fanout, s3ingest or both`}},
		{name: "duplicate variable", doc: header + "| `A` | fanout | | |\n| `B` | both | | |\n| `A` | s3ingest | | |\n", wantErr: []string{":5: A is listed again (first on line 3)"}},
		{
			name:    "every problem is reported",
			doc:     header + "| A | fanout | | |\n| `B` | none | | |\n",
			wantErr: []string{":3: the variable cell", ":4: B: the function"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeFiles(t, map[string]string{"configuration.md": tc.doc})
			got, err := doccheck.ConfigTable(filepath.Join(root, "configuration.md"))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("table (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; table %v", got)
			}
			if got != nil {
				t.Errorf("table %v with an error; want nil", got)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q:\n%v", want, err)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, err := doccheck.ConfigTable(filepath.Join(t.TempDir(), "none.md")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v; want one that is os.ErrNotExist", err)
		}
	})
}

func TestCheckConfig(t *testing.T) {
	table := map[string]string{"A": "fanout", "B": "both", "C": "s3ingest", "D": "both"}
	tests := []struct {
		name string
		fn   string
		read []string
		want []string
	}{
		{name: "agree", fn: "fanout", read: []string{"A", "B", "D"}},
		{name: "agree on the other side", fn: "s3ingest", read: []string{"B", "C", "D"}},
		{
			name: "every kind of difference",
			fn:   "fanout",
			read: []string{"B", "C", "E"},
			want: []string{
				"the configuration table gives A to fanout (function fanout), but fanout does not read it",
				"fanout reads C, but its row in the configuration table says s3ingest: make it both",
				"the configuration table gives D to fanout (function both), but fanout does not read it",
				"fanout reads E, which has no row in the configuration table",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range doccheck.CheckConfig(tc.fn, tc.read, table) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvRead(t *testing.T) {
	// load reads A and B always, C only when B is set, D only when B is
	// set and C is "true", and E only when A and B are both set.
	load := func(getenv func(string) string) {
		a, b := getenv("A"), getenv("B")
		if b != "" && getenv("C") == "true" {
			getenv("D")
		}
		if a != "" && b != "" {
			getenv("E")
		}
	}
	got := doccheck.EnvRead(load, nil)
	if want := []string{"A", "B", "C", "D"}; !slices.Equal(got, want) {
		t.Errorf("EnvRead = %v; want %v", got, want)
	}
	got = doccheck.EnvRead(load, map[string]string{"A": "set"})
	if want := []string{"A", "B", "C", "D", "E"}; !slices.Equal(got, want) {
		t.Errorf("EnvRead with A set = %v; want %v", got, want)
	}
}

func ExampleCheckConfig() {
	table := map[string]string{"OUTPUT_QUEUE_URL": doccheck.S3Ingest, "FORMAT": doccheck.Both}
	read := doccheck.EnvRead(func(getenv func(string) string) {
		getenv("OUTPUT_QUEUE_URL")
		getenv("FORMAT")
		getenv("HANDOFF_BYTES")
	}, nil)
	for _, err := range doccheck.CheckConfig(doccheck.S3Ingest, read, table) {
		fmt.Println(err)
	}
	// Output:
	// s3ingest reads HANDOFF_BYTES, which has no row in the configuration table
}

// TestReadmeLeads checks that README.md is a front page: at most 250
// lines, with the demo's and the tests' commands, each followed by its
// output, within the first 60, and the test command the one CI runs.
func TestReadmeLeads(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(readme), "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the detail to docs/", len(lines))
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ciLines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	testCmd := ciLines[len(ciLines)-1]
	for _, cmd := range []string{"make demo", testCmd} {
		at := slices.Index(lines, cmd)
		if at < 0 {
			t.Errorf("README.md has no line %q", cmd)
			continue
		}
		// The command's own fence closes, then its output's opens and closes.
		fences := 0
		end := -1
		for i := at + 1; i < len(lines) && fences < 3; i++ {
			if strings.HasPrefix(lines[i], "```") {
				fences++
				end = i + 1
			}
		}
		if fences < 3 || end > 60 {
			t.Errorf("README.md: %q and its output end at line %d, want both within the first 60", cmd, end)
		}
	}
	if strings.Contains(string(readme), root) {
		t.Errorf("README.md names the path of this clone, %s", root)
	}
}
