package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A changelog entry is one or two lines, as CONTRIBUTING.md's "The changelog" says: what changed
// for a deployment, a producer or a consumer, and where to read more. The figures and the story
// go in the commit's body and docs/.
const (
	entryLines     = 2
	entryLineWidth = 110
)

var (
	releaseHeading = regexp.MustCompile(`^## \[(Unreleased\]|\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2})$`)
	// changeKinds are the kinds of change a release section may hold, Keep a Changelog's.
	changeKinds = map[string]bool{"Security": true, "Added": true, "Changed": true, "Deprecated": true, "Removed": true, "Fixed": true}
)

// changelogProblems returns what breaks the changelog's form in md: an entry longer than two
// lines or wider than entryLineWidth, or a heading in a release section that is not a kind of
// change. Only the release sections (## [Unreleased], ## [x.y.z] - date) are read.
func changelogProblems(md string) []string {
	var problems []string
	inRelease, entry, start := false, 0, 0
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		switch {
		case strings.HasPrefix(line, "## "):
			inRelease = releaseHeading.MatchString(line)
			if !inRelease && strings.HasPrefix(line, "## [") {
				problems = append(problems, fmt.Sprintf("line %d: a release heading is ## [x.y.z] - YYYY-MM-DD or ## [Unreleased]: %q", n, line))
			}
			entry = 0
			continue
		case !inRelease:
			continue
		case strings.HasPrefix(line, "### "):
			if kind := strings.TrimPrefix(line, "### "); !changeKinds[kind] {
				problems = append(problems, fmt.Sprintf("line %d: %q is not a kind of change (Security, Added, Changed, Deprecated, Removed, Fixed)", n, kind))
			}
			entry = 0
			continue
		case strings.HasPrefix(line, "- "):
			entry, start = 1, n
		case entry > 0 && strings.HasPrefix(line, "  ") && strings.TrimSpace(line) != "":
			entry++
			if entry == entryLines+1 {
				problems = append(problems, fmt.Sprintf("line %d: the entry has more than %d lines; the detail goes in the commit's body and docs/", start, entryLines))
			}
		default:
			entry = 0
		}
		if entry > 0 && len([]rune(line)) > entryLineWidth {
			problems = append(problems, fmt.Sprintf("line %d: %d characters; wrap entries at %d", n, len([]rune(line)), entryLineWidth))
		}
	}
	return problems
}

func TestChangelogEntriesAreOneOrTwoLines(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	require.NoError(t, err)
	require.Empty(t, changelogProblems(string(b)), "CHANGELOG.md (CONTRIBUTING.md, \"The changelog\")")
	require.Contains(t, string(b), "\n## [Unreleased]\n", "the changelog keeps an Unreleased section")
}

func TestTheChangelogCheckNoticesWhatBreaksTheForm(t *testing.T) {
	ok := "# Changelog\n\n## Versions\n\n- a rule that\n  takes\n  three lines\n\n## [Unreleased]\n\n### Added\n\n- One line.\n- Two\n  lines.\n\n## [0.1.0] - 2026-12-07\n\n### Fixed\n\n- One.\n"
	require.Empty(t, changelogProblems(ok))
	for name, md := range map[string]string{
		"three lines":        strings.Replace(ok, "- Two\n  lines.\n", "- Two\n  lines,\n  three.\n", 1),
		"a line too wide":    strings.Replace(ok, "- One line.\n", "- "+strings.Repeat("x", entryLineWidth)+"\n", 1),
		"no kind of change":  strings.Replace(ok, "### Fixed", "### Misc", 1),
		"an undated release": strings.Replace(ok, "## [0.1.0] - 2026-12-07", "## [0.1.0]", 1),
	} {
		require.NotEmpty(t, changelogProblems(md), name)
	}
}
