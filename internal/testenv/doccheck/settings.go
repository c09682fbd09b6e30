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
