package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Limits of the shipped code's functions and files, in lines, so that a
// function reads on a screen and a file holds one subject.
const (
	maxFuncLines = 80
	maxFileLines = 500
)

// TestSizes holds the non-test Go files under pkg/, functions/, cmd/ and
// internal/handler/ to maxFileLines, and each function and function literal
// in them, from its func keyword to its closing brace, to maxFuncLines.
func TestSizes(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	for _, dir := range []string{"pkg", "functions", "cmd", "internal/handler"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
				t.Errorf("%s has %d lines, more than %d", rel, n, maxFileLines)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var body *ast.BlockStmt
				switch fn := n.(type) {
				case *ast.FuncDecl:
					body = fn.Body
				case *ast.FuncLit:
					body = fn.Body
				}
				if body != nil {
					start, end := fset.Position(n.Pos()), fset.Position(body.End())
					if lines := end.Line - start.Line + 1; lines > maxFuncLines {
						t.Errorf("%s:%d: a function of %d lines, more than %d", rel, start.Line, lines, maxFuncLines)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
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
