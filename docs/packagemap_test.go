package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/orderagg/orderagg/"

// The package map of design.md is the code's: one node per package under
// internal/ (and cmd/orderagg), one arrow per import of non-test code
// between them, and no other.
func TestPackageMapMatchesTheImports(t *testing.T) {
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	drawn, nodes := packageMap(t, string(b))
	real, pkgs := importGraph(t, "..")
	for _, p := range pkgs {
		if !nodes[p] {
			t.Errorf("design.md's package map lacks %s", p)
		}
	}
	for _, e := range real {
		if !slices.Contains(drawn, e) {
			t.Errorf("design.md's package map lacks the arrow %s (an import in the code)", e)
		}
	}
	for _, e := range drawn {
		if !slices.Contains(real, e) {
			t.Errorf("design.md's package map draws %s, which no code imports", e)
		}
	}
}

var (
	mermaidBlock = regexp.MustCompile("(?s)```mermaid\n(.*?)```")
	arrow        = regexp.MustCompile(`^\s*(\w+)(?:\[([^\]]+)\])?\s*-->\s*(\w+)(?:\[([^\]]+)\])?\s*$`)
)

// packageMap reads the first mermaid block's arrows as "from -> to", each
// node named by its label (cmd/orderagg) or else internal/ID.
func packageMap(t *testing.T, doc string) (arrows []string, nodes map[string]bool) {
	t.Helper()
	m := mermaidBlock.FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("design.md has no mermaid package map")
	}
	labels := map[string]string{}
	name := func(id, label string) string {
		if label != "" {
			labels[id] = label
		}
		if l, ok := labels[id]; ok {
			return l
		}
		return "internal/" + id
	}
	nodes = map[string]bool{}
	for _, line := range strings.Split(m[1], "\n") {
		a := arrow.FindStringSubmatch(line)
		if a == nil {
			continue
		}
		from, to := name(a[1], a[2]), name(a[3], a[4])
		nodes[from], nodes[to] = true, true
		arrows = append(arrows, from+" -> "+to)
	}
	return arrows, nodes
}

// importGraph parses the imports of every non-test Go file of cmd/orderagg
// and of the packages under internal/, and returns the arrows between them
// and the packages.
func importGraph(t *testing.T, root string) (arrows, pkgs []string) {
	t.Helper()
	dirs := []string{"cmd/orderagg"}
	entries, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, "internal/"+e.Name())
		}
	}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if to, ok := strings.CutPrefix(p, module); ok && !seen[to] {
					seen[to] = true
					arrows = append(arrows, dir+" -> "+to)
				}
			}
		}
		if len(files) > 0 {
			pkgs = append(pkgs, dir)
		}
	}
	return arrows, pkgs
}
