package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
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

// sized are the folders whose non-test code the limits hold.
var sized = []string{"pkg/", "functions/", "cmd/", "internal/handler/"}

// TestSizes holds the non-test Go files of the packages under sized to
// maxFileLines, and each function and function literal in them, from its
// func keyword to its closing brace, to maxFuncLines.
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range list(t) {
		path := strings.TrimPrefix(p.ImportPath, module+"/")
		if !hasAnyPrefix(path+"/", sized) {
			continue
		}
		for _, name := range append(p.GoFiles, p.IgnoredGoFiles...) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			checkSizes(t, fset, path+"/"+name, filepath.Join(p.Dir, name))
		}
	}
}

// hasAnyPrefix reports whether s starts with one of prefixes.
func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// checkSizes reports the file at file (named rel) and its functions when
// they are over the limits.
func checkSizes(t *testing.T, fset *token.FileSet, rel, file string) {
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
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
}
