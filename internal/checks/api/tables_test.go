package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

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

// exportedTables returns "file:line Name" for every exported package-level variable of src
// that holds a slice, a map or an array, by its declared type or by the literal it is set to.
func exportedTables(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !id.IsExported() {
					continue
				}
				typ := vs.Type
				if typ == nil && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.CompositeLit); ok {
						typ = lit.Type
					}
				}
				switch typ.(type) {
				case *ast.ArrayType, *ast.MapType:
					out = append(out, fset.Position(id.Pos()).String()+" "+id.Name)
				}
			}
		}
	}
	return out, nil
}

// No package under pkg/ (its internal packages aside, which no other module imports) exports a
// table as a variable.
func TestImportablePackagesHandOutTablesAsCopies(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "internal" || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tables, err := exportedTables(fset, rel, src)
		if err != nil {
			return err
		}
		found = append(found, tables...)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk read pkg/")
	sort.Strings(found)
	require.Empty(t, found, "exported tables any importer can change: make each a function that returns a copy (as atmosttype.Reasons does)")
}

// The check must notice what it forbids, or TestImportablePackagesHandOutTablesAsCopies proves
// nothing.
func TestTheTableCheckNoticesAnExportedTable(t *testing.T) {
	src := `package p

var Statuses = []int{401, 403}
var Rules map[string]int
var Grid = [2]string{"a", "b"}
var statuses = []int{429}
var Name = "a string is no table"
var ErrX error

func Copy() []int { return []int{429} }
`
	found, err := exportedTables(token.NewFileSet(), "p.go", src)
	require.NoError(t, err)
	require.Equal(t, []string{"p.go:3:5 Statuses", "p.go:4:5 Rules", "p.go:5:5 Grid"}, found)
}
