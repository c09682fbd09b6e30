package doccheck

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/s3sqs/s3sqs/pkg/settings"
)

// CheckRows compares the rows of the settings table (pkg/settings)
// with table (from ConfigTable) and returns one error per variable that
// differs, sorted by variable: a row's variable the docs do not list, one
// the docs give to another function, or a variable the docs list that has
// no row. Rows without a variable (settings only the CLI or a request
// gives) are not compared.
func CheckRows(rows []settings.Row, table map[string]string) []error {
	var errs []error
	inRows := map[string]bool{}
	for _, r := range rows {
		if r.Env == "" {
			continue
		}
		inRows[r.Env] = true
		switch fn, ok := table[r.Env]; {
		case !ok:
			errs = append(errs, fmt.Errorf("the settings table has %s, which has no row in the configuration table", r.Env))
		case fn != r.Function:
			errs = append(errs, fmt.Errorf("the settings table gives %s to %s, the configuration table to %s", r.Env, r.Function, fn))
		}
	}
	for name := range table {
		if !inRows[name] {
			errs = append(errs, fmt.Errorf("the configuration table lists %s, which has no row in the settings table", name))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// CheckDefaults holds the default column of the configuration table at
// path to the rows' defaults: a row with a Default must have its cell
// begin with it in backticks; a row without one must not have a cell that
// is only a value in backticks, a default the settings table lacks (a
// default that depends on something else is written with the words that
// say on what).
func CheckDefaults(rows []settings.Row, path string) []error {
	_, defaults, err := readConfigTable(path)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, r := range rows {
		cell, ok := defaults[r.Env]
		switch {
		case r.Env == "" || !ok:
		case r.Default != "" && !strings.HasPrefix(cell, "`"+r.Default+"`"):
			errs = append(errs, fmt.Errorf("%s: the settings table's default is %q, the configuration table's %s", r.Env, r.Default, cell))
		case r.Default == "" && strings.HasPrefix(cell, "`") && strings.Count(cell, "`") == 2 && strings.HasSuffix(cell, "`"):
			errs = append(errs, fmt.Errorf("%s: the configuration table's default is %s, the settings table has none", r.Env, cell))
		}
	}
	return errs
}

// CheckFlags reports each row's flag that the Markdown file at path (the
// CLI's page) does not name as `-flag` (in backticks, as the page writes
// flags), one error per flag.
func CheckFlags(rows []settings.Row, path string) []error {
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{fmt.Errorf("doccheck: %w", err)}
	}
	var errs []error
	for _, r := range rows {
		if r.Flag != "" && !strings.Contains(string(data), "`-"+r.Flag) {
			errs = append(errs, fmt.Errorf("%s does not name the flag -%s (%s)", path, r.Flag, r.Doc))
		}
	}
	return errs
}
