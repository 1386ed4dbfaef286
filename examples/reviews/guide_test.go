package reviews_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	guidePath = "../../docs/adding-a-dependency.md"
	patchPath = "register.patch"
)

// patchFiles returns, per file the patch touches, the lines it adds.
func patchFiles(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(patchPath)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			cur = strings.TrimPrefix(strings.Fields(line)[2], "a/")
			files[cur] = nil
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			files[cur] = append(files[cur], line[1:])
		}
	}
	if len(files) == 0 {
		t.Fatal("the patch touches no file")
	}
	return files
}

var touchedBlock = regexp.MustCompile(`(?s)<!-- files-touched -->(.*?)<!-- /files-touched -->`)

// guideFiles returns the files the guide's "Files touched" table names: the
// first backquoted path of each row.
func guideFiles(t *testing.T, guide string) []string {
	t.Helper()
	m := touchedBlock.FindStringSubmatch(guide)
	if m == nil {
		t.Fatal("the guide has no <!-- files-touched --> table")
	}
	var out []string
	for _, row := range strings.Split(m[1], "\n") {
		if f := regexp.MustCompile("^\\| `([^`]+)`").FindStringSubmatch(row); f != nil {
			out = append(out, f[1])
		}
	}
	return out
}

// The guide lists exactly the files register.patch touches, the patch
// applies to this tree, and every Go quote in the guide is code that
// exists: in the patch's added lines or in the repository's sources.
func TestGuideMatchesThePatch(t *testing.T) {
	b, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	guide := string(b)
	patched := patchFiles(t)

	listed := guideFiles(t, guide)
	var touched []string
	for f := range patched {
		touched = append(touched, f)
	}
	slices.Sort(touched)
	if sorted := slices.Sorted(slices.Values(listed)); !slices.Equal(sorted, touched) {
		t.Errorf("the guide lists %d files:\n  %s\nthe patch touches %d:\n  %s",
			len(listed), strings.Join(sorted, "\n  "), len(touched), strings.Join(touched, "\n  "))
	}
	if slices.Contains(touched, "examples/reviews/reviews.go") {
		t.Error("the patch edits the example itself")
	}

	if _, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command("git", "apply", "--check", "examples/reviews/"+patchPath)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("register.patch no longer applies to this tree (refresh it: see the guide's last section): %v\n%s", err, out)
		}
	} else {
		t.Log("git is not on PATH: whether the patch applies is left to integration's TestReviewsRegistered")
	}

	// Every ```go block of the guide, line by line in order, must be found
	// in one source: a file's added lines in the patch, or a Go file of the
	// repository. "// …" lines mark elisions.
	sources := map[string][]string{}
	for f, lines := range patched {
		sources["patch:"+f] = normalize(lines)
	}
	err = filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sources[p] = normalize(strings.Split(string(src), "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(guide, -1)
	if len(blocks) < 5 {
		t.Fatalf("only %d Go blocks in the guide", len(blocks))
	}
	for _, blk := range blocks {
		quote := normalize(strings.Split(blk[1], "\n"))
		found := false
		for _, src := range sources {
			if inOrder(quote, src) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("this quote of the guide is in no source (the patch or the tree):\n%s", blk[1])
		}
	}
}

// normalize drops blank lines and "// …" elisions and collapses runs of
// white space, so alignment does not matter.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" || strings.HasPrefix(l, "// …") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// inOrder reports whether quote's lines appear in src in the same order,
// each quote line matching a whole source line.
func inOrder(quote, src []string) bool {
	i := 0
	for _, l := range src {
		if i < len(quote) && l == quote[i] {
			i++
		}
	}
	return i == len(quote)
}

// The checks above can fail: a file list that misses one, and a quote that
// is not in the code.
func TestGuideChecksCanFail(t *testing.T) {
	guide := "<!-- files-touched -->\n| `a.go` | x |\n| `b.go` | y |\n<!-- /files-touched -->"
	if got := guideFiles(t, guide); !slices.Equal(got, []string{"a.go", "b.go"}) {
		t.Errorf("guideFiles = %v", got)
	}
	src := normalize([]string{"func f() {", "\tx := 1", "", "\treturn x", "}"})
	if !inOrder(normalize([]string{"func f() {", "  // … elided", "return x"}), src) {
		t.Error("an elided quote was not found")
	}
	if inOrder(normalize([]string{"func f() {", "return y"}), src) || inOrder(normalize([]string{"return x", "x := 1"}), src) {
		t.Error("a wrong or reordered quote was found")
	}
}
