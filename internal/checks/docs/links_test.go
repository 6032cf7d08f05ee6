package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// repoRoot is the directory holding go.mod, found upwards from the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// skipDir names directories that hold no file of atmost's own: version control, build output,
// and the Bluesky lane's installed Node and packages.
func skipDir(rel string) bool {
	base := filepath.Base(rel)
	switch {
	case rel == "bin", rel == filepath.Join("scripts", "bluesky-pds", "node"), base == "node_modules":
		return true
	case strings.HasPrefix(base, ".") && base != ".ci" && rel != ".":
		return true
	}
	return false
}

// sourceFiles returns every text file of the repository under root, by path relative to it.
func sourceFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(b) > 4<<20 || bytes.IndexByte(b, 0) >= 0 {
			// Binary or generated data, never a document that cites one; kept empty, so that a
			// link to it (a screenshot) resolves.
			files[filepath.ToSlash(rel)] = nil
			return nil
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	require.NoError(t, err)
	return files
}

// headingLine is an ATX heading: one to six '#', a space, the text.
var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// anchors returns the anchor of every heading of a Markdown document, as GitHub makes them: the
// heading's text in lower case, everything but letters, digits, spaces, '-' and '_' dropped,
// spaces turned into '-'; a repeated anchor gets -1, -2, ... Headings inside fenced code blocks
// are not headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(md) {
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// proseLines returns the lines of a Markdown document outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		out = append(out, line)
	}
	return out
}

// docReference is a reference to a document of docs/ from anywhere in the repository, with the
// heading it points at: docs/design.md#the-witness.
var docReference = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?`)

// inlineCode is a code span of a Markdown line.
var inlineCode = regexp.MustCompile("`[^`]*`")

// markdownLink is an inline link or image: [text](target) or [text](target "title").
var markdownLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// brokenReferences returns one line for every reference in files that names a document of
// docs/ that does not exist, or a heading that document does not have.
func brokenReferences(files map[string][]byte) []string {
	var out []string
	headings := map[string]map[string]bool{}
	for path, b := range files {
		if strings.HasPrefix(path, "docs/") && strings.HasSuffix(path, ".md") {
			headings[strings.TrimPrefix(path, "docs/")] = anchors(string(b))
		}
	}
	for path, b := range files {
		for _, m := range docReference.FindAllStringSubmatch(string(b), -1) {
			doc, frag := m[1], m[2]
			hs, ok := headings[doc]
			switch {
			case !ok:
				out = append(out, path+": "+m[0]+": docs/"+doc+" does not exist")
			case frag != "" && !hs[frag]:
				out = append(out, path+": "+m[0]+": docs/"+doc+" has no heading #"+frag)
			}
		}
	}
	sort.Strings(out)
	return out
}

// brokenLinks returns one line for every relative link of a Markdown file in files whose target
// does not exist, or whose #fragment is not a heading of the Markdown file it points at.
func brokenLinks(files map[string][]byte) []string {
	var out []string
	for path, b := range files {
		if !strings.HasSuffix(path, ".md") {
			continue
		}
		for _, line := range proseLines(string(b)) {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				resolved := path
				if file != "" {
					resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(path), file)))
				}
				body, ok := files[resolved]
				if !ok && !isDir(files, resolved) {
					out = append(out, path+": ("+target+"): "+resolved+" does not exist")
					continue
				}
				if frag != "" && strings.HasSuffix(resolved, ".md") && !anchors(string(body))[frag] {
					out = append(out, path+": ("+target+"): "+resolved+" has no heading #"+frag)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// isDir reports whether some file of files lies under dir.
func isDir(files map[string][]byte, dir string) bool {
	if dir == "." {
		return true
	}
	for path := range files {
		if strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}

// Every docs/<file>.md#<heading> reference in the repository (Go, SQL, Markdown, scripts, the
// mutation list) names a heading that exists.
func TestEveryReferenceToADocumentNamesAHeadingThatExists(t *testing.T) {
	files := sourceFiles(t, repoRoot(t))
	require.Contains(t, files, "docs/design.md")
	referenced := 0
	for _, b := range files {
		referenced += len(docReference.FindAll(b, -1))
	}
	require.Positive(t, referenced, "no reference to docs/ found: the walk missed the repository")
	require.Empty(t, brokenReferences(files))
}

// Every relative link of every Markdown file names a file that exists, and a heading of it that
// exists.
func TestEveryRelativeMarkdownLinkResolves(t *testing.T) {
	files := sourceFiles(t, repoRoot(t))
	require.Contains(t, files, "README.md")
	require.Empty(t, brokenLinks(files))
}

// The checks above can fail: they notice a missing heading, a missing document and a missing
// link target, and accept what exists.
func TestTheReferenceChecksNoticeWhatIsMissing(t *testing.T) {
	design := "# d\n\n## The witness\n\n```\n## Not a heading\n```\n\n### What a send's ending proves\n\n## The witness\n"
	ref := func(s string) []byte { return []byte("// see " + "docs/" + s + "\n") }
	files := map[string][]byte{
		"docs/design.md": []byte(design),
		"a.go":           ref("design.md#the-witness"),
		"b.sql":          ref("design.md#what-a-sends-ending-proves"),
		"c.txt":          ref("design.md#the-witness-1"),
		"d.go":           ref("design.md"),
	}
	require.Empty(t, brokenReferences(files))
	files["e.go"] = ref("design.md#not-a-heading")
	files["f.go"] = ref("nowhere.md#the-witness")
	require.Len(t, brokenReferences(files), 2)

	files = map[string][]byte{
		"README.md":      []byte("[d](docs/design.md#the-witness) [r](#top) [x](https://example.org/x#y) `[no](nowhere.md)`\n\n# Top\n"),
		"docs/design.md": []byte(design + "[up](../README.md#top) [dir](../docs) [self](#the-witness)\n"),
	}
	require.Empty(t, brokenLinks(files))
	files["docs/"+"other.md"] = []byte("[a](design.md#nope) [b](missing.md) [c](#also-nope)\n```\n[d](nowhere.md)\n```\n")
	require.Len(t, brokenLinks(files), 3)
}

func TestAnchorsFollowGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"The SQL dialect":                               "the-sql-dialect",
		"What a send's ending proves":                   "what-a-sends-ending-proves",
		"Running everything in one process: atmost dev": "running-everything-in-one-process-atmost-dev",
		"The `webhook` platform":                        "the-webhook-platform",
		"What atmost guarantees, and what it does not":  "what-atmost-guarantees-and-what-it-does-not",
		"PostgreSQL and CockroachDB":                    "postgresql-and-cockroachdb",
		"Tests and make_targets":                        "tests-and-make_targets",
	} {
		require.Equal(t, want, anchor(heading), heading)
	}
}
