package doccheck

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Values of a configuration table's function column: the name of one
// function, or Both for a variable that both functions read.
const (
	Fanout   = "fanout"
	S3Ingest = "s3ingest"
	Both     = "both"
)

// configHeader is the header row of the configuration table, cell by cell.
var configHeader = []string{"variable", "function", "default", "meaning"}

var (
	// variableCell is a variable cell: one name in backticks.
	variableCell = regexp.MustCompile("^`([A-Za-z_][A-Za-z0-9_]*)`$")
	// delimiterCell is a cell of a table's delimiter row, such as --- or :-:.
	delimiterCell = regexp.MustCompile(`^:?-+:?$`)
)

// ConfigTable reads the Markdown file at path and returns its configuration
// table as variable → function (Fanout, S3Ingest or Both).
//
// The file must hold exactly one table whose header row is
// `| variable | function | default | meaning |`, outside fenced code
// blocks. Each row's variable cell is one name in backticks and its
// function cell is fanout, s3ingest or both (backticks allowed). The table
// ends at the first blank line. ConfigTable returns a nil map and every
// problem it finds, joined, each with its line: no such table or more than
// one, the header repeated inside the table, a missing delimiter row, a row
// with another number of cells, a variable cell that is not one name in
// backticks, a variable listed twice, or an unknown function.
func ConfigTable(path string) (map[string]string, error) {
	table, _, err := readConfigTable(path)
	return table, err
}

// readConfigTable is ConfigTable that also returns each variable's
// default cell.
func readConfigTable(path string) (table, defaults map[string]string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("doccheck: %w", err)
	}
	var (
		errs    []error
		where   = map[string]int{} // variable → line of its row
		found   int                // header rows seen outside a table
		inTable bool
	)
	bad := func(n int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", path, n, fmt.Sprintf(format, args...)))
	}
	lines := markdownLines(data)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l.code {
			inTable = false
			continue
		}
		text := strings.TrimSpace(l.text)
		if text == "" {
			inTable = false
			continue
		}
		cells := tableCells(text)
		isHeader := slices.Equal(cells, configHeader)
		if !inTable {
			if !isHeader {
				continue
			}
			found++
			if found > 1 {
				bad(l.n, "a second table with the header | %s |: the file must hold one", strings.Join(configHeader, " | "))
			}
			if i+1 >= len(lines) || lines[i+1].code || !isDelimiterRow(lines[i+1].text) {
				bad(l.n, "the header row is not followed by a delimiter row such as | --- | --- | --- | --- |")
				continue
			}
			i++ // the delimiter row
			inTable = true
			if table == nil {
				table, defaults = map[string]string{}, map[string]string{}
			}
			continue
		}
		if isHeader {
			bad(l.n, "the header row is repeated inside the table")
			continue
		}
		if len(cells) != len(configHeader) {
			bad(l.n, "a row of %d cells, not %d: %s", len(cells), len(configHeader), text)
			continue
		}
		m := variableCell.FindStringSubmatch(cells[0])
		if m == nil {
			bad(l.n, "the variable cell %q is not one name in backticks", cells[0])
			continue
		}
		name := m[1]
		fn := strings.Trim(cells[1], "`")
		if fn != Fanout && fn != S3Ingest && fn != Both {
			bad(l.n, "%s: the function %q is not %s, %s or %s", name, cells[1], Fanout, S3Ingest, Both)
			continue
		}
		if prev, ok := where[name]; ok {
			bad(l.n, "%s is listed again (first on line %d)", name, prev)
			continue
		}
		where[name] = l.n
		table[name], defaults[name] = fn, cells[2]
	}
	if found == 0 {
		errs = append(errs, fmt.Errorf("%s: no table with the header | %s |", path, strings.Join(configHeader, " | ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return table, defaults, nil
}

// tableCells splits a table row into its trimmed cells. The outer pipes
// are optional and \| is a pipe inside a cell.
func tableCells(row string) []string {
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cell.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// isDelimiterRow reports whether line is a table's delimiter row for the
// configuration table's four columns.
func isDelimiterRow(line string) bool {
	cells := tableCells(strings.TrimSpace(line))
	if len(cells) != len(configHeader) {
		return false
	}
	for _, c := range cells {
		if !delimiterCell.MatchString(c) {
			return false
		}
	}
	return true
}

// probes are the values EnvRead gives each variable in turn, to reach the
// variables that are read only when another one is set.
var probes = []string{"1", "true", "x"}

// EnvRead returns, sorted, the names of the variables that load asks its
// getenv for. load is called first with base (nil for none: every variable
// unset). Then each variable read is probed: load is called once per probe
// value ("1", "true", "x") with that variable set, on top of base and of
// the values under which the variable was first read. So a variable read
// only when another is set (FANOUT_WORK_QUEUE_URL with HANDOFF_BYTES) is
// found, and so is a chain of them; a variable read only when two
// variables that are always read are both set is not. load must depend on
// nothing but getenv; its result and errors are ignored.
func EnvRead(load func(getenv func(string) string), base map[string]string) []string {
	found := map[string]map[string]string{} // variable → the values under which it was first read
	var queue []string                      // variables to probe, in the order found
	run := func(values map[string]string) {
		load(func(k string) string {
			if _, ok := found[k]; !ok {
				found[k] = values
				queue = append(queue, k)
			}
			if v, ok := values[k]; ok {
				return v
			}
			return base[k]
		})
	}
	run(nil)
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, p := range probes {
			values := maps.Clone(found[k])
			if values == nil {
				values = map[string]string{}
			}
			values[k] = p
			run(values)
		}
	}
	return slices.Sorted(maps.Keys(found))
}

// CheckConfig compares the variables that function reads (read, from
// EnvRead) with table (from ConfigTable) and returns one error per
// variable that differs, sorted by variable: a variable read but not in
// the table, read but given only to the other function, or given to
// function (by name or Both) but not read. It returns nil when they agree.
func CheckConfig(function string, read []string, table map[string]string) []error {
	type problem struct {
		name string
		err  error
	}
	var ps []problem
	isRead := map[string]bool{}
	for _, name := range read {
		isRead[name] = true
		switch fn, ok := table[name]; {
		case !ok:
			ps = append(ps, problem{name, fmt.Errorf("%s reads %s, which has no row in the configuration table", function, name)})
		case fn != function && fn != Both:
			ps = append(ps, problem{name, fmt.Errorf("%s reads %s, but its row in the configuration table says %s: make it %s", function, name, fn, Both)})
		}
	}
	for name, fn := range table {
		if (fn == function || fn == Both) && !isRead[name] {
			ps = append(ps, problem{name, fmt.Errorf("the configuration table gives %s to %s (function %s), but %s does not read it", name, function, fn, function)})
		}
	}
	slices.SortFunc(ps, func(a, b problem) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.err)
	}
	return errs
}

// CheckFunction checks one function's side of the table at tablePath:
// load (its loadConfig) must accept base, the smallest configuration, and
// the variables it reads (see EnvRead) must be the table's rows for
// function or both. It returns every problem, or nil.
func CheckFunction(function string, load func(getenv func(string) string) error, base map[string]string, tablePath string) []error {
	if err := load(func(k string) string { return base[k] }); err != nil {
		return []error{fmt.Errorf("the minimal configuration %v is refused: %w", base, err)}
	}
	table, err := ConfigTable(tablePath)
	if err != nil {
		return []error{err}
	}
	read := EnvRead(func(getenv func(string) string) { _ = load(getenv) }, base)
	return CheckConfig(function, read, table)
}
