// Package docs holds no code: its test checks the repository's markdown.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Every relative link in the repository's markdown (README.md, docs/*.md and
// the other READMEs) must name a file or directory inside the repository,
// and its #anchor a heading of that file: a clone has nothing else, and the
// GitHub view of a missing target is a 404.
func TestMarkdownLinksResolveInsideTheRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	for _, must := range []string{"README.md", "docs/design.md", "docs/adding-a-dependency.md"} {
		if !slices.Contains(files, must) {
			t.Fatalf("%s not among the checked files %v", must, files)
		}
	}
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(src)) {
			checked++
			if msg := checkLink(root, f, l.target); msg != "" {
				t.Errorf("%s:%d: link %q: %s", f, l.line, l.target, msg)
			}
		}
	}
	if checked < 10 { // the README alone has more: a parser gone blind would pass
		t.Fatalf("only %d links found", checked)
	}
}

// The checker itself: each bad link is caught, each good one passes.
func TestCheckLink(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Title\n\n## Quick start\n\n## The last-good cache\n\n## Quick start\n\n```\n## not a heading\n```\n")
	write("docs/a.md", "# A — the design, in short\n\n### `serve` flags (v2)\n")
	write("examples/x/x.go", "package x\n")
	for target, want := range map[string]string{
		"docs/a.md":                        "",
		"docs/a.md#a--the-design-in-short": "",
		"docs/a.md#serve-flags-v2":         "",
		"#quick-start":                     "",
		"#quick-start-1":                   "",
		"#the-last-good-cache":             "",
		"examples/x":                       "",
		"examples/x/":                      "",
		"examples/x/x.go":                  "",
		"https://example.com/x.md":         "",
		"mailto:a@example.com":             "",
		"docs/b.md":                        "no such file",
		"../shared/spec/contract.md":       "outside the repository",
		"/etc/passwd":                      "outside the repository",
		"#quick-start-2":                   "no heading",
		"#not-a-heading":                   "no heading",
		"docs/a.md#nope":                   "no heading",
	} {
		got := checkLink(root, "README.md", target)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("checkLink(%q) = %q, want %q", target, got, want)
		}
	}
	// From a file in a sub-directory, relative to that directory.
	if got := checkLink(root, "docs/a.md", "../README.md#quick-start"); got != "" {
		t.Errorf("from docs/: %s", got)
	}
	if got := checkLink(root, "docs/a.md", "README.md"); !strings.Contains(got, "no such file") {
		t.Errorf("from docs/, README.md resolved: %q", got)
	}

	src := "See [a](docs/a.md) and ![img](x.png \"title\"), `[no](code.md)`,\n" +
		"```sh\n[no](fenced.md)\n```\n[ref]: docs/ref.md\n<a href=\"raw.md\">raw</a> [b](<docs/with space.md>)\n"
	var got []string
	for _, l := range links(src) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"1:docs/a.md", "1:x.png", "5:docs/ref.md", "6:docs/with space.md", "6:raw.md"}
	if !slices.Equal(got, want) {
		t.Errorf("links = %v, want %v", got, want)
	}
}

// markdownFiles lists the repository's markdown, as slash paths from root,
// leaving out build output and VCS metadata.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "build/out" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type link struct {
	line   int
	target string
}

var (
	// [text](target "title") and ![alt](target); target may be <wrapped>.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlLink   = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// links returns the link targets of a markdown document, outside code
// blocks and code spans.
func links(src string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, strings.Trim(m[1], "<>")})
		}
		for _, m := range htmlLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// checkLink says what is wrong with target, a link in the markdown file
// from (a slash path from root), or "" when it resolves.
func checkLink(root, from, target string) string {
	if scheme.MatchString(target) {
		return "" // a web address: not this test's business
	}
	file, anchor, _ := strings.Cut(target, "#")
	var rel string
	switch {
	case file == "":
		rel = from // #anchor: a heading of this file
	case strings.HasPrefix(file, "/"):
		return "an absolute path is outside the repository"
	default:
		rel = path.Clean(path.Join(path.Dir(from), file))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "points outside the repository (a clone does not have " + rel + ")"
		}
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	info, err := os.Stat(full)
	if err != nil {
		return "no such file: " + rel
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(rel, ".md") {
		return "an anchor into " + rel + ", which is not a markdown file"
	}
	src, err := os.ReadFile(full)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(headingAnchors(string(src)), anchor) {
		return fmt.Sprintf("no heading of %s has the anchor #%s", rel, anchor)
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives a document's ATX
// headings: lower case, punctuation dropped, spaces turned into hyphens,
// and -1, -2, … after a repeated one.
func headingAnchors(src string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(line, "#") || len(line)-len(strings.TrimLeft(line, "#")) > 6 {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}
