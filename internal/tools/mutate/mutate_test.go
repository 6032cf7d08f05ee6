package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `# a comment

name:    one
desc:    weakens a guard
test:    ./pkg/x ^TestX$
file:    a.sql
find:    "  AND x = 1\n"
replace: ""
file:    b.go
find:    if ok {
replace: if true {

name:    two
desc:    another
test:    ./pkg/y ^TestY$/^sub$
file:    a.sql
find:    y
replace: z
`

func TestParseListReadsBlocksAndQuotedValues(t *testing.T) {
	muts, err := ParseList(strings.NewReader(sample), "sample")
	require.NoError(t, err)
	require.Len(t, muts, 2)
	require.Equal(t, Mutation{
		Name: "one", Desc: "weakens a guard", Package: "./pkg/x", Run: "^TestX$", Line: 3,
		Edits: []Edit{{File: "a.sql", Find: "  AND x = 1\n", Replace: ""}, {File: "b.go", Find: "if ok {", Replace: "if true {"}},
	}, muts[0])
	require.Equal(t, "^TestY$/^sub$", muts[1].Run)
	require.False(t, muts[0].Schema())
	require.True(t, Mutation{Edits: []Edit{{File: "migrations/00001_x.sql"}}}.Schema())
}

func TestParseListRefusesMalformedLists(t *testing.T) {
	block := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	ok := []string{"name: a", "desc: d", "test: ./p ^T$", "file: f", "find: x", "replace: y"}
	for what, list := range map[string]string{
		"find without replace":  block(ok[:5]...),
		"replace equal to find": block(append(ok[:5:5], "replace: x")...),
		"no test":               block(ok[0], ok[1], ok[3], ok[4], ok[5]),
		"no desc":               block(ok[0], ok[2], ok[3], ok[4], ok[5]),
		"find before file":      block(ok[0], ok[1], ok[2], ok[4], ok[5]),
		"unknown key":           block(append(ok, "fnd: z")...),
		"name twice":            block(ok...) + "\n" + block(ok...),
		"absolute file":         block(ok[0], ok[1], ok[2], "file: /etc/passwd", ok[4], ok[5]),
		"escaping file":         block(ok[0], ok[1], ok[2], "file: ../x", ok[4], ok[5]),
		"test without package":  block(ok[0], ok[1], "test: ^T$", ok[3], ok[4], ok[5]),
	} {
		_, err := ParseList(strings.NewReader(list), "bad")
		require.Error(t, err, what)
	}
}

func TestApplyEditsOnceAndRestoreUndoesIt(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "q.sql")
	require.NoError(t, os.WriteFile(path, []byte("WHERE a = 1\n  AND b = 2\n"), 0o644))
	m := Mutation{Name: "m", Edits: []Edit{{File: "q.sql", Find: "  AND b = 2\n", Replace: ""}, {File: "q.sql", Find: "a = 1", Replace: "true"}}}

	originals, err := Apply(root, m, true)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "WHERE true\n", string(got))
	require.NoError(t, Restore(root, originals))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "WHERE a = 1\n  AND b = 2\n", string(got))

	for what, find := range map[string]string{"absent": "c = 3", "twice": "= "} {
		_, err := Apply(root, Mutation{Edits: []Edit{{File: "q.sql", Find: find, Replace: "x"}}}, true)
		require.ErrorContains(t, err, "want exactly 1", what)
	}
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "WHERE a = 1\n  AND b = 2\n", string(got), "a failed Apply writes nothing")
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// The mutation list must match the tree: every snippet occurs exactly once in its file, and
// every named test exists. When a query or a migration changes, this test says which
// mutation to update in scripts/mutations.txt.
func TestTheMutationListMatchesTheTree(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	muts, err := ReadList(filepath.Join(root, "scripts", "mutations.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, muts)
	tests := map[string][]string{}
	for _, m := range muts {
		require.NoError(t, Check(root, m), "mutation %s (scripts/mutations.txt line %d) is stale", m.Name, m.Line)
		names, ok := tests[m.Package]
		if !ok {
			files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(m.Package), "*_test.go"))
			require.NoError(t, err)
			for _, f := range files {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				for _, sub := range testFunc.FindAllStringSubmatch(string(b), -1) {
					names = append(names, sub[1])
				}
			}
			tests[m.Package] = names
		}
		top, _, _ := strings.Cut(m.Run, "/")
		re, err := regexp.Compile(top)
		require.NoError(t, err, "mutation %s: -run %q", m.Name, m.Run)
		found := false
		for _, n := range names {
			if re.MatchString(n) {
				found = true
				break
			}
		}
		require.True(t, found, "mutation %s names %s -run %q, which matches no test there", m.Name, m.Package, m.Run)
	}
}
