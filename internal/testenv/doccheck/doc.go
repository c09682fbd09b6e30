// Package doccheck checks the documentation against the repository: that
// the configuration table in docs/configuration.md lists exactly the
// variables each function reads, and that the relative links of README.md
// and docs/ point at files and headings that exist (project issue #18).
//
// It is used by tests only: each function's config test calls ConfigTable,
// EnvRead and CheckConfig, and TestDocLinks in this package calls Links on
// the repository. Nothing here reads the process environment or holds
// state between calls, so every function is safe to call concurrently.
package doccheck
