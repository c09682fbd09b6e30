package doccheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3sqs/s3sqs/internal/testenv/doccheck"
	"github.com/s3sqs/s3sqs/pkg/settings"
)

// TestSettingsTable holds docs/configuration.md and docs/cli.md to the
// settings table: every variable of a row is in the configuration table,
// for the same function, every variable there has a row, and every flag
// of a row is on the CLI's page.
func TestSettingsTable(t *testing.T) {
	root := repoRoot(t)
	table, err := doccheck.ConfigTable(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range doccheck.CheckRows(settings.Rows(), table) {
		t.Error(err)
	}
	for _, err := range doccheck.CheckFlags(settings.Rows(), filepath.Join(root, "docs", "cli.md")) {
		t.Error(err)
	}
	for _, err := range doccheck.CheckDefaults(settings.Rows(), filepath.Join(root, "docs", "configuration.md")) {
		t.Error(err)
	}
}

func TestCheckDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "configuration.md")
	doc := "| variable | function | default | meaning |\n| --- | --- | --- | --- |\n" +
		"| `A` | both | `8MiB` | a |\n| `B` | both | `4` | b |\n| `C` | both | `off` | c |\n| `D` | both | `,` (tab for `.tsv` keys) | d |\n| `E` | both | none | e |\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := []settings.Row{
		{Env: "A", Default: "8MiB"}, {Env: "B", Default: "8"}, {Env: "C"}, {Env: "D"}, {Env: "E"}, {Flag: "cli-only", Default: "x"},
	}
	wantErrors(t, "CheckDefaults", doccheck.CheckDefaults(rows, path),
		"B: the settings table's default is \"8\", the configuration table's `4`",
		"C: the configuration table's default is `off`, the settings table has none")
}

// wantErrors fails t unless errs say want, in order.
func wantErrors(t *testing.T, name string, errs []error, want ...string) {
	t.Helper()
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckRows(t *testing.T) {
	rows := []settings.Row{
		{Env: "A", Function: settings.Both},
		{Env: "B", Function: settings.Fanout},
		{Env: "C", Function: settings.S3Ingest},
		{Flag: "cli-only"},
	}
	table := map[string]string{"A": "both", "B": "s3ingest", "D": "fanout"}
	wantErrors(t, "CheckRows", doccheck.CheckRows(rows, table),
		"the configuration table lists D, which has no row in the settings table",
		"the settings table gives B to fanout, the configuration table to s3ingest",
		"the settings table has C, which has no row in the configuration table")
	if errs := doccheck.CheckRows(rows[:1], map[string]string{"A": "both"}); errs != nil {
		t.Errorf("CheckRows of agreeing tables: %v", errs)
	}
}

func TestCheckFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cli.md")
	if err := os.WriteFile(path, []byte("Flags: `-chunk-size`, and -mode without backticks.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := []settings.Row{{Flag: "chunk-size"}, {Flag: "mode", Doc: "the mode"}, {Env: "X"}}
	errs := doccheck.CheckFlags(rows, path)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "does not name the flag -mode (the mode)") {
		t.Errorf("CheckFlags: %v; want one error for -mode", errs)
	}
	if errs := doccheck.CheckFlags(rows, filepath.Join(t.TempDir(), "none.md")); len(errs) != 1 {
		t.Errorf("CheckFlags of a missing file: %v; want one error", errs)
	}
}
