// Package layers holds the tests that keep the module's packages in their
// rooms (which packages may import which, as docs/packages.md draws them)
// and the shipped code's functions and files to a size that reads.
package layers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/s3sqs/s3sqs/pkg/engine"
)

const module = "github.com/s3sqs/s3sqs"

// A room is a set of packages, by import path relative to the module (a
// trailing "/" takes a folder's packages), and the rooms its packages may
// import directly.
type room struct {
	name     string
	packages []string
	imports  []string
}

// rooms is the layout of docs/packages.md. Every package of the module is
// in exactly one room, so that a new package is placed on purpose. infra/
// is a module of its own and imports none of these.
var rooms = []room{
	// The leaf packages import only each other; pkg/sqsbatch and
	// pkg/s3event import nothing of ours but the error classes (see
	// TestLeavesImportNothingAbove). pkg/internal/ holds the helpers only
	// pkg/ uses.
	{"leaf", []string{
		"pkg/sqsbatch", "pkg/s3event", "pkg/partialbatch", "pkg/sqsextended",
		"pkg/claims", "pkg/runstate", "pkg/dataset", "pkg/records", "pkg/recordjson", "pkg/parquetjson", "pkg/csvrecord",
		"pkg/awserr", "pkg/strictjson", "pkg/textcut", "pkg/internal/",
	}, []string{"leaf"}},
	{"settings", []string{"pkg/settings"}, nil},
	{"wire", []string{"pkg/worktask"}, []string{"leaf", "settings"}},
	{"engine", []string{"pkg/engine"}, []string{"leaf", "settings", "wire"}},
	// awssetup is the start-up that the CLI shares with the functions
	// (clients, the one constructor of a Runner, the words for a queue
	// that cannot be used), apart from the Lambda runtime so that the CLI
	// links none of it.
	{"awssetup", []string{"internal/awssetup"}, []string{"leaf", "settings", "engine"}},
	// reconcile compares a listing with s3ingest's markers, for the CLI and
	// fanout's handler alike.
	{"reconcile", []string{"internal/reconcile"}, []string{"leaf"}},
	{"runtime", []string{"internal/runtime/"}, []string{"leaf", "settings", "wire", "engine", "awssetup", "runtime"}},
	{"handler", []string{"internal/handler/"}, []string{"leaf", "settings", "wire", "engine", "runtime", "reconcile"}},
	{"redrive", []string{"internal/redrive"}, []string{"leaf", "settings", "wire", "engine"}},
	{"bootstrap", []string{"functions/"}, []string{"leaf", "settings", "wire", "engine", "awssetup", "runtime", "handler", "redrive", "reconcile"}},
	// The CLI runs the engine itself: a Lambda handler translates Lambda's
	// payloads, which the CLI does not get.
	{"cli", []string{"cmd/"}, []string{"leaf", "settings", "wire", "engine", "awssetup", "redrive", "reconcile"}},
	{"testenv", []string{"internal/testenv/"}, []string{"*"}},
	{"tools", []string{"tools/"}, []string{"*"}},
}

// roomOf returns the room of the package at path (relative to the module),
// by its longest matching entry.
func roomOf(path string) (room, bool) {
	var best room
	n := -1
	for _, r := range rooms {
		for _, p := range r.packages {
			ok := path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p))
			if ok && len(p) > n {
				best, n = r, len(p)
			}
		}
	}
	return best, n >= 0
}

// pkg is what go list says of one of the module's packages, without its
// tests: test files may import the test environment. IgnoredGoFiles are
// those a build constraint leaves out on this machine, test files among
// them.
type pkg struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	IgnoredGoFiles []string
	Imports        []string
	Deps           []string
}

// listed is the module's packages, listed once for all the tests here.
var listed = sync.OnceValues(func() ([]pkg, error) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,IgnoredGoFiles,Imports,Deps", module+"/...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		return nil, fmt.Errorf("go list found %d packages: is the module's root above this directory?", len(pkgs))
	}
	return pkgs, nil
})

