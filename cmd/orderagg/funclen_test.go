package main

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

// maxFuncLines is the longest a non-test function may be, from its func
// keyword to its closing brace: longer ones read better as named steps.
const maxFuncLines = 80

// longFuncs are the functions known to run over maxFuncLines, by file and
// name, while they wait to be split (none today). An entry that is no
// longer long fails the test too, so that the list only shrinks.
var longFuncs = map[string]bool{}

// TestNoLongFunctions holds every non-test function of the repository (the
// service, the load tool, the examples and the other modules under it) to
// maxFuncLines. It lives here because the repository's root is no package.
func TestNoLongFunctions(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not at %s: %v", root, err)
	}
	long, err := funcsOver(root, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range long {
		if !longFuncs[key] {
			t.Errorf("%s is %d lines, over %d: split it into named steps", key, n, maxFuncLines)
		}
	}
	for key := range longFuncs {
		if _, ok := long[key]; !ok {
			t.Errorf("%s is no longer over %d lines (or is gone): remove it from longFuncs", key, maxFuncLines)
		}
	}
}

// funcsOver returns the functions and methods declared in the .go files
// under root, test files excepted, that span more than limit lines: their
// length by "slash/path/from/root.go Name" (Recv.Name for a method).
func funcsOver(root string, limit int) (map[string]int, error) {
	long := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > limit {
				long[filepath.ToSlash(rel)+" "+funcName(fd)] = n
			}
		}
		return nil
	})
	return long, err
}

// funcName is Name for a function and Recv.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
