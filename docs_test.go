package cloison

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The repository must stand alone: a clone has no issue tracker and no
// files beside it, so a document that links to a missing file, or a comment
// that gives its reason as an issue number, a section of one or a design
// file outside the repository, leaves the reader without the reason.

// skipDirs are never read: build outputs, caches and installed packages.
var skipDirs = map[string]bool{".git": true, ".cache": true, "bin": true, "node_modules": true}

// outsideRef matches what a comment must not cite: an issue number, a
// section sign before a number (RFC sections, "RFC 7638 §3", are kept) or
// the design file that lived outside the repository. The words are spelled
// in pieces here and below so that a grep of the tree for such citations
// does not find this file.
var outsideRef = regexp.MustCompile(`[Ii]ssues? #?[0-9]+|§ ?[0-9]|` + "ARCHI" + `TECTURE\.md|\.\./shared`)

var rfcSection = regexp.MustCompile(`RFC ?[0-9]+ §`)

// TestCommentsStandAlone fails on a Go comment that cites an issue, a
// section of one, or a file outside the repository.
func TestCommentsStandAlone(t *testing.T) {
	walkRepo(t, func(path string) {
		if !strings.HasSuffix(path, ".go") {
			return
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				text := rfcSection.ReplaceAllString(c.Text, "")
				if m := outsideRef.FindString(text); m != "" {
					t.Errorf("%s: comment cites %q; say the reason itself", fset.Position(c.Pos()), m)
				}
			}
		}
	})
}

// TestDocumentLinks fails on a relative link in a Markdown file whose
// target does not exist, or whose #anchor names no heading of the target.
func TestDocumentLinks(t *testing.T) {
	n := 0
	walkRepo(t, func(path string) {
		if !strings.HasSuffix(path, ".md") || strings.Contains(path, "testdata"+string(filepath.Separator)) {
			return
		}
		for _, l := range markdownLinks(t, path) {
			n++
			target, anchor, _ := strings.Cut(l.dest, "#")
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", path, l.line, l.dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !headingAnchors(t, file)[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", path, l.line, l.dest, file, anchor)
			}
		}
	})
	if n == 0 {
		t.Fatal("no relative link found: the walk or the link pattern is broken")
	}
}

// TestLinkCheckerFindsBrokenLinks shows the checker able to fail: a link
// to a missing file and one to a missing heading are both reported.
func TestLinkCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	os.WriteFile(filepath.Join(dir, "other.md"), []byte("# Other\n## A `code` heading (with parts)\n"), 0o644)
	os.WriteFile(page, []byte("[ok](other.md#a-code-heading-with-parts) [web](https://example.com/x)\n"+
		"[gone](missing.md) [bad anchor](other.md#nowhere)\n```\n[in code](ignored.md)\n```\n"), 0o644)
	links := markdownLinks(t, page)
	var dests []string
	for _, l := range links {
		dests = append(dests, l.dest)
	}
	if got := strings.Join(dests, " "); got != "other.md#a-code-heading-with-parts missing.md other.md#nowhere" {
		t.Fatalf("links found: %q", got)
	}
	anchors := headingAnchors(t, filepath.Join(dir, "other.md"))
	if !anchors["a-code-heading-with-parts"] || anchors["nowhere"] {
		t.Fatalf("anchors: %v", anchors)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.md")); err == nil {
		t.Fatal("missing.md exists")
	}
	if outsideRef.FindString(rfcSection.ReplaceAllString("// why (iss"+"ue 12 item 3)", "")) == "" ||
		outsideRef.FindString(rfcSection.ReplaceAllString("// see §"+"5", "")) == "" ||
		outsideRef.FindString(rfcSection.ReplaceAllString("// RFC 7638 §3", "")) != "" {
		t.Fatal("outsideRef does not tell an issue citation from an RFC section")
	}
}

func walkRepo(t *testing.T, visit func(path string)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		visit(path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type mdLink struct {
	dest string
	line int
}

var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the relative link destinations of a Markdown file,
// outside fenced code blocks and inline code spans.
func markdownLinks(t *testing.T, path string) []mdLink {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mdLink
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkPattern.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			dest := m[1]
			if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
				continue
			}
			out = append(out, mdLink{dest, n})
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// stripCodeSpans removes `code spans` from a line, so link-like text in
// code is not taken for a link.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors a Markdown renderer gives the
// headings of a file, as GitHub makes them: lower case, punctuation other
// than '-' and '_' dropped, spaces as '-'; a repeated heading gets -1, -2….
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[a+"-"+strconv.Itoa(k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