// list returns the module's packages.
func list(t *testing.T) []pkg {
	t.Helper()
	pkgs, err := listed()
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// ours returns the module-relative paths among paths.
func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

// TestRooms checks that every package is in a room and imports only from
// the rooms its room may import.
func TestRooms(t *testing.T) {
	for _, p := range list(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		r, ok := roomOf(path)
		if !ok {
			t.Errorf("%s is in no room: add it to rooms here and to docs/packages.md", path)
			continue
		}
		for _, imp := range ours(p.Imports) {
			to, ok := roomOf(imp)
			if !ok {
				continue // reported as its own package
			}
			if !slices.Contains(r.imports, "*") && !slices.Contains(r.imports, to.name) {
				t.Errorf("%s (%s) imports %s (%s): a %s package may import only %v", path, r.name, imp, to.name, r.name, r.imports)
			}
		}
	}
}

// TestShippedCodeLinksNoTestEnvironment walks each function's and command's
// dependencies: no test harness ships in a bootstrap.
func TestShippedCodeLinksNoTestEnvironment(t *testing.T) {
	for _, p := range list(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		if r, _ := roomOf(path); r.name == "testenv" || r.name == "tools" {
			continue
		}
		for _, dep := range ours(p.Deps) {
			if strings.HasPrefix(dep, "internal/testenv/") || strings.HasPrefix(dep, "tools/") {
				t.Errorf("%s links %s", path, dep)
			}
		}
	}
}

// TestLibrariesStandAlone walks pkg/'s dependencies: a program of another
// module that imports our libraries gets everything they rely on (the
// error classification, the settings' checks) as packages it can import
// too, and nothing of internal/: no Lambda handler or start-up code.
func TestLibrariesStandAlone(t *testing.T) {
	for _, p := range list(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		if !strings.HasPrefix(path, "pkg/") {
			continue
		}
		for _, dep := range ours(p.Deps) {
			if strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s links %s", path, dep)
			}
		}
	}
}

// TestLeavesImportNothingAbove holds pkg/sqsbatch and pkg/s3event, whose
// exported API other programs build on, to the SDK and the error classes.
func TestLeavesImportNothingAbove(t *testing.T) {
	allowed := map[string][]string{
		"pkg/s3event":  nil,
		"pkg/sqsbatch": {"pkg/awserr"},
	}
	for _, p := range list(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		want, ok := allowed[path]
		if !ok {
			continue
		}
		for _, imp := range ours(p.Imports) {
			if !slices.Contains(want, imp) {
				t.Errorf("%s imports %s", path, imp)
			}
		}
	}
}

// TestRoomOf checks the matching itself, so that a rule above cannot pass
// by matching nothing.
func TestRoomOf(t *testing.T) {
	for path, want := range map[string]string{
		"pkg/engine":                     "engine",
		"pkg/enginex":                    "",
		"internal/handler/ingesthandler": "handler",
		"internal/testenv/simulate":      "testenv",
		"internal/runtime/lambdaenv":     "runtime",
		"functions/fanout":               "bootstrap",
		"internal/redrive":               "redrive",
		"internal/redrivex":              "",
		"internal/reconcile":             "reconcile",
		"pkg/internal/ddbattr":           "leaf",
		"pkg/settings":                   "settings",
		"cmd/s3sqs":                      "cli",
	} {
		r, _ := roomOf(path)
		if r.name != want {
			t.Errorf("roomOf(%q) = %q, want %q", path, r.name, want)
		}
	}
}

// TestCLILinksNoLambdaRuntime walks the CLI's dependencies: s3sqs runs on a
// laptop or a build host, so it shares the AWS start-up (internal/awssetup)
// but links neither the functions' start-up and handlers nor aws-lambda-go's
// runtime client.
func TestCLILinksNoLambdaRuntime(t *testing.T) {
	for _, p := range list(t) {
		if p.ImportPath != module+"/cmd/s3sqs" {
			continue
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, module+"/internal/runtime/") || strings.HasPrefix(dep, module+"/internal/handler/") || dep == "github.com/aws/aws-lambda-go/lambda" {
				t.Errorf("cmd/s3sqs links %s", dep)
			}
		}
		return
	}
	t.Fatal("go list did not list cmd/s3sqs")
}

// TestRunnerHandsOutNoParts holds the engine's exported surface to calls
// that run work: no method of *engine.Runner returns an interface (a
// claims store, a client) or a pointer to another package's type (a
// sender) that a caller could type-assert or drive behind the engine's
// back, and there are at most ten of them.
func TestRunnerHandsOutNoParts(t *testing.T) {
	runner := reflect.TypeFor[*engine.Runner]()
	errType := reflect.TypeFor[error]()
	for i := range runner.NumMethod() {
		m := runner.Method(i)
		for out := range m.Type.Outs() {
			switch {
			case out.Kind() == reflect.Interface && out != errType:
				t.Errorf("Runner.%s returns %s, an interface", m.Name, out)
			case out.Kind() == reflect.Pointer && out.Elem().PkgPath() != runner.Elem().PkgPath():
				t.Errorf("Runner.%s returns %s, a part of the engine", m.Name, out)
			}
		}
	}
	if n := runner.NumMethod(); n > 10 {
		t.Errorf("*engine.Runner has %d exported methods, want at most 10", n)
	}
}
